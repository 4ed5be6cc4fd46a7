"""Every tool-call format against its family's own parser: a reply the grammar accepts is read by mlx-lm's parser (or,
where mlx-lm has none, a reader written here from the family's published format) into the same calls as ours, with
arguments that validate; mutations of accepted replies are refused or read the same way."""
from __future__ import annotations

import functools
import json
import keyword
import random
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mlx_lm.tool_parsers import (
    function_gemma,
    gemma4,
    glm47,
    json_tools,
    kimi_k2,
    kimi_k3,
    longcat,
    minicpm5,
    minimax_m2,
    mistral,
    muse_spark,
    pythonic,
    qwen3_coder,
)

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.tools.formats import FORMATS, format_of_template
from stdsl.errors import SchemaError
from tests.server.test_reply_grammar import _random_accepted

Call = tuple[str, Any]


def _mlx_split(reply: str, start: str, end: str) -> list[str]:
    """The tool texts mlx-lm's server hands its parser: from each start marker to the next end marker (no end
    marker: to the end of the reply), as its text state machine splits them."""
    texts, position = [], 0
    while (found := reply.find(start, position)) >= 0:
        inner = found + len(start)
        close = reply.find(end, inner) if end else -1
        texts.append(reply[inner:] if close < 0 else reply[inner:close])
        if close < 0:
            break
        position = close + len(end)
    return texts


def _mlx_reader(module: Any) -> Any:
    def read(reply: str, tools: list[dict]) -> list[Call]:
        calls: list[Call] = []
        for text in _mlx_split(reply, module.tool_call_start, module.tool_call_end):
            parsed = module.parse_tool_call(text, tools)
            for call in parsed if isinstance(parsed, list) else [parsed]:
                calls.append((call["name"], call["arguments"]))
        return calls
    return read


def _plain_json(reply: str, tools: list[dict]) -> list[Call]:
    if not reply[:1] or reply[0] not in "{[":
        return []
    parsed = json_tools.parse_tool_call(reply, tools)
    return [(c["name"], c["arguments"]) for c in (parsed if isinstance(parsed, list) else [parsed])]


def _llama3(reply: str, tools: list[dict]) -> list[Call]:
    """vLLM's llama3_json reading (`Llama3JsonToolParser.extract_tool_calls`, vllm/tool_parsers/llama_tool_parser.py,
    Apache-2.0), reimplemented: a JSON object is decoded at every `{` not inside the previous one, each a call
    (`arguments`, else `parameters`); a `{` that does not decode, or an object without them, means no calls."""
    if "<|python_tag|>" not in reply and "{" not in reply:
        return []
    decoder, end, calls = json.JSONDecoder(), -1, []
    for match in re.finditer(r"\{", reply):
        if match.start() <= end:
            continue
        try:
            value, end = decoder.raw_decode(reply, match.start())
            calls.append((value["name"], value["arguments"] if "arguments" in value else value["parameters"]))
        except (ValueError, KeyError, TypeError):
            return []
    return calls


# vLLM's deepseek_v3 call pattern (`DeepSeekV3ToolParser.tool_call_regex`, vllm/tool_parsers/deepseekv3_tool_parser.py,
# Apache-2.0), applied to the whole reply once the section marker occurs.
_DEEPSEEK = re.compile(r"<｜tool▁call▁begin｜>(?:.*)<｜tool▁sep｜>(.*)\n```json\n(.*)\n```<｜tool▁call▁end｜>")
_HARMONY = re.compile(r"<\|channel\|>commentary to=functions\.([\w-]+) <\|constrain\|>json<\|message\|>(.*?)<\|call\|>",
                      re.DOTALL)


def _regex_reader(pattern: re.Pattern[str], section: str) -> Any:
    """vLLM's reading: no calls unless the section marker occurs; then every call the pattern finds in the reply."""
    def read(reply: str, tools: list[dict]) -> list[Call]:
        found = pattern.findall(reply) if section in reply else []
        return [(name, json.loads(arguments)) for name, arguments in found]
    return read


FAMILY_READERS = {
    "hermes": _mlx_reader(json_tools), "qwen_xml": _mlx_reader(qwen3_coder), "mistral": _mlx_reader(mistral),
    "mistral_v11": _mlx_reader(mistral), "glm4": _mlx_reader(glm47), "glm47": _mlx_reader(glm47),
    "kimi_k2": _mlx_reader(kimi_k2), "kimi_k3": _mlx_reader(kimi_k3),
    "muse_spark": _mlx_reader(muse_spark), "longcat": _mlx_reader(longcat), "minimax_m2": _mlx_reader(minimax_m2),
    "minicpm5": _mlx_reader(minicpm5), "pythonic": _mlx_reader(pythonic),
    "function_gemma": _mlx_reader(function_gemma), "gemma4": _mlx_reader(gemma4),
    "json": _plain_json, "llama3_json": _llama3, "deepseek_v3": _regex_reader(_DEEPSEEK, "<｜tool▁calls▁begin｜>"),
    "harmony": _regex_reader(_HARMONY, "<|channel|>commentary"),
}
NESTED_REFUSED = {"function_gemma", "gemma4"}
NEEDS_AN_ARGUMENT = {"longcat"}
"""Families whose parser reads no call without an argument (the grammar then needs one, a tool without
parameters is refused)."""

SCALARS = [
    {"type": "string"},
    {"type": "string", "enum": ["celsius", "fahrenheit", "a b"]},
    {"type": "integer", "minimum": -50, "maximum": 5000},
    {"type": "boolean"},
    {"type": "number", "minimum": 0, "maximum": 10},
    {"type": "number"},
    {"type": "integer"},
]
NESTED = [
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 3},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"],
     "additionalProperties": False},
]
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
PYTHON_NAMES = NAMES.filter(lambda name: not keyword.iskeyword(name))
"""Names a pythonic call can write (a keyword as a tool or parameter name does not parse, and is refused)."""


@st.composite
def tool_lists(draw: Any, nested: bool, min_keys: int = 0, python: bool = False) -> list[dict]:
    words = PYTHON_NAMES if python else NAMES
    names = draw(st.lists(words, min_size=1, max_size=3, unique=True))
    tools = []
    for name in names:
        keys = draw(st.lists(words, min_size=min_keys, max_size=3, unique=True))
        properties = {k: draw(st.sampled_from(SCALARS + (NESTED if nested else []))) for k in keys}
        required = [k for k in keys if draw(st.booleans())]
        tools.append({"name": name, "parameters": {"type": "object", "properties": properties, "required": required,
                                                   "additionalProperties": False}})
    return tools


TYPED_BY_THEIR_OWN_TYPE = {"qwen_xml", "minimax_m2", "minicpm5", "function_gemma", "gemma4"}
"""Families whose parser converts a parameter by the `type` written on it, so a reference needs one beside it."""


UNIONS_REFUSED = {"minimax_m2", "minicpm5", "function_gemma", "gemma4"}
"""Families whose parser would read an untyped `anyOf` parameter otherwise than as its JSON value."""


@st.composite
def referring(draw: Any, tools: list[dict], typed: bool, unions: bool) -> list[dict]:
    """`tools` with some parameters moved into `$defs` and referred to (as Pydantic writes an enum or a model:
    `{"$ref": "#/$defs/Name"}`, with the `type` beside it where `typed` or drawn so), or referring to another
    parameter (`#/properties/other`, as zod-to-json-schema writes a repeated schema); with `unions`, an object or
    array parameter made optional or a union of models as Pydantic writes them (`anyOf`, no `type`)."""
    out = []
    for tool in tools:
        parameters = json.loads(json.dumps(tool["parameters"]))
        properties, definitions = parameters["properties"], {}
        for index, key in enumerate(list(properties)):
            how = draw(st.sampled_from(["kept", "defs", "defs", "sibling", "union"]))
            schema = properties[key]
            if how == "union":
                if unions and schema.get("type") in ("object", "array"):
                    definitions[f"D{index}"] = schema
                    other = draw(st.sampled_from([{"type": "null"}, *NESTED]))
                    properties[key] = {"anyOf": [{"$ref": f"#/$defs/D{index}"}, other], "default": None}
                continue
            if how == "kept" or how == "sibling" and index == 0:
                continue
            if how == "defs":
                definitions[f"D{index}"] = schema
                reference: dict[str, Any] = {"$ref": f"#/$defs/D{index}"}
            else:
                other = list(properties)[draw(st.integers(0, index - 1))]
                reference = {"$ref": f"#/properties/{other}"}
                schema = properties[other]
                while "$ref" in schema:
                    schema = definitions[schema["$ref"].split("/")[-1]] if "$defs" in schema["$ref"] else \
                        properties[schema["$ref"].split("/")[-1]]
                if "type" not in schema:
                    continue
            if typed or draw(st.booleans()):
                reference["type"] = schema["type"]
            properties[key] = reference
        if definitions:
            parameters["$defs"] = definitions
        out.append({**tool, "parameters": parameters})
    return out


def _spec(name: str, tools: list[dict], choice: str = "auto", parallel: bool = True) -> dict:
    return {"kind": "tools", "format": name, "tools": tools, "choice": choice, "parallel": parallel, "content": None}


def _openai_tools(tools: list[dict]) -> list[dict]:
    return [{"type": "function", "function": {"name": t["name"], "parameters": t["parameters"]}} for t in tools]


def _check_reply(name: str, reply: str, tools: list[dict]) -> list[Call]:
    """The family's reader and ours agree on the calls, and every call's arguments validate."""
    parameters = {t["name"]: t["parameters"] for t in tools}
    content, ours = FORMATS[name].parse(reply, parameters)
    theirs = FAMILY_READERS[name](reply, _openai_tools(tools))
    assert [(c.name, json.loads(c.arguments)) for c in ours] == theirs, (name, reply)
    for call_name, arguments in theirs:
        jsonschema.validate(arguments, parameters[call_name])
    if FORMATS[name].streams_content:
        assert reply.startswith(content)
    return theirs


def _mutants(reply: str, rng: random.Random) -> list[str]:
    out = []
    for _ in range(6):
        i = rng.randrange(len(reply) + 1)
        kind = rng.random()
        if kind < 0.4 and i < len(reply):
            out.append(reply[:i] + reply[i + 1:])
        elif kind < 0.8:
            out.append(reply[:i] + rng.choice('"{}<>|,:\n a1') + reply[i:])
        else:
            out.append(reply + rng.choice(["\n", "x", "}", "<tool_call>"]))
    return out


@functools.lru_cache(maxsize=64)
def _compiled(spec_text: str) -> Any:
    return build_constraint(json.loads(spec_text), 60)


REFERRING = [pytest.param(False, id="inline"), pytest.param(True, id="referring")]
"""Parameters written in place, or referring into their tool's schema (`$defs`, another parameter, unions of
models): a parameter lowered apart keeps its references; where the family's parser types a parameter by its own
`type`, one is written beside the reference."""


@pytest.mark.parametrize("refer", REFERRING)
@pytest.mark.parametrize("name", sorted(FAMILY_READERS))
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
          phases=[Phase.explicit, Phase.generate])
@given(data=st.data())
def test_accepted_replies_parse_with_the_familys_parser(name: str, refer: bool, data: st.DataObject) -> None:
    _random_walks(name, data, refer)


@pytest.mark.slow
@pytest.mark.parametrize("refer", REFERRING)
@pytest.mark.parametrize("name", sorted(FAMILY_READERS))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])
@given(data=st.data())
def test_accepted_replies_parse_with_the_familys_parser_long(name: str, refer: bool, data: st.DataObject) -> None:
    _random_walks(name, data, refer)


def _random_walks(name: str, data: st.DataObject, refer: bool = False) -> None:
    """Random accepted replies (and accepted mutants) of a random tool list: the family's parser reads the calls
    ours reads, their arguments validate, and tool_choice and parallel_tool_calls hold."""
    tools = data.draw(tool_lists(name not in NESTED_REFUSED, int(name in NEEDS_AN_ARGUMENT), name == "pythonic"))
    if refer:
        tools = data.draw(referring(tools, name in TYPED_BY_THEIR_OWN_TYPE, name not in UNIONS_REFUSED))
    choice = data.draw(st.sampled_from(["auto", "auto", "required", tools[0]["name"]]))
    parallel = data.draw(st.booleans())
    constraint = _compiled(json.dumps(_spec(name, tools, choice, parallel)))
    rng = random.Random(data.draw(st.integers(0, 2**16)))
    calls_seen = 0
    for _ in range(10):
        trigger = FORMATS[name].triggers[:1]
        prefix = (trigger[0].encode() if trigger and choice == "auto" and FORMATS[name].streams_content
                  and rng.random() < 0.6 else b"")
        reply = _random_accepted(constraint.automaton, rng, prefix, soft_limit=160).decode("utf-8")
        calls = _check_reply(name, reply, tools)
        calls_seen += len(calls)
        if choice not in ("auto", "required"):
            assert [c[0] for c in calls] == [choice]
        if choice == "required" or not parallel:
            assert len(calls) >= (choice == "required") and (parallel or len(calls) <= 1)
        for mutant in _mutants(reply, rng):
            if constraint.accepts(mutant.encode()):
                _check_reply(name, mutant, tools)
    if choice != "auto":
        assert calls_seen >= 10


WEATHER = {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city"]}}


def _separators(spaced: bool) -> dict[str, Any]:
    """json.dumps' spelling: its default `", "`/`": "` (what `tojson` renders), or compact."""
    return {} if spaced else {"separators": (",", ":")}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_tool_choice_none_and_rendered_calls(name: str) -> None:
    """choice none: no call can be written; a rendered call is accepted and read back verbatim."""
    tool_format = FORMATS[name]
    none = _compiled(json.dumps(_spec(name, [WEATHER], "none")))
    auto = _compiled(json.dumps(_spec(name, [WEATHER])))
    spaced = tool_format.spacing is not None
    first = tool_format.render("get_weather", json.dumps({"city": "Rome", "days": 3}, **_separators(spaced)), 0)
    second = tool_format.render("get_weather", json.dumps({"city": "Oslo"}, **_separators(spaced)), 1)
    reply = tool_format.join([first, second]) if name != "harmony" else first
    assert auto.accepts(reply.encode()) and not none.accepts(reply.encode())
    content, calls = tool_format.parse(reply, {"get_weather": WEATHER["parameters"]})
    expected = [("get_weather", {"city": "Rome", "days": 3}), ("get_weather", {"city": "Oslo"})]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == expected[: len(calls)]
    assert len(calls) == (1 if name == "harmony" else 2) and calls[0].text == first
    assert _check_reply(name, reply, [WEATHER]) == expected[: len(calls)]


def test_longcat_calls_carry_an_argument() -> None:
    """mlx-lm's longcat parser finds the tool name before the first argument key (a call without one crashes it)."""
    optional = {"name": "f", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 0, "maximum": 9}, "b": {"type": "boolean"}}}}
    constraint = build_constraint(_spec("longcat", [optional], "required"), 60)
    assert not constraint.accepts(b"<longcat_tool_call>f\n</longcat_tool_call>")
    assert constraint.accepts(b"<longcat_tool_call>f\n<longcat_arg_key>b</longcat_arg_key>\n"
                              b"<longcat_arg_value>true</longcat_arg_value>\n</longcat_tool_call>")
    with pytest.raises(SchemaError, match="an argument"):
        build_constraint(_spec("longcat", [{"name": "f", "parameters": {"type": "object"}}]), 60)


@pytest.mark.parametrize(("name", "schema", "word"), [
    ("qwen_xml", {"type": "string", "pattern": "a+"}, "pattern"),
    ("qwen_xml", {"enum": [1, 2]}, "one\ntype|one type"),
    ("gemma4", {"type": "object"}, "strings, numbers"),
    ("glm47", {"type": "string", "maxLength": 3}, "maxLength"),
])
def test_values_a_format_cannot_write_exactly_are_refused_with_their_path(name: str, schema: dict, word: str) -> None:
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"x": schema}}}
    with pytest.raises(SchemaError, match=word) as error:
        build_constraint(_spec(name, [tool]), 60)
    assert "tools[f].function.parameters/properties/x" in error.value.path


@pytest.mark.parametrize(("template", "name"), [
    ("{{ '<|channel|>' }}{{ '<|constrain|>' }}", "harmony"),
    ("<|tool_calls_section_begin|>", "kimi_k2"),
    ("{{ '<|tool_list_start|>' + tools | tojson + '<|tool_list_end|>' }}", "pythonic"),
    ("{{ '<|tool_call_start|>[' + tool_calls + ']<|tool_call_end|>' }}", "pythonic"),
    ("<function name=\"{{ n }}\"><param name=\"{{ k }}\">", "minicpm5"),
    ("{{ '<minimax:tool_call>' }}<invoke name=\"{{ n }}\">", "minimax_m2"),
    ("{{ '<|open|>tools<|sep|>' }}<|open|>call tool=\"{{ n }}\"<|sep|>{{ '<|close|>call<|sep|>' }}", "kimi_k3"),
    ("{{ '<longcat_tool_call>' + name }}<longcat_arg_key>", "longcat"),
    ("{{ '<atem:function_calls>' }}<atem:invoke name=\"{{ n }}\">", "muse_spark"),
    ("<｜tool▁calls▁begin｜>...```json", "deepseek_v3"),
    ("<|tool_call>call:{{ n }}<tool_call|>", "gemma4"),
    ("<start_function_call>", "function_gemma"),
    ("<tool_call>{{ name }}\n<arg_key>{{ k }}</arg_key>\\n<arg_value>", "glm4"),
    ("<tool_call>{{ name }}<arg_key>{{ k }}</arg_key><arg_value>", "glm47"),
    ("<tool_call>\\n<function={{ n }}>\\n<parameter={{ p }}>", "qwen_xml"),
    ("[TOOL_CALLS]{{ name }}[ARGS]", "mistral_v11"),
    ("[AVAILABLE_TOOLS][TOOL_CALLS]", "mistral"),
    ("<|python_tag|>{{ '\"parameters\"' }}", "llama3_json"),
    ("<tool_call>{{ tool_call.name }}</tool_call>", "hermes"),
    ("{{ messages }}", "hermes"),
])
def test_the_chat_template_chooses_the_format(template: str, name: str) -> None:
    assert format_of_template(template).name == name


@pytest.mark.parametrize("kind", ["integer", "number"])
def test_qwen_xml_numbers_stay_within_what_its_parser_reads_exactly(kind: str) -> None:
    """mlx-lm's qwen3_coder reads a number through `float`: a 400-digit integer or `1e999` crashed it
    (OverflowError) and integers past 2^53 came back changed, so the grammar keeps to ±2^53."""
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": kind}}, "required": ["n"]}}
    constraint = build_constraint(_spec("qwen_xml", [tool], "required"), 60)

    def call(value: str) -> bytes:
        return f"<tool_call>\n<function=f>\n<parameter=n>\n{value}\n</parameter>\n</function>\n</tool_call>".encode()

    for value in (str(2**53), str(-(2**53)), "0", "12"):
        assert constraint.accepts(call(value))
        assert FAMILY_READERS["qwen_xml"](call(value).decode(), _openai_tools([tool])) == [("f", {"n": int(value)})]
    for value in (str(2**53 + 1), "1" * 400, "1e999", "13E84216"):
        assert not constraint.accepts(call(value))
    with pytest.raises(SchemaError, match="2\\^53"):
        build_constraint(_spec("qwen_xml", [{"name": "f", "parameters": {"type": "object", "properties": {
            "n": {"type": kind, "minimum": 2**60}}}}]), 60)


READ_AS_DOUBLES = {"qwen_xml"}
"""Families whose parser reads a top-level integer through `float` (the grammar keeps those within ±2^53)."""


def _one_call(name: str, arguments: dict) -> str:
    """A reply holding one call of `f` with `arguments`, as the format writes it (in its spacing)."""
    text = FORMATS[name].render("f", json.dumps(arguments, **_separators(FORMATS[name].spacing is not None)))
    return text if name == "harmony" else FORMATS[name].join([text])


@pytest.mark.parametrize("name", sorted(FAMILY_READERS))
def test_integers_without_a_bound_keep_to_20_digits_in_every_format(name: str) -> None:
    """An unbounded integer argument is at most 20 digits (a 5,000-digit one raised in every family's parser, past
    Python's 4,300-digit limit); the largest accepted is read back exactly by the family's parser, and a stated
    bound is kept as written."""
    largest = 2**53 if name in READ_AS_DOUBLES else 10**20 - 1
    for schema in ({"type": "integer"}, {"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 9}):
        tool = {"name": "f", "parameters": {"type": "object", "properties": {"n": schema}, "required": ["n"]}}
        constraint = _compiled(json.dumps(_spec(name, [tool], "required")))
        high = largest if "maximum" not in schema else 9
        low = -largest if "minimum" not in schema else 0
        for value in (high, low):
            reply = _one_call(name, {"n": value})
            assert constraint.accepts(reply.encode()), (schema, value)
            assert _check_reply(name, reply, [tool]) == [("f", {"n": value})]
        too_long = ("1" + "0" * 20, "-1" + "0" * 20, "9" * 5000) if name not in READ_AS_DOUBLES else (str(2**53 + 1),)
        for text in too_long:
            if ("minimum" in schema and text.startswith("-")) or "maximum" in schema:
                continue
            reply = _one_call(name, {"n": 123454321}).replace("123454321", text)
            assert not constraint.accepts(reply.encode()), (schema, text[:30])
    if name not in READ_AS_DOUBLES:
        stated = {"type": "integer", "minimum": 0, "maximum": 10**25}
        tool = {"name": "f", "parameters": {"type": "object", "properties": {"n": stated}, "required": ["n"]}}
        reply = _one_call(name, {"n": 10**25})
        assert build_constraint(_spec(name, [tool], "required"), 60).accepts(reply.encode())


@pytest.mark.parametrize(("schema", "spelled", "value"), [
    ({"type": "boolean"}, "True", True), ({"type": "boolean"}, "False", False),
    ({"type": "boolean"}, "true", True), ({"type": "boolean"}, "false", False),
    ({"type": "null"}, "None", None), ({"type": "null"}, "null", None),
    ({"type": "boolean", "enum": [True]}, "True", True), ({"type": "boolean", "const": False}, "False", False),
    ({"type": "boolean"}, "TRUE", "refused"), ({"type": "boolean"}, "None", "refused"),
    ({"type": "boolean", "enum": [True]}, "False", "refused"), ({"type": "null"}, "none", "refused"),
])
def test_qwen_xml_booleans_and_null_in_either_templates_spelling(schema: dict, spelled: str, value: Any) -> None:
    """Qwen3-Coder's template writes a boolean or null parameter as Python's `str` of it (`True`, `None`), Qwen3.5's
    as JSON (`true`, `null`): both are accepted and read back by qwen3_coder's parser as the schema's type; a
    spelling it would read as another value (`None` for a boolean is False) is refused."""
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"b": schema}, "required": ["b"]}}
    constraint = _compiled(json.dumps(_spec("qwen_xml", [tool], "required")))
    reply = f"<tool_call>\n<function=f>\n<parameter=b>\n{spelled}\n</parameter>\n</function>\n</tool_call>"
    assert constraint.accepts(reply.encode()) == (value != "refused")
    if value != "refused":
        assert _check_reply("qwen_xml", reply, [tool]) == [("f", {"b": value})]


PYTHONIC_TOOLS = [
    {"name": "get_candidate_status", "parameters": {"type": "object", "properties": {
        "candidate_id": {"type": "string"}}, "required": ["candidate_id"]}},
    {"name": "configure", "parameters": {"type": "object", "properties": {
        "options": {"type": "object", "properties": {"position": {"type": "array", "items": {"type": "integer"}},
                                                     "enabled": {"type": "boolean"}}},
        "verbose": {"type": "boolean"}, "note": {"type": ["string", "null"]}, "level": {"type": "null"}}}},
]


@pytest.mark.parametrize(("reply", "calls"), [
    ('<|tool_call_start|>[get_candidate_status(candidate_id="12345")]<|tool_call_end|>',
     [("get_candidate_status", {"candidate_id": "12345"})]),
    ('Checking. <|tool_call_start|>[get_candidate_status(candidate_id="a\\"b\\u00e9\\n"), configure()]'
     '<|tool_call_end|>', [("get_candidate_status", {"candidate_id": 'a"bé\n'}), ("configure", {})]),
    ('<|tool_call_start|>[configure(options={"position": [0, 1], "enabled": true}, verbose=True, note=null, '
     'level=None)]<|tool_call_end|>',
     [("configure", {"options": {"position": [0, 1], "enabled": True}, "verbose": True, "note": None,
                     "level": None})]),
    ('<|tool_call_start|>[configure(verbose=false, note="😀/")]<|tool_call_end|>',
     [("configure", {"verbose": False, "note": "😀/"})]),
    ('<|tool_call_start|>[configure(options={"position": [-1, 2], "enabled": True}, note=None)]<|tool_call_end|>',
     [("configure", {"options": {"position": [-1, 2], "enabled": True}, "note": None})]),
    ("<|tool_call_start|>[get_candidate_status(candidate_id='it\\'s \"12\"'), configure(options={'enabled': True}, "
     "note='\\u00e9')]<|tool_call_end|>",
     [("get_candidate_status", {"candidate_id": 'it\'s "12"'}), ("configure", {"options": {"enabled": True},
                                                                              "note": "é"})]),
])
def test_pythonic_replies_in_lfm2s_spelling_are_accepted_and_read_by_its_parser(reply: str, calls: list) -> None:
    """LFM2's calls (its model card's spelling: JSON values, strings in double or single quotes, constants named as
    in JSON or Python) are accepted and mlx-lm's pythonic parser reads the calls stdsl reads."""
    constraint = _compiled(json.dumps(_spec("pythonic", PYTHONIC_TOOLS)))
    assert constraint.accepts(reply.encode())
    assert _check_reply("pythonic", reply, PYTHONIC_TOOLS) == calls


@pytest.mark.parametrize("reply", [
    '<|tool_call_start|>[configure(note="a\\/b")]<|tool_call_end|>',
    '<|tool_call_start|>[configure(note="\\ud83d\\ude00")]<|tool_call_end|>',
    '<|tool_call_start|>[configure(verbose=None)]<|tool_call_end|>',
    "<|tool_call_start|>[configure(note='it's')]<|tool_call_end|>",
    "<|tool_call_start|>[configure(note='a\\/b')]<|tool_call_end|>",
    '<|tool_call_start|>[configure(verbose=true,)]<|tool_call_end|>',
    '<|tool_call_start|>[get_candidate_status()]<|tool_call_end|>',
])
def test_pythonic_spellings_python_reads_otherwise_are_refused(reply: str) -> None:
    """`\\/` and surrogate escapes read differently in Python than in JSON; the rest break the schema or the
    syntax."""
    assert not _compiled(json.dumps(_spec("pythonic", PYTHONIC_TOOLS))).accepts(reply.encode())


@pytest.mark.parametrize(("tool", "where"), [
    ({"name": "get-weather", "parameters": {"type": "object"}}, "tools[get-weather].function.parameters"),
    ({"name": "class", "parameters": {"type": "object"}}, "tools[class].function.parameters"),
    ({"name": "f", "parameters": {"type": "object", "properties": {"from": {"type": "string"}}}},
     "tools[f].function.parameters/properties/from"),
])
def test_pythonic_names_that_are_not_python_identifiers_are_refused(tool: dict, where: str) -> None:
    with pytest.raises(SchemaError, match="Python identifier") as error:
        build_constraint(_spec("pythonic", [tool]), 60)
    assert error.value.path == where


def test_mistral_calls_carry_the_id_its_templates_write() -> None:
    """Mistral's pre-v11 templates end every past call `, "id": "<9 alphanumerics>"}`: such a call is accepted, its id
    read as mlx-lm's mistral parser reads it (the server returns it), and a call without an id still is."""
    constraint = _compiled(json.dumps(_spec("mistral", [WEATHER], "required")))
    reply = ('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Rome"}, "id": "a1B2c3D4e"}, '
             '{"name": "get_weather", "arguments": {"city": "Oslo"}}]')
    assert constraint.accepts(reply.encode())
    _, calls = FORMATS["mistral"].parse(reply, {"get_weather": WEATHER["parameters"]})
    theirs = mistral.parse_tool_call(reply[len("[TOOL_CALLS]"):], _openai_tools([WEATHER]))
    assert [c.id for c in calls] == [t.get("id") for t in theirs] == ["a1B2c3D4e", None]
    assert _check_reply("mistral", reply, [WEATHER]) == [("get_weather", {"city": "Rome"}),
                                                          ("get_weather", {"city": "Oslo"})]
    for bad_id in ("a1B2c3D4", "a1B2c3D4e5", "a1B2c3D4-"):
        assert not constraint.accepts(reply.replace("a1B2c3D4e", bad_id).encode())
