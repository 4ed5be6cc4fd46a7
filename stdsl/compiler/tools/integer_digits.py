"""Integers in tool arguments kept to at most 20 digits, as unbounded numbers already are.

A family's parser reads an argument through `json.loads`, `float` or `ast.literal_eval`: a 5,000-digit integer
raises in each (Python's 4,300-digit limit, or an overflow), so an integer schema with an open end gets the bound
of uint64's 20 digits on that end; a bound the schema states is kept as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_INTEGER_DIGITS = 20
INTEGER_LIMIT = 10**MAX_INTEGER_DIGITS - 1
"""The largest magnitude an integer without a stated bound may take in a tool call."""

_SCHEMA_VALUED = ("additionalProperties", "items", "additionalItems", "contains", "then", "else",
                  "unevaluatedProperties", "unevaluatedItems")
_SCHEMA_LISTS = ("prefixItems", "anyOf", "oneOf", "allOf")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
"""Where a schema holds schemas whose values are themselves arguments (not `not` or `if`, which only test them)."""


def _is_integer_type(kind: Any) -> bool:
    """A `type` that allows integers but not other numbers (whose own grammar already keeps to 20 digits)."""
    kinds = kind if isinstance(kind, list) else [kind]
    return "integer" in kinds and "number" not in kinds


def digit_limited(schema: Any) -> Any:
    """`schema` with every integer schema's open end bounded at ±(10^20 - 1); anything else as it was."""
    if not isinstance(schema, Mapping):
        return schema
    limited = dict(schema)
    if _is_integer_type(schema.get("type")):
        if "minimum" not in schema and "exclusiveMinimum" not in schema:
            limited["minimum"] = -INTEGER_LIMIT
        if "maximum" not in schema and "exclusiveMaximum" not in schema:
            limited["maximum"] = INTEGER_LIMIT
    for key in _SCHEMA_VALUED:
        if key in schema:
            limited[key] = digit_limited(schema[key])
    for key in _SCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            limited[key] = [digit_limited(part) for part in schema[key]]
    for key in _SCHEMA_MAPS:
        if isinstance(schema.get(key), Mapping):
            limited[key] = {name: digit_limited(part) for name, part in schema[key].items()}
    return limited
