"""Structural tags lowered to the IR against XGrammar's own reading of them, refusals by field path, and grammars,
grammar fields and structural tags through a real server and the `openai` client."""
from __future__ import annotations

import functools
import json
import random
import re

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.tools.formats.xml_arguments import STYLES
from stdsl.errors import CompileError
from tests.compiler.tools.formats.test_xgrammar_regex import REGEX_TEXTS
from tests.compiler.tools.formats.test_xml_arguments import CODER_TAG, CODER_TEXTS
from tests.compiler.tools.formats.xml_argument_texts import (
    BOUNDED,
    CONTAINERS,
    SCALARS,
    mixed_enum,
    mutated,
    schemas,
    spellings,
)
from tests.server.server_fixtures import running_server

INTEGER = {"type": "json_schema", "json_schema": {"type": "integer", "minimum": 0, "maximum": 99}}
TAGS = [{"type": "tag", "begin": "<f>", "content": INTEGER, "end": "</f>"},
        {"type": "tag", "begin": "<g=", "content": {"type": "regex", "pattern": "[ab]{1,2}"}, "end": ["/>", "</g>"]}]
FORMATS = [
    *({"type": "triggered_tags", "triggers": ["<f", "<g"], "tags": TAGS, "at_least_one": first,
       "stop_after_first": stop} for first in (False, True) for stop in (False, True)),
    {"type": "tag", "begin": "<t>", "content": {"type": "any_text", "excludes": ["zz"]}, "end": "</t>"},
    {"type": "sequence", "elements": [{"type": "const_string", "value": "A:"},
                                      {"type": "or", "elements": [INTEGER, {"type": "const_string", "value": "x"}]}]},
    {"type": "grammar", "grammar": 'root ::= "(" [a-c]* ")"'},
    *({"type": "tags_with_separator", "tags": TAGS, "separator": ",", "at_least_one": first,
       "stop_after_first": stop} for first in (False, True) for stop in (False, True)),
    {"type": "sequence", "elements": [{"type": "optional", "content": {"type": "const_string", "value": "A:"}},
                                      {"type": "plus", "content": INTEGER}]},
    {"type": "star", "content": {"type": "or", "elements": [{"type": "const_string", "value": "x"}, TAGS[0]]}},
    {"type": "repeat", "min": 1, "max": 3, "content": {"type": "const_string", "value": "ab"}},
    {"type": "repeat", "min": 2, "max": -1, "content": TAGS[1]},
]
PIECES = ["<f>7</f>", "<g=ab/>", "<t>hi</t>", "A:42", "(ab)", ",", ",<f>7</f>",
          "<f>", "</f>", "<g=", "/>", "</g>", "7", "42", "x", "a", "b", "<t>", "</t>", "zz", "z", "A:", "(", ")", "c",
          "<", "hi ", ""]

EXAMPLES = ["ab", "abab", "ababab", "abababab", "<g=ab/><g=a/>", "<g=b</g>", "<f>7</f>,<g=ab/>", "x<f>7</f>x", "A:4242"]
"""Texts every format's check reads besides the random ones (some format accepts each)."""


@functools.cache
def _xgrammar(index: int):
    xgr = pytest.importorskip("xgrammar")
    return xgr.Grammar.from_structural_tag(json.dumps({"type": "structural_tag", "format": FORMATS[index]}))


def _xgrammar_accepts(index: int, text: str) -> bool:
    grammar = _xgrammar(index)  # skips the test where xgrammar (a peer, in the bench extra) is not installed
    from xgrammar.testing import _is_grammar_accept_string

    return bool(_is_grammar_accept_string(grammar, text))


@pytest.mark.parametrize("index", range(len(FORMATS)))
def test_lowering_accepts_what_xgrammar_accepts(index: int) -> None:
    fmt = FORMATS[index]
    ours = build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)
    rng = random.Random(index)
    texts = {"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6))) for _ in range(300)} | set(EXAMPLES)
    accepted = 0
    for text in sorted(texts):
        expected = _xgrammar_accepts(index, text)
        accepted += expected
        assert ours.accepts(text.encode()) == expected, (fmt, text)
    assert accepted >= 1


def _xgrammar_reads(fmt: dict, texts: list[str]) -> list[bool]:
    xgr = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    grammar = xgr.Grammar.from_structural_tag(json.dumps({"type": "structural_tag", "format": fmt}))
    return [bool(_is_grammar_accept_string(grammar, text)) for text in texts]


def _walks(automaton, rng: random.Random, count: int, length: int = 60) -> list[str]:
    """Texts a random walk through `automaton` ends on (steered to an end after `length` bytes)."""
    texts = []
    distance = automaton.min_bytes_to_accept
    for _ in range(count):
        state, out = 0, bytearray()
        while True:
            live = automaton.live_bytes(state)
            if automaton.accepting[state] and (not live or len(out) >= length or rng.random() < 0.1):
                break
            if len(out) < length:
                byte = rng.choice(live)
            else:
                byte = min(live, key=lambda b: distance[automaton.next_state(state, b)])
            out.append(byte)
            state = automaton.next_state(state, byte)
        texts.append(out.decode())
    return texts


def test_a_tag_schema_writes_integers_as_xgrammar_reads_them() -> None:
    """An integer is not written `1.0` in a tag's schema, nested or not (JSON Schema reads it as 1; XGrammar does
    not), in the `json` style and in an XML style's JSON values."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "l": {"type": "array", "items": {
        "type": "integer"}}}, "required": ["n", "l"]}
    for fmt, texts in [({"type": "json_schema", "json_schema": schema},
                        ['{"n":1,"l":[2]}', '{"n":1.0,"l":[2]}', '{"n":1,"l":[2.0]}', '{"n":-0,"l":[]}']),
                       ({"type": "json_schema", "json_schema": schema, "style": "qwen_xml"},
                        ["<parameter=n>1</parameter><parameter=l>[2]</parameter>",
                         "<parameter=n>1.0</parameter><parameter=l>[2]</parameter>",
                         "<parameter=n>1</parameter><parameter=l>[2.0]</parameter>"])]:
        ours = build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)
        assert [ours.accepts(text.encode()) for text in texts] == _xgrammar_reads(fmt, texts)
        assert ours.accepts(texts[0].encode())


def test_tag_regex_texts_are_read_as_by_xgrammar() -> None:
    for pattern, text, accepted in REGEX_TEXTS:
        assert _xgrammar_reads({"type": "regex", "pattern": pattern}, [text]) == [accepted], (pattern, text)


REGEX_ATOMS = [r"\d", r"\w", r"\s", ".", r"\D", r"\W", r"\S", r"[\d]", r"[^\s]", r"[a\w-]", r"[\S.]", "a", r"\.",
               "(?:x|\\d)"]
REGEX_CHARS = "a7_ .-x\n\t\\d\u0663\u00e9\u3000\ufeff\x85\x1c\u2028\U0001f600"


@settings(max_examples=40, deadline=None)
@given(atoms=st.lists(st.tuples(st.sampled_from(REGEX_ATOMS), st.sampled_from(["", "*", "+", "?", "{2}"])),
                      min_size=1, max_size=3),
       texts=st.lists(st.text(alphabet=REGEX_CHARS, max_size=4), min_size=20, max_size=20))
def test_tag_regexes_accept_what_xgrammar_accepts(atoms: list[tuple[str, str]], texts: list[str]) -> None:
    fmt = {"type": "regex", "pattern": "".join(atom + quantifier for atom, quantifier in atoms)}
    ours = build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)
    assert [ours.accepts(text.encode()) for text in texts] == _xgrammar_reads(fmt, texts), fmt


def test_qwen3_coder_texts_are_read_as_by_xgrammar() -> None:
    texts = [CODER_TAG["begin"] + body + CODER_TAG["end"] for body, _ in CODER_TEXTS]
    assert _xgrammar_reads(CODER_TAG, texts) == [accepted for _, accepted in CODER_TEXTS]


def _referring(schema: dict, rng: random.Random) -> dict:
    """`schema` with some parameters moved into `$defs` and referred to (a description beside the reference, or
    not), as Pydantic writes a tool's enums and models."""
    properties, definitions = {}, {}
    for index, (key, value) in enumerate(schema["properties"].items()):
        if rng.random() < 0.5:
            definitions[f"D{index}"] = value
            value = {"$ref": f"#/$defs/D{index}", **({"description": "d"} if rng.random() < 0.5 else {})}
        properties[key] = value
    return {**schema, "properties": properties, "$defs": definitions}


@settings(max_examples=60, deadline=None)
@given(schema=schemas(st.one_of(SCALARS, BOUNDED, CONTAINERS)), style=st.sampled_from(sorted(STYLES)),
       max_run=st.sampled_from([None, None, 1, 2]), seed=st.integers(0, 2**16), refer=st.booleans())
def test_xml_argument_styles_accept_what_xgrammar_accepts(schema: dict, style: str, max_run: int | None,
                                                          seed: int, refer: bool) -> None:
    """Every style on random schemas, their parameters written in place or referring into `$defs`: spellings,
    their mutations and walks through our automaton read the same by both, but where a value is written as the
    `json` style writes it and XGrammar reads more: a container (we write it compact) or a number (XGrammar also
    reads `-0.0` above a negative minimum and `1e400`); there we accept no text XGrammar refuses."""
    rng = random.Random(seed)
    fmt = {"type": "json_schema", "json_schema": _referring(schema, rng) if refer else schema, "style": style,
           "max_whitespace_cnt": max_run}
    if mixed_enum(schema, style):
        return  # refused (`test_xml_arguments`): XGrammar lets the type attribute be any type there
    ours = build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)
    texts = [spellings(schema, style, rng, max_run) for _ in range(25)]
    texts += [mutated(rng.choice(texts), rng) for _ in range(25)]
    walked = _walks(ours.automaton, rng, 10)
    subset = any(value.get("type") in ("number", "array", "object") for value in schema["properties"].values())
    for text, theirs in zip(texts + walked, _xgrammar_reads(fmt, texts + walked)):
        mine = ours.accepts(text.encode())
        assert mine <= theirs if subset else mine == theirs, (schema, style, text, theirs)


@pytest.mark.parametrize("model", ["qwen_3_coder", "minimax", "glm_4_7"])
def test_model_tags_of_xml_arguments_are_read_as_by_xgrammar(model: str) -> None:
    """XGrammar's own tags of the XML styles (Qwen3-Coder `qwen_xml`, MiniMax `minimax_xml`, GLM 4.7 `glm_xml`)
    for three tools: walks through our automaton, calls written out, pieces of them and their mutations."""
    xgr = pytest.importorskip("xgrammar")
    tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": schema}} for i, schema in enumerate([
        {"type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer"}}, "required": ["q"]},
        {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]},
        {"type": "object", "properties": {}}])]
    fmt = json.loads(xgr.get_model_structural_tag(model, tools=tools, reasoning=False).model_dump_json())["format"]
    ours = build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)
    rng = random.Random(5)
    walked = _walks(ours.automaton, rng, 30, 120)
    pieces = [text[i:j] for text in walked for i, j in [sorted(rng.choices(range(len(text) + 1), k=2))]]
    pieces += ["<tool_call>\n<function=f0>\n<parameter=q>\nfind it\n</parameter>\n</function>\n</tool_call>",
               "<tool_call>\n<function=f2>\n\n</function>\n</tool_call>", "hi ", "<think>"]
    texts = walked + ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 3))) for _ in range(60)]
    texts += [mutated(rng.choice(texts), rng) for _ in range(60)]
    for text, theirs in zip(texts, _xgrammar_reads(fmt, texts)):
        assert ours.accepts(text.encode()) == theirs, text


def test_the_older_structures_form_is_triggered_tags() -> None:
    tag = {"structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}], "triggers": ["<f"]}
    ours = build_constraint({"kind": "structural_tag", "tag": tag}, 30)
    assert ours.accepts(b"say <f>12</f> and <f>3</f>") and not ours.accepts(b"<f>x</f>")


@pytest.mark.parametrize(("fmt", "where"), [
    ({"type": "token", "token": 5}, "response_format.format.type"),
    ({"type": "sequence", "elements": [{"type": "any_tokens"}]}, "response_format.format.elements[0].type"),
    ({"type": "json_schema", "json_schema": {}, "style": "gemma"}, "response_format.format.style"),
    ({"type": "triggered_tags", "triggers": ["<x"], "tags": TAGS}, "response_format.format.tags[0].begin"),
    ({"type": "any_text", "max_tokens": 4}, "response_format.format.max_tokens"),
    ({"type": "repeat", "min": 3, "max": 2, "content": INTEGER}, "response_format.format"),
    ({"type": "tags_with_separator", "tags": TAGS}, "response_format.format.separator"),
    ({"type": "grammar", "grammar": "root ::= ("}, "response_format.format.grammar"),
])
def test_unsupported_primitives_are_refused_by_field_path(fmt: dict, where: str) -> None:
    with pytest.raises(CompileError, match=where.replace("[", r"\[").replace("]", r"\]")):
        build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)


@pytest.fixture(scope="module")
def client(tiny_model):
    with running_server(tiny_model, max_rows=4) as url:
        yield openai.OpenAI(base_url=url, api_key="none", max_retries=0)


LARK = 'start: "x=" NUM (";" NUM)*\nNUM: /[0-9]{1,3}/'
GBNF = 'root ::= "ok" [0-9] "!"'


def _chat(client, max_tokens: int = 24, **extra) -> str:
    reply = client.chat.completions.create(model="tiny-random-llama", max_tokens=max_tokens, temperature=1.0, seed=3,
                                           messages=[{"role": "user", "content": "go"}], extra_body=extra)
    return reply.choices[0].message.content or ""


def test_grammar_fields_and_structural_tags_through_the_server(client) -> None:
    import lark

    parser = lark.Lark(LARK, parser="earley", lexer="dynamic")
    parser.parse(_chat(client, guided_grammar=LARK))
    assert re.fullmatch(r"ok[0-9]!", _chat(client, structured_outputs={"grammar": GBNF}))
    tag = {"type": "structural_tag", "format": FORMATS[1]}
    content = _chat(client, max_tokens=40, response_format=tag)
    assert build_constraint({"kind": "structural_tag", "tag": {"format": FORMATS[1]}}, 30).accepts(content.encode())
    with pytest.raises(openai.BadRequestError, match=r"guided_grammar:1:\d+"):
        _chat(client, guided_grammar='start: "a" (')
    with pytest.raises(openai.BadRequestError, match=r"response_format\.format\.type"):
        _chat(client, response_format={"type": "structural_tag", "format": {"type": "token", "token": 1}})


@pytest.mark.parametrize("key", ["at_least_one", "stop_after_first"])
def test_a_flag_that_is_not_a_boolean_is_refused_at_its_path(key: str) -> None:
    """`at_least_one: "no"` was read as true; a flag must be true or false."""
    fmt = {"type": "triggered_tags", "triggers": ["<f"], key: "no",
           "tags": [{"type": "tag", "begin": "<f>", "content": {"type": "json_schema", "json_schema": {
               "type": "integer"}}, "end": "</f>"}]}
    with pytest.raises(CompileError, match=rf"{key}.*true or false"):
        build_constraint({"kind": "structural_tag", "tag": {"format": fmt}}, 30)
