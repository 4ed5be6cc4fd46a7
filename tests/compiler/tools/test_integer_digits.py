"""Integers without a stated bound keep to 20 digits wherever they sit in a tool's arguments."""
from __future__ import annotations

import json

import pytest

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.tools.integer_digits import INTEGER_LIMIT, digit_limited

INTEGER = {"type": "integer"}
PLACES = [
    ({"type": "array", "items": INTEGER}, lambda n: [1, n]),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, INTEGER]}}, "required": ["a"],
      "additionalProperties": False}, lambda n: {"a": n}),
    ({"type": "array", "prefixItems": [{"$ref": "#/$defs/big"}], "items": False},
     lambda n: [n]),
    ({"type": ["integer", "null"]}, lambda n: n),
]


@pytest.mark.parametrize(("schema", "place"), PLACES)
def test_a_nested_integer_keeps_to_20_digits(schema: dict, place: object) -> None:
    tool = {"name": "f", "parameters": {"type": "object", "properties": {"x": schema}, "required": ["x"],
                                        "additionalProperties": False, "$defs": {"big": INTEGER}}}
    constraint = build_constraint({"kind": "tools", "format": "hermes", "tools": [tool], "choice": "required",
                                   "parallel": False, "content": None}, 60)

    def call(value: int) -> bytes:
        arguments = json.dumps({"x": place(value)})  # type: ignore[operator]
        return f'<tool_call>\n{{"name": "f", "arguments": {arguments}}}\n</tool_call>'.encode()

    assert constraint.accepts(call(INTEGER_LIMIT)) and constraint.accepts(call(-INTEGER_LIMIT))
    assert not constraint.accepts(call(INTEGER_LIMIT + 1)) and not constraint.accepts(call(-INTEGER_LIMIT - 1))


def test_stated_bounds_numbers_and_tests_are_kept() -> None:
    schema = {"type": "object", "properties": {
        "low": {"type": "integer", "minimum": 10**30}, "number": {"type": "number"},
        "neither": {"not": {"type": "integer"}}, "open": {"type": "integer", "exclusiveMaximum": 5}}}
    limited = digit_limited(schema)["properties"]
    assert limited["low"] == {"type": "integer", "minimum": 10**30, "maximum": INTEGER_LIMIT}
    assert limited["number"] == {"type": "number"} and limited["neither"] == {"not": {"type": "integer"}}
    assert limited["open"] == {"type": "integer", "exclusiveMaximum": 5, "minimum": -INTEGER_LIMIT}
    assert schema["properties"]["low"] == {"type": "integer", "minimum": 10**30}
