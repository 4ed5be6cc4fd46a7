"""Recursive constraints inside the reply grammars (`pushdown.embedding`): a recursive tool parameter schema, a
recursive custom-tool grammar, a recursive response format beside tools and a recursive grammar in a structural
tag make the reply's constraint a pushdown; every reply is read back as before (the family's own parser, jsonschema
for the arguments, lark's Earley parser for the input, XGrammar for the tag), through the real `openai` client."""
from __future__ import annotations

import functools
import json
import random
from typing import Any

import jsonschema
import lark
import numpy as np
import openai
import pytest

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.tools.formats import FORMATS
from stdsl.compiler.tools.formats.base import CUSTOM_PARAMETERS
from stdsl.errors import CompileError
from tests.server.server_fixtures import running_server
from tests.server.test_tool_formats import FAMILY_READERS, _check_reply

FILTER = {"type": "object", "$defs": {"node": {"anyOf": [
    {"type": "object", "properties": {"field": {"type": "string", "maxLength": 6}, "eq": {"type": "integer"}},
     "required": ["field", "eq"], "additionalProperties": False},
    {"type": "object", "properties": {"and": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
     "required": ["and"], "additionalProperties": False}]}},
    "properties": {"where": {"$ref": "#/$defs/node"}, "limit": {"type": "integer", "minimum": 1, "maximum": 9}},
    "required": ["where"], "additionalProperties": False}
PING = {"type": "object", "properties": {}, "additionalProperties": False}
TOOLS = [{"name": "query", "parameters": FILTER}, {"name": "ping", "parameters": PING}]
ARITHMETIC = '''start: sum
sum: product (("+" | "-") product)*
product: atom ("*" atom)*
atom: /[0-9]{1,3}/ | "(" sum ")"'''
JSON_FAMILIES = sorted(name for name in FAMILY_READERS if name not in (
    "qwen_xml", "glm4", "glm47", "longcat", "minimax_m2", "minicpm5", "muse_spark", "pythonic", "function_gemma",
    "gemma4"))
"""The families that write arguments as one JSON text (the XML-like ones and pythonic write each parameter apart and
resolve no `$ref` across parameters; a custom input there is raw text, refused below when it recurses)."""
JSON_STRING_INPUTS = sorted([*JSON_FAMILIES, "pythonic"])
"""The families that write a custom tool's input as a JSON string (so a recursive one is carried exactly)."""


def random_reply(constraint: PushdownConstraint, rng: random.Random, soft_limit: int = 200) -> bytes:
    """A random complete output of a pushdown: random live bytes, steered to the shortest completion when long."""
    machine = constraint.machine
    config, out = machine.start, bytearray()
    while True:
        row = machine.byte_row(config)
        live = np.flatnonzero(row >= 0).tolist()
        if machine.config_accepts(config) and (not live or len(out) > soft_limit or rng.random() < 0.05):
            return bytes(out)
        if len(out) > soft_limit:
            live = [b for b in live if machine.need(int(row[b])) < machine.need(config)] or live
        byte = rng.choice(live)
        out.append(byte)
        config = int(row[byte])


@functools.cache
def _arithmetic() -> lark.Lark:
    return lark.Lark(ARITHMETIC, parser="earley")


def _in_arithmetic(text: str) -> bool:
    try:
        _arithmetic().parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def _custom_entry(definition: str, field: str = "tools[0].custom.format.definition") -> dict:
    return {"name": "calc", "custom": {"syntax": "lark", "definition": definition, "field": field}}


@pytest.mark.parametrize("name", JSON_FAMILIES)
def test_recursive_parameters_parse_with_the_familys_parser_and_validate(name: str) -> None:
    spec = {"kind": "tools", "format": name, "tools": TOOLS, "choice": "required", "parallel": True, "content": None}
    constraint = build_constraint(spec, 60)
    assert isinstance(constraint, PushdownConstraint)
    rng, calls = random.Random(name), 0
    for _ in range(12):
        calls += len(_check_reply(name, random_reply(constraint, rng).decode("utf-8"), TOOLS))
    assert calls >= 12
    def written(arguments: dict) -> bytes:
        spelling = {} if FORMATS[name].spacing else {"separators": (",", ":")}
        call = FORMATS[name].render("query", json.dumps(arguments, **spelling))
        return FORMATS[name].join([call]).encode()

    assert constraint.accepts(written({"where": {"and": [{"and": [{"field": "a", "eq": 1}]}, {"and": []}]}}))
    assert not constraint.accepts(written({"where": {"and": [{"and": [{"field": "a"}]}]}}))


@pytest.mark.parametrize("name", JSON_FAMILIES)
def test_recursive_parameters_under_auto_take_text_or_calls(name: str) -> None:
    """tool_choice "auto" beside a recursive parameter: one byte of lookahead decides where the call starts in
    every family (the plain `json` format's text-then-calls met an L(1) conflict before)."""
    spec = {"kind": "tools", "format": name, "tools": TOOLS, "choice": "auto", "parallel": True, "content": None}
    constraint = build_constraint(spec, 60)
    spelling = {} if FORMATS[name].spacing else {"separators": (",", ":")}
    call = FORMATS[name].render("query", json.dumps({"where": {"and": [{"field": "a", "eq": 1}]}}, **spelling))
    assert constraint.accepts(FORMATS[name].join([call]).encode())
    assert constraint.accepts(b"No call needed.") or name == "harmony"  # Harmony's content is its final channel


@pytest.mark.parametrize("name", JSON_STRING_INPUTS)
def test_a_recursive_custom_grammar_is_read_back_in_its_language(name: str) -> None:
    spec = {"kind": "tools", "format": name, "tools": [_custom_entry(ARITHMETIC)], "choice": "required",
            "parallel": False, "content": None}
    constraint = build_constraint(spec, 60)
    tool_format = FORMATS[name]
    rng = random.Random(name)
    for _ in range(10):
        reply = random_reply(constraint, rng, soft_limit=80).decode("utf-8")
        _, calls = tool_format.parse(reply, {"calc": CUSTOM_PARAMETERS})
        assert len(calls) == 1, reply
        raw = tool_format.custom_input(calls[0].arguments)
        assert _in_arithmetic(raw), (reply, raw)
    for raw, inside in (("(1+2)*(3-(4))", True), ("((1)", False), ("1+", False), ("2*((3))", True)):
        rendered = tool_format.join([tool_format.render("calc", tool_format.custom_arguments(raw))])
        assert constraint.accepts(rendered.encode()) == inside, rendered


@pytest.mark.parametrize("name", ["qwen_xml", "glm47", "gemma4"])
def test_a_recursive_custom_grammar_written_raw_is_refused_naming_the_field(name: str) -> None:
    spec = {"kind": "tools", "format": name, "tools": [_custom_entry(ARITHMETIC)], "choice": "auto",
            "parallel": True, "content": None}
    with pytest.raises(CompileError, match=r"^tools\[0\]\.custom\.format\.definition: the grammar is recursive"):
        build_constraint(spec, 60)


def test_a_recursive_response_format_beside_tools() -> None:
    content = {"kind": "json_schema", "strict": True, "schema": FILTER["$defs"]["node"] | {"$defs": FILTER["$defs"]}}
    spec = {"kind": "tools", "format": "hermes", "tools": TOOLS, "choice": "auto", "parallel": True,
            "content": content}
    constraint = build_constraint(spec, 60)
    assert isinstance(constraint, PushdownConstraint)
    assert constraint.accepts(b'{"and":[{"and":[{"field":"x","eq":2}]}]}')
    assert not constraint.accepts(b'{"and":[{"and":[{"field":"x"}]}]}')
    assert constraint.accepts(FORMATS["hermes"].join([FORMATS["hermes"].render("ping", "{}")]).encode())


RECURSIVE_TAG = {"type": "tag", "begin": "<e>", "end": "</e>",
                 "content": {"type": "grammar", "grammar": 'root ::= "(" root* ")" | "x"'}}


def test_a_recursive_grammar_in_a_structural_tag_accepts_what_xgrammar_accepts() -> None:
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    fmt = {"type": "triggered_tags", "triggers": ["<e>"], "tags": [RECURSIVE_TAG], "at_least_one": False,
           "stop_after_first": False}
    ours = build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)
    assert isinstance(ours, PushdownConstraint)
    theirs = xgr.Grammar.from_structural_tag(json.dumps({"type": "structural_tag", "format": fmt}))
    rng = random.Random(3)
    pieces = ["<e>", "</e>", "(", ")", "x", "hi ", "<", "e>", ""]
    texts = {"".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) for _ in range(150)}
    accepted = 0
    for text in sorted(texts):
        expected = bool(_is_grammar_accept_string(theirs, text))
        accepted += expected
        assert ours.accepts(text.encode()) == expected, text
    assert accepted >= 5


def test_a_conflict_at_a_join_is_refused_naming_the_tags_field() -> None:
    numbers = {"$defs": {"n": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}},
               "$ref": "#/$defs/n"}
    fmt = {"type": "tag", "begin": "<n>", "content": {"type": "json_schema", "json_schema": numbers}, "end": "0</n>"}
    with pytest.raises(CompileError) as error:
        build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)
    assert str(error.value).startswith("response_format.format.content.json_schema: ")
    assert "#/$defs/n" in str(error.value) and "change the text right after it" in str(error.value)


@pytest.fixture(scope="module")
def client(tiny_model):
    with running_server(tiny_model, max_rows=4) as url:
        yield openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=120)


ASK = [{"role": "user", "content": "Find the rows where a is 1 and b is 2."}]


def _openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t["name"], "parameters": t["parameters"]}} for t in tools]


def test_recursive_tool_arguments_through_the_server_validate(client) -> None:
    reply = client.chat.completions.create(model="m", messages=ASK, tools=_openai_tools(TOOLS),
                                           tool_choice="required", n=2, max_tokens=70, temperature=1.0, seed=7)
    calls = 0
    for choice in reply.choices:
        assert choice.message.tool_calls, choice
        for call in choice.message.tool_calls:
            arguments = json.loads(call.function.arguments)
            jsonschema.validate(arguments, {"query": FILTER, "ping": PING}[call.function.name])
            calls += 1
    assert calls >= 2


def test_a_recursive_custom_tool_through_the_server_returns_input_in_its_language(client) -> None:
    tool = {"type": "custom", "custom": {"name": "calc", "format": {"type": "grammar", "grammar": {
        "syntax": "lark", "definition": ARITHMETIC}}}}
    reply = client.chat.completions.create(model="m", messages=ASK, tools=[tool], tool_choice="required", n=2,
                                           max_tokens=60, temperature=1.0, seed=3)
    for choice in reply.choices:
        assert choice.message.tool_calls, choice
        for call in choice.message.tool_calls:
            assert call.type == "custom" and _in_arithmetic(call.custom.input), call.custom.input


def test_a_recursive_grammar_in_a_structural_tag_through_the_server(client) -> None:
    fmt = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "E="}, RECURSIVE_TAG]}}
    reply = client.chat.completions.create(model="m", messages=ASK, response_format=fmt, max_tokens=60,
                                           temperature=1.0, seed=1)
    text = reply.choices[0].message.content
    assert text.startswith("E=<e>") and text.endswith("</e>"), text


def test_a_conflict_at_a_join_is_a_400_naming_the_part(client) -> None:
    numbers = {"$defs": {"n": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}},
               "$ref": "#/$defs/n"}
    fmt = {"type": "structural_tag", "format": {"type": "tag", "begin": "<n>", "end": "0</n>",
                                                "content": {"type": "json_schema", "json_schema": numbers}}}
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="m", messages=ASK, response_format=fmt, max_tokens=20)
    assert "json_schema" in error.value.body["message"] and "#/$defs/n" in error.value.body["message"]
