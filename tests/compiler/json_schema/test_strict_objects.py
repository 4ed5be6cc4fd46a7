"""Strict generation (the default) against `jsonschema`: objects and tuples closed to what the schema declares.

Under the default every text the constraint accepts is valid and names no undeclared member of an object whose
schema declares members and says nothing of others; `additionalProperties` (a schema or `true`),
`patternProperties`, `propertyNames` and a `minProperties` above the declared members keep the object's exact
language, and so do `items` and a `minItems` past the prefix for a `prefixItems` tuple.  Under `strict=False` the
language is the exact open one: of the texts drawn from it, the strict constraint accepts exactly those that name
no undeclared member.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np
import pydantic
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.errors import EmptyLanguageError, SchemaError
from tests.compiler.accepting_walks import random_accepted

NAMES = ["a", "b", "c"]
PATTERN = "^x"
LEAVES = st.sampled_from([{"type": "integer"}, {"type": "string", "maxLength": 3}, {"type": "boolean"},
                          {"type": "object"}, {}])


@st.composite
def object_schemas(draw: st.DrawFn, values: st.SearchStrategy) -> dict:
    """An object with declared members, some required, with or without a word on other members, and maybe a
    `minProperties` (below the declared count where others are refused, so it stays satisfiable)."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3))
    schema: dict = {"type": "object", "properties": {name: draw(values) for name in names}}
    if names and draw(st.booleans()):
        schema["required"] = draw(st.lists(st.sampled_from(names), unique=True, min_size=1))
    others = draw(st.sampled_from(["silent", False, True, {"type": "integer"}, "patterns"]))
    if others == "patterns":
        schema["patternProperties"] = {PATTERN: {"type": "integer"}}
    elif others != "silent":
        schema["additionalProperties"] = others
    if draw(st.booleans()):
        schema["minProperties"] = draw(st.integers(0, len(names) if others is False else len(names) + 1))
    return schema


@st.composite
def tuple_schemas(draw: st.DrawFn, values: st.SearchStrategy) -> dict:
    """A `prefixItems` tuple, with or without `items`, and maybe a `minItems` (at most one past the prefix)."""
    prefix = draw(st.lists(values, min_size=1, max_size=2))
    schema: dict = {"type": "array", "prefixItems": prefix}
    if draw(st.booleans()):
        schema["items"] = {"type": "integer"}
    if draw(st.booleans()):
        schema["minItems"] = draw(st.integers(0, len(prefix) + 1))
    return schema


VALUES = st.recursive(LEAVES, lambda inner: st.one_of(object_schemas(inner), tuple_schemas(inner)), max_leaves=4)


@st.composite
def schemas(draw: st.DrawFn) -> dict:
    """A root object, its members nested schemas, and maybe a member that refers to a definition."""
    root = draw(object_schemas(VALUES))
    if draw(st.booleans()):
        root["properties"]["r"] = {"$ref": "#/$defs/d"}
        root["$defs"] = {"d": draw(object_schemas(VALUES))}
    return root


def stray_members(value: Any, schema: Any, root: dict, where: str = "$") -> list[str]:
    """Where `value` holds a member or item that its schema (as generated above) neither declares nor allows by
    a word on others, the strict rule read straight off the schema."""
    if isinstance(schema, dict) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    if not isinstance(schema, dict):
        return []
    if isinstance(value, dict) and ("properties" in schema or "required" in schema):
        props = schema.get("properties", {})
        declared = set(props) | set(schema.get("required", []))
        closed = not any(k in schema for k in ("additionalProperties", "patternProperties")) \
            and schema.get("minProperties", 0) <= len(declared)
        out: list[str] = []
        for key, member in value.items():
            if key in props:
                out += stray_members(member, props[key], root, f"{where}.{key}")
            elif closed:
                out.append(f"{where}.{key}")
        return out
    if isinstance(value, list) and "prefixItems" in schema:
        prefix = schema["prefixItems"]
        closed = "items" not in schema and schema.get("minItems", 0) <= len(prefix)
        out = [stray for i, (item, sub) in enumerate(zip(value, prefix))
               for stray in stray_members(item, sub, root, f"{where}[{i}]")]
        return out + ([f"{where}[{len(prefix)}]"] if closed and len(value) > len(prefix) else [])
    return []


def _compiled(schema: dict, strict: bool) -> Any:
    try:
        return stdsl.compile(schema, strict=strict)
    except EmptyLanguageError:
        return None


def _machine(constraint: Any) -> Any:
    return constraint.machine if isinstance(constraint, PushdownConstraint) else constraint.automaton


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas(), st.integers(0, 2**32 - 1))
def test_strict_outputs_are_valid_and_name_only_declared_members(schema: dict, seed: int) -> None:
    try:
        closed, exact = _compiled(schema, True), _compiled(schema, False)
    except SchemaError:
        assume(False)
    assert (closed is None) == (exact is None)
    if closed is None:
        return
    assert closed.strict is True and exact.strict is False
    validator = jsonschema.Draft202012Validator(schema)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        text = random_accepted(_machine(closed), rng).decode("utf-8")
        value = json.loads(text)
        assert validator.is_valid(value), (schema, text)
        assert not stray_members(value, schema, schema), (schema, text)
        assert exact.accepts(text), (schema, text)
    for _ in range(4):
        text = random_accepted(_machine(exact), rng).decode("utf-8")
        value = json.loads(text)
        assert validator.is_valid(value), (schema, text)
        assert closed.accepts(text) == (not stray_members(value, schema, schema)), (schema, text)


CLOSED = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}


@pytest.mark.parametrize("schema, text, strict_accepts", [
    (CLOSED, '{"a":1,"b":"x"}', True),
    (CLOSED, '{"a":1,"z":2}', False),
    ({**CLOSED, "additionalProperties": True}, '{"a":1,"z":[{"q":2}]}', True),
    ({**CLOSED, "additionalProperties": {}}, '{"a":1,"z":2}', True),
    ({**CLOSED, "additionalProperties": {"type": "integer"}}, '{"a":1,"z":2}', True),
    ({**CLOSED, "patternProperties": {"^x": {"type": "integer"}}}, '{"a":1,"x1":2,"z":"any"}', True),
    ({**CLOSED, "propertyNames": {"maxLength": 2}}, '{"a":1,"z":2}', True),
    ({**CLOSED, "minProperties": 3}, '{"a":1,"b":"x","z":2}', True),
    ({**CLOSED, "minProperties": 2}, '{"a":1,"b":"x"}', True),
    ({**CLOSED, "minProperties": 2}, '{"a":1,"z":2}', False),
    ({"type": "object"}, '{"z":{"y":1}}', True),
    ({"type": "object", "properties": {}}, "{}", True),
    ({"type": "object", "properties": {}}, '{"z":1}', False),
    ({"type": "object", "required": ["q"]}, '{"q":[1]}', True),
    ({"type": "object", "required": ["q"]}, '{"q":1,"z":1}', False),
    ({"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}, '{"a":1,"b":2}', True),
    ({"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}, '{"a":1,"c":2}', False),
    ({"allOf": [{"properties": {"a": {}}}, {"additionalProperties": True}]}, '{"a":1,"c":2}', True),
    ({"anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}, '{"a":1,"b":"x"}', False),
    ({"$defs": {"p": CLOSED}, "type": "object", "properties": {"p": {"$ref": "#/$defs/p"}}}, '{"p":{"a":1,"z":2}}',
     False),
    ({"type": "object", "properties": {"a": {}}, "dependentRequired": {"a": ["b"]}}, '{"a":1,"b":2}', True),
    ({"type": "object", "properties": {"a": {}}, "dependentRequired": {"a": ["b"]}}, '{"a":1,"b":2,"c":3}', False),
    ({"prefixItems": [{"type": "integer"}]}, "[1]", True),
    ({"prefixItems": [{"type": "integer"}]}, "[1,2]", False),
    ({"prefixItems": [{"type": "integer"}], "items": {"type": "string"}}, '[1,"x"]', True),
    ({"prefixItems": [{"type": "integer"}], "minItems": 2}, '[1,"x"]', True),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "integer"}]}, "[1,2]", False),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "integer"}], "additionalItems": {}},
     "[1,2]", True),
    ({"type": "array", "minItems": 1}, "[1,{}]", True),
])
def test_what_strict_closes(schema: dict, text: str, strict_accepts: bool) -> None:
    """Each rule of docs/json_schema.md's "Objects are closed by default", on a text valid for the schema."""
    validator_class = jsonschema.validators.validator_for(schema)
    assert validator_class(schema).is_valid(json.loads(text))
    assert stdsl.compile(schema, strict=False).accepts(text)
    assert stdsl.compile(schema).accepts(text) is strict_accepts


def test_strict_and_exact_constraints_are_cached_apart() -> None:
    schema = {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}
    closed, exact = stdsl.compile(schema), stdsl.compile(schema, strict=False)
    assert closed is stdsl.compile(schema, strict=True) and exact is stdsl.compile(schema, strict=False)
    assert closed is not exact and (closed.strict, exact.strict) == (True, False)
    assert not closed.accepts('{"k":1,"z":1}') and exact.accepts('{"k":1,"z":1}')
    assert stdsl.compile(stdsl.Regex("a+"), strict=False).strict is None


class Default(pydantic.BaseModel):
    name: str


class Allowing(pydantic.BaseModel, extra="allow"):
    name: str


class Forbidding(pydantic.BaseModel, extra="forbid"):
    name: str


@pytest.mark.parametrize("model, strict_accepts", [(Default, False), (Allowing, True), (Forbidding, False)])
def test_pydantic_models_follow_their_extra_setting(model: type[pydantic.BaseModel], strict_accepts: bool) -> None:
    """A model's `extra="allow"` writes `additionalProperties: true`, which keeps its object open; one that ignores
    extra fields is written closed whatever `strict` says (`pydantic_schema`)."""
    text = '{"name":"x","more":1}'
    assert stdsl.compile(model).accepts(text) is strict_accepts
    assert stdsl.compile(model, strict=False).accepts(text) is strict_accepts

