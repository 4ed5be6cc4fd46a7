"""A JSON Schema with a non-string object key (a Python dict that is no JSON object) is a SchemaError at its path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.errors import SchemaError

Case = tuple[Callable[[Any], dict], str]
CASES: list[Case] = [
    (lambda k: {k: "x"}, "#"),
    (lambda k: {"type": "object", "properties": {k: {"type": "integer"}}}, "#/properties"),
    (lambda k: {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {k: 1}}}}},
     "#/properties/a/properties/b"),
    (lambda k: {"anyOf": [{"type": "string"}, {k: 3}]}, "#/anyOf/1"),
    (lambda k: {"type": "array", "items": {"type": "object", "properties": {k: {}}}}, "#/items/properties"),
    (lambda k: {"type": "object", "patternProperties": {k: {}}}, "#/patternProperties"),
    (lambda k: {"type": "object", "dependentRequired": {k: ["a"]}}, "#/dependentRequired"),
    (lambda k: {"type": "object", "dependentSchemas": {k: {}}}, "#/dependentSchemas"),
    (lambda k: {"enum": ["a", {"x": [{k: 1}]}]}, "#/enum/1/x/0"),
    (lambda k: {"const": {"a": {k: 1}}}, "#/const/a"),
    (lambda k: {"$ref": "#/$defs/a", "$defs": {"a": {"type": "object", "properties": {k: {}}}}},
     "#/$defs/a/properties"),
    (lambda k: {"$ref": "#a", "$defs": {"x": {"$anchor": "a", "type": "integer"}, "y": {"z": {k: 2}}}},
     "#/$defs/y/z"),
    (lambda k: {"$ref": "#/$defs/n", "$defs": {"n": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}, "v": {"type": "object", "properties": {k: {}}}}}}},
     "#/$defs/n/properties/v/properties"),
]
non_string_keys = (
    st.integers() | st.none() | st.booleans() | st.floats(allow_nan=False) | st.tuples(st.integers(0, 9))
)


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(CASES), key=non_string_keys)
def test_a_non_string_key_is_a_schema_error_at_its_path(case: Case, key: Any) -> None:
    make, path = case
    with pytest.raises(SchemaError) as caught:
        stdsl.compile(make(key))
    assert caught.value.path == path
    assert repr(key) in str(caught.value)


@pytest.mark.parametrize("make,path", CASES)
def test_the_same_schema_with_a_string_key_compiles_and_is_not_confused_with_it(make: Any, path: str) -> None:
    stdsl.compile(make("1"))
    with pytest.raises(SchemaError):
        stdsl.compile(make(1))
