"""`dump_in_schema_order` and `conforms` follow a recursive schema as deep as the instance goes.

A reference cycle is one only when no instance level is entered on the way round (`Context.descending`); the
two used to refuse every recursive schema ("recursive $ref is not supported yet"), so a `.stc` program could not
write a recursive Pydantic value, nor the benchmarks respell a recursive schema's instance.  Oracle: the
compiled constraint accepts the respelled text, which reads back as the instance, for every valid instance
(`jsonschema`).
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.json_schema.flatten import document_context
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.validate import conforms

TREE = {"$defs": {"node": {"type": "object", "required": ["name"], "additionalProperties": False, "properties": {
    "name": {"type": "string"}, "size": {"type": "integer"},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}
ROOT_CYCLE = {"anyOf": [{"$ref": "#/$defs/pair"}, {"type": "null"}], "$defs": {"pair": {
    "type": "object", "additionalProperties": False,
    "properties": {"b": {"type": "integer"}, "a": {"$ref": "#"}}}}}


def tree(draw: st.DrawFn, depth: int) -> dict:
    node: dict[str, Any] = {"name": draw(st.sampled_from(["x", "y"]))}
    if draw(st.booleans()):
        node["size"] = draw(st.integers(-3, 3))
    if depth and draw(st.booleans()):
        node["kids"] = [tree(draw, depth - 1) for _ in range(draw(st.integers(0, 2)))]
    return node


def pair(draw: st.DrawFn, depth: int) -> dict | None:
    if not depth or draw(st.booleans()):
        return None
    value: dict[str, Any] = {}
    if draw(st.booleans()):
        value["a"] = pair(draw, depth - 1)
    if draw(st.booleans()):
        value["b"] = draw(st.integers(0, 9))
    return value


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same value with every object's keys in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@st.composite
def instances(draw: st.DrawFn) -> tuple[dict, Any]:
    schema = draw(st.sampled_from([TREE, ROOT_CYCLE]))
    value = tree(draw, 5) if schema is TREE else pair(draw, 7)
    return schema, shuffled(value, random.Random(draw(st.integers(0, 2**16))))


@settings(max_examples=60, deadline=None)
@given(instances())
def test_a_recursive_instance_is_respelled_as_the_constraint_writes_it(case: tuple[dict, Any]) -> None:
    schema, value = case
    assert jsonschema.Draft202012Validator(schema).is_valid(value)
    text = dump_in_schema_order(value, schema)
    assert json.loads(text) == value
    assert compile_constraint(schema).accepts(text), text
    assert conforms(value, schema, document_context(schema))


def test_conforms_refuses_an_invalid_value_deep_in_a_recursive_schema() -> None:
    deep = {"name": "x", "kids": [{"name": "y", "kids": [{"name": 3}]}]}
    assert not conforms(deep, TREE, document_context(TREE))
    assert conforms({"a": {"a": {"a": None, "b": 1}}}, ROOT_CYCLE, document_context(ROOT_CYCLE))
