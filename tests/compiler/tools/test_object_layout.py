"""A tool's arguments object laid out from its members' value DFAs accepts exactly what the whole-object compile
accepts, alone and inside the Hermes and Harmony replies under every `tool_choice`; other shapes fall back."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler import constraint_spec
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.constraint import compile_embeddable
from stdsl.compiler.constraint_spec import ARGUMENTS_LOWERING, _arguments_ir, _Deadline
from stdsl.compiler.json_schema.json_tokens import JSON_DUMPS, Whitespace
from stdsl.compiler.tools import reply_automaton as assembly
from stdsl.compiler.tools.formats import ToolSpec, format_named
from stdsl.compiler.tools.integer_digits import digit_limited
from stdsl.compiler.tools.object_layout import object_layout
from stdsl.errors import EmptyLanguageError, SchemaError
from tests.compiler.language_difference import difference

WORDS = ("path", "query", "city", "limit", "a", "ab", "tags", "unit", "é", 'q"t')

scalars = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "integer", "minimum": 0}, {"type": "number"},
    {"type": "number", "minimum": -1.5, "maximum": 10}, {"type": "boolean"}, {"type": "null"},
    {"type": "string", "enum": ["asc", "desc", "a"]}, {"type": "string", "enum": ["celsius", "c"]},
    {"type": "array", "items": {"type": "string"}}, {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
    {"type": "string", "maxLength": 4}, {"type": "string", "description": "free text"}, {"enum": [1, "x", None]},
    {"type": ["string", "integer"]}, {},
])


@st.composite
def objects(draw: Any, depth: int = 0) -> dict[str, Any]:
    """A closed object of tool-schema shape: properties in order, some required, values of any kind, nested."""
    keys = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5, unique=True))
    value = scalars if depth >= 1 else st.one_of(scalars, objects(depth=depth + 1))
    properties = {key: draw(value) for key in keys}
    required = [key for key in keys if draw(st.booleans())]
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required or draw(st.booleans()):
        schema["required"] = required
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


LOWERING = "compile_embeddable per value"
"""What `_value_of` makes of a value schema, in the keys of laid-out objects."""


def _value_of(whitespace: Whitespace | None) -> Any:
    def value_of(schema: Any, path: str) -> Automaton:
        laid_out = object_layout(schema, path, whitespace, True, value_of, LOWERING)
        return laid_out if laid_out is not None else compile_embeddable(schema, whitespace=whitespace).automaton

    return value_of


def _minimal_size(automaton: Automaton) -> int:
    return len(minimize(automaton.class_transitions, automaton.accepting)[0])


PAST_MINIMIZING = {"type": "object", "required": ["city"], "properties": {
    "path": {"type": "object", "required": ["path", "query", "city", "limit"], "additionalProperties": False,
             "properties": {"path": {}, "query": {"type": "string", "description": "free text"},
                            "city": {"type": "string"}, "limit": {"type": "string"}, "a": {}}},
    "query": {},
    "city": {"type": "object", "required": ["query", "limit", "a"], "additionalProperties": False,
             "properties": {"path": {"type": "string"}, "query": {"type": "string"}, "city": {"type": "string"},
                            "limit": {}, "a": {}}},
    "limit": {"type": "object", "required": ["path"],
              "properties": {"path": {}, "query": {"type": "string"}, "city": {"type": "string"},
                             "limit": {"type": "number", "minimum": -1.5, "maximum": 10}, "a": {}}},
    "a": {"type": "object", "required": ["path"],
          "properties": {"path": {"type": "string"}, "query": {"type": "string"}, "city": {"type": "string"},
                         "limit": {"type": "string"}, "a": {}}}}}
"""An object whose whole compile passes `MINIMIZE_UP_TO` states (8,856, trimmed but not minimized; 8,854 minimal):
the laid-out automaton is compared with it up to minimization."""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=objects(), whitespace=st.sampled_from([JSON_DUMPS, None]))
@example(schema=PAST_MINIMIZING, whitespace=JSON_DUMPS)
def test_laid_out_object_accepts_exactly_the_whole_object_compile(schema: dict[str, Any],
                                                                  whitespace: Whitespace | None) -> None:
    whole = compile_embeddable(schema, whitespace=whitespace).automaton
    laid_out = object_layout(schema, "#", whitespace, True, _value_of(whitespace), LOWERING)
    assert laid_out is not None
    assert difference(whole, laid_out) is None
    assert _minimal_size(laid_out) == _minimal_size(whole)
    assert not laid_out.accepting[0] and (laid_out.live_count[laid_out.accepting] == 0).all()


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1},
    {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}},
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
    {"type": "object", "properties": {"a": True}},
    {"type": "array", "items": {"type": "string"}},
])
def test_other_shapes_fall_back(schema: dict[str, Any]) -> None:
    assert object_layout(schema, "#", JSON_DUMPS, True, _value_of(JSON_DUMPS), LOWERING) is None


def test_open_objects_and_spaced_tokens_fall_back() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert object_layout(schema, "#", JSON_DUMPS, False, _value_of(JSON_DUMPS), LOWERING) is None
    assert object_layout(schema, "#", Whitespace(max_run=1), True, _value_of(JSON_DUMPS), LOWERING) is None


def test_a_refused_member_gives_the_whole_compile_refusal_and_an_empty_optional_member_is_dropped() -> None:
    lower = _arguments_ir(_Deadline(60), [])
    refused = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "minLength": 5000}},
               "required": ["a", "b"]}
    with pytest.raises(SchemaError) as laid_out:
        lower(refused, "tools[t].function.parameters", JSON_DUMPS)
    with mock.patch.object(constraint_spec, "object_layout", lambda *args: None), pytest.raises(SchemaError) as whole:
        lower(refused, "tools[t].function.parameters", JSON_DUMPS)
    assert (str(laid_out.value), laid_out.value.path) == (str(whole.value), whole.value.path)
    empty = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"enum": []}}, "required": ["a"]}
    automaton = assembly.build_automaton(lower(empty, "#", JSON_DUMPS))
    assert difference(automaton, compile_embeddable(empty, whitespace=JSON_DUMPS).automaton) is None


def _reply(tools: list[ToolSpec], name: str, choice: str, parallel: bool) -> Automaton:
    caches.clear()
    built = assembly.reply_automaton(tools, format_named(name), _arguments_ir(_Deadline(120), []),
                                     ARGUMENTS_LOWERING, choice=choice, parallel=parallel)
    assert built is not None
    return built


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas=st.lists(objects(), min_size=1, max_size=3), name=st.sampled_from(["hermes", "harmony"]),
       choice=st.sampled_from(["auto", "required", "named"]), parallel=st.booleans())
def test_replies_with_laid_out_arguments_accept_exactly_the_whole_object_replies(
        schemas: list[dict[str, Any]], name: str, choice: str, parallel: bool) -> None:
    tools = [ToolSpec(f"tool_{index}", schema) for index, schema in enumerate(schemas)]
    chosen = tools[-1].name if choice == "named" else choice
    laid_out = _reply(tools, name, chosen, parallel)
    with mock.patch.object(constraint_spec, "object_layout", lambda *args: None):
        whole = _reply(tools, name, chosen, parallel)
    caches.clear()
    assert difference(whole, laid_out) is None


@st.composite
def referring_objects(draw: Any) -> dict[str, Any]:
    """`objects()` with some member values (at any depth) moved into the root's `$defs` and referred to, as
    Pydantic writes a tool's enums and nested models (a description beside the reference, or not), the type
    written beside it or not (the target's, or another, which leaves only what both admit)."""
    schema = draw(objects())
    definitions: dict[str, Any] = {}

    def moved(node: dict[str, Any]) -> dict[str, Any]:
        properties = {}
        for key, value in node["properties"].items():
            if value.get("type") == "object":
                value = moved(value)
            if draw(st.booleans()):
                name = f"D{len(definitions)}"
                definitions[name] = value
                kind = value.get("type")
                typed = draw(st.sampled_from(["none", "same", "other"] if isinstance(kind, str) else ["none"]))
                value = {"$ref": f"#/$defs/{name}", **({"description": "d"} if draw(st.booleans()) else {})}
                if typed != "none":
                    value["type"] = kind if typed == "same" else "integer" if kind == "string" else "string"
            properties[key] = value
        return {**node, "properties": properties}

    return {**moved(schema), "$defs": definitions}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=referring_objects())
def test_arguments_that_refer_into_defs_are_laid_out_as_the_whole_object_compiles(schema: dict[str, Any]) -> None:
    """A tool's arguments whose members refer into its `$defs` are laid out (their references resolved in the
    tool's schema) and accept exactly what the whole document's compile accepts, or are refused alike."""
    tool = ToolSpec("t", schema)
    laid: list[Any] = []

    def recording(*args: Any) -> Any:
        found = object_layout(*args)
        laid.append((args[1], found is not None))
        return found

    caches.clear()
    try:
        whole = compile_embeddable(digit_limited(schema), whitespace=JSON_DUMPS).automaton
    except EmptyLanguageError:
        with pytest.raises(EmptyLanguageError):
            _arguments_ir(_Deadline(60), [], [tool])(schema, "tools[t].function.parameters", JSON_DUMPS)
        return
    with mock.patch.object(constraint_spec, "object_layout", recording):
        node = _arguments_ir(_Deadline(60), [], [tool])(schema, "tools[t].function.parameters", JSON_DUMPS)
    assert difference(assembly.build_automaton(node), whole) is None
    assert _conflicting(schema, schema["$defs"]) or ("tools[t].function.parameters", True) in laid


def _conflicting(node: dict[str, Any], definitions: dict[str, Any]) -> bool:
    """Whether a member at any depth (through references too) states another type beside its reference than its
    target's (its value may then be empty, and the object falls back to the whole compile)."""
    for value in node["properties"].values():
        if "$ref" in value:
            target = definitions[value["$ref"].split("/")[-1]]
            if value.get("type", target.get("type")) != target.get("type"):
                return True
            value = target
        if value.get("type") == "object" and "properties" in value and _conflicting(value, definitions):
            return True
    return False


def test_the_same_reference_in_two_tools_keeps_each_tools_target() -> None:
    """Laid-out objects are kept by what their references reach, not by their text alone (the inner object's text is
    the same in both tools)."""
    def tool(name: str, unit: str) -> ToolSpec:
        inner = {"type": "object", "required": ["u"], "properties": {"u": {"$ref": "#/$defs/U"}}}
        return ToolSpec(name, {"type": "object", "required": ["o"], "additionalProperties": False,
                               "properties": {"o": inner}, "$defs": {"U": {"enum": [unit]}}})

    caches.clear()
    lower = _arguments_ir(_Deadline(60), [], [tool("a", "x"), tool("b", "y")])
    for name, unit, other in (("a", "x", "y"), ("b", "y", "x")):
        where = f"tools[{name}].function.parameters"
        automaton = assembly.build_automaton(lower(tool(name, unit).parameters, where, JSON_DUMPS))
        assert automaton.accepts(f'{{"o": {{"u": "{unit}"}}}}'.encode())
        assert not automaton.accepts(f'{{"o": {{"u": "{other}"}}}}'.encode())
