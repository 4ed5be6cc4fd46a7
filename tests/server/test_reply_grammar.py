"""The tool reply grammar: every reply it accepts parses into free text and calls whose arguments validate."""
from __future__ import annotations

import functools
import json
import random

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.constraint_spec import build_constraint, canonical_text
from stdsl.compiler.tools.formats import FORMATS as SYNTAXES
from stdsl.compiler.tools.formats import format_of_template as syntax_of_template
from stdsl.errors import CompileError, SchemaError

WEATHER = {"name": "get_weather", "parameters": {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city"]}}
SEARCH = {"name": "search", "parameters": {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["query", "limit"]}}
TOOLS = [WEATHER, SEARCH]
PARAMETERS = {t["name"]: t["parameters"] for t in TOOLS}


@functools.cache
def _auto(syntax: str):
    """The auto reply constraint of TOOLS, compiled once per syntax."""
    return build_constraint(_spec(syntax), 60)


def _spec(syntax: str, choice: str = "auto", parallel: bool = True, content: dict | None = None) -> dict:
    return {"kind": "tools", "format": syntax, "tools": TOOLS, "choice": choice, "parallel": parallel,
            "content": content}


def _random_accepted(automaton: Automaton, rng: random.Random, prefix: bytes = b"", soft_limit: int = 120) -> bytes:
    """A random string of the language starting with `prefix`: random live bytes, steered to acceptance late."""
    state, out = automaton.step(0, prefix), bytearray(prefix)
    assert state >= 0
    distance = automaton.min_bytes_to_accept
    table = automaton.transitions
    while True:
        live = np.flatnonzero(table[state] >= 0).tolist()
        if automaton.accepting[state] and (not live or len(out) > soft_limit or rng.random() < 0.05):
            return bytes(out)
        if len(out) > soft_limit:
            live = [b for b in live if distance[table[state, b]] < distance[state]] or live
        byte = rng.choice(live)
        out.append(byte)
        state = int(table[state, byte])


@pytest.mark.parametrize("syntax", ["hermes", "qwen_xml"])
@pytest.mark.parametrize("choice", ["auto", "required", "search"])
def test_every_accepted_reply_parses_with_typed_arguments(syntax: str, choice: str) -> None:
    constraint = build_constraint(_spec(syntax, choice), 60)
    rng = random.Random(5)
    calls_seen = 0
    for _ in range(100):
        prefix = b"Let me check. <tool_call>" if choice == "auto" and rng.random() < 0.5 else b""
        text = _random_accepted(constraint.automaton, rng, prefix).decode("utf-8")
        content, calls = SYNTAXES[syntax].parse(text, PARAMETERS)
        assert "".join([content, *(c.text for c in calls)]).replace("\n", "") == text.replace("\n", "")
        if choice != "auto":
            assert calls and content == ""
        if choice == "search":
            assert [c.name for c in calls] == ["search"]
        for call in calls:
            jsonschema.validate(json.loads(call.arguments), PARAMETERS[call.name])
            calls_seen += 1
    assert calls_seen >= 40


@settings(max_examples=60, deadline=None)
@given(city=st.text(max_size=12), limit=st.integers(1, 10), query=st.text(max_size=8), prose=st.text(max_size=20))
def test_rendered_calls_are_accepted_and_read_back(city: str, limit: int, query: str, prose: str) -> None:
    for name in ("hermes", "qwen_xml"):
        syntax = SYNTAXES[name]
        if any("</tool_call>" in v for v in (city, query)) or name == "qwen_xml" and any(
                "</parameter>" in v or "\n" in v or v.lower() == "null" for v in (city, query)):
            continue
        constraint = _auto(name)
        first = syntax.render("get_weather", json.dumps({"city": city}))
        second = syntax.render("search", json.dumps({"query": query, "limit": limit}))
        free = prose.replace("<", "")
        reply = free + first + "\n" + second
        assert constraint.accepts(reply)
        content, calls = syntax.parse(reply, PARAMETERS)
        assert content == free
        assert [(c.name, json.loads(c.arguments)) for c in calls] == [
            ("get_weather", {"city": city}), ("search", {"query": query, "limit": limit})]
        assert [c.text for c in calls] == [first, second]


@pytest.mark.parametrize("syntax", ["hermes", "qwen_xml"])
def test_invalid_replies_are_rejected(syntax: str) -> None:
    render = SYNTAXES[syntax].render
    auto = build_constraint(_spec(syntax), 60)
    single = build_constraint(_spec(syntax, parallel=False), 60)
    required = build_constraint(_spec(syntax, "required"), 60)
    good = render("search", '{"query": "x", "limit": 3}')
    assert auto.accepts("plain text") and auto.accepts("") and auto.accepts(good)
    assert not auto.accepts(render("search", '{"query": "x", "limit": 11}'))
    assert not auto.accepts(render("search", '{"query": "x"}'))
    assert not auto.accepts(render("unknown", '{"query": "x", "limit": 3}'))
    assert not auto.accepts("text <tool_call> more text")
    assert not auto.accepts(good + "trailing text")
    assert auto.accepts(good + "\n" + good) and not single.accepts(good + "\n" + good) and single.accepts(good)
    assert not required.accepts("plain text") and not required.accepts("") and required.accepts(good)


def test_tools_next_to_a_response_format_give_content_or_calls() -> None:
    content = {"kind": "json_schema", "schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                                                  "required": ["a"]}, "strict": True}
    constraint = build_constraint(_spec("hermes", content=content), 60)
    assert constraint.accepts('{"a":1}')
    assert constraint.accepts(SYNTAXES["hermes"].render("get_weather", '{"city": "Rome"}'))
    assert not constraint.accepts("free text") and not constraint.accepts('{"a":"x"}')


def test_refusals_name_what_and_where() -> None:
    with pytest.raises(CompileError, match="nope"):
        build_constraint(_spec("hermes", "nope"), 60)
    bad = {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "pattern": "a("}}}}
    with pytest.raises(CompileError):
        build_constraint({**_spec("hermes"), "tools": [bad]}, 60)
    xml = {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "minLength": 2}}}}
    with pytest.raises(SchemaError, match="minLength") as error:
        build_constraint({**_spec("qwen_xml"), "tools": [xml]}, 60)
    assert "tools[f].function.parameters/properties/x" in error.value.path


def test_syntax_follows_the_chat_template() -> None:
    assert syntax_of_template(None).name == "hermes"
    assert syntax_of_template("{{ '<tool_call>\\n<function=' + name + '<parameter=' }}").name == "qwen_xml"
    assert canonical_text({"b": 1, "a": [2]}) == canonical_text(json.loads('{"b": 1, "a": [2]}'))
    assert canonical_text({"b": 1, "a": [2]}) != canonical_text({"a": [2], "b": 1})  # key order is the program's


@pytest.mark.parametrize("value", ["</tool_call>", "x</function>\n</tool_call> y", "<tool_call>\n{", "a\n</parameter"])
def test_values_that_look_like_tags_are_read_back_or_refused(value: str) -> None:
    """A value may hold any tag but the one the family's parser ends a call at (`</tool_call>`), which is refused."""
    for name in ("hermes", "qwen_xml"):
        syntax = SYNTAXES[name]
        constraint = _auto(name)
        reply = "ok " + syntax.render("search", json.dumps({"query": value, "limit": 2}))
        reply += "\n" + syntax.render("get_weather", '{"city": "Oslo"}')
        if "</tool_call>" in value:
            assert not constraint.accepts(reply), (name, reply)
            continue
        assert constraint.accepts(reply), (name, reply)
        content, calls = syntax.parse(reply, PARAMETERS)
        assert content == "ok "
        assert [json.loads(c.arguments) for c in calls] == [{"query": value, "limit": 2}, {"city": "Oslo"}]
