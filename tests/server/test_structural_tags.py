"""Structural tags lowered to the IR against XGrammar's own reading of them, refusals by field path, and grammars,
grammar fields and structural tags through a real server and the `openai` client."""
from __future__ import annotations

import functools
import json
import random
import re

import openai
import pytest

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.errors import CompileError
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


def test_the_older_structures_form_is_triggered_tags() -> None:
    tag = {"structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}], "triggers": ["<f"]}
    ours = build_constraint({"kind": "structural_tag", "tag": tag}, 30)
    assert ours.accepts(b"say <f>12</f> and <f>3</f>") and not ours.accepts(b"<f>x</f>")


@pytest.mark.parametrize(("fmt", "where"), [
    ({"type": "token", "token": 5}, "response_format.format.type"),
    ({"type": "sequence", "elements": [{"type": "any_tokens"}]}, "response_format.format.elements[0].type"),
    ({"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}, "response_format.format.style"),
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
