"""`allOf` of object schemas with `patternProperties`: merged exactly when one triple says what both say, else refused.

Oracle: `jsonschema` on random instances; a valid instance in schema order must be accepted (the
merge drops no valid value) and an accepted one must be valid: the exact language (`strict=False`).
"""

from __future__ import annotations

import json
from functools import cache

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import EmptyLanguageError, SchemaError

VALUE_SCHEMAS = [True, False, {"type": "integer"}, {"type": "string"}, {"minimum": 0}]
KEYS = st.sampled_from(["a", "ab", "b", "ba", "c", "x"])
VALUES = st.one_of(st.integers(-2, 2), st.sampled_from(["s"]), st.none())


@st.composite
def object_parts(draw: st.DrawFn) -> dict:
    """One object schema: some declared names, some patterns, an additionalProperties."""
    part: dict = {}
    props = draw(st.dictionaries(st.sampled_from(["a", "b", "x"]), st.sampled_from(VALUE_SCHEMAS), max_size=2))
    patterns = draw(st.dictionaries(st.sampled_from(["^a", "b", "^c$"]), st.sampled_from(VALUE_SCHEMAS), max_size=2))
    if props:
        part["properties"] = props
    if patterns:
        part["patternProperties"] = patterns
    extra = draw(st.sampled_from([None, True, False, {"type": "integer"}]))
    if extra is not None:
        part["additionalProperties"] = extra
    return part


@cache
def compiled(text: str) -> Automaton | str:
    try:
        return build_automaton(schema_to_ir(json.loads(text), strict=False))
    except SchemaError as error:
        assert "patternProperties" in str(error), error
        return "refused"
    except EmptyLanguageError:
        return "empty"


@settings(max_examples=300, deadline=None)
@given(object_parts(), object_parts(), st.dictionaries(KEYS, VALUES, max_size=4))
def test_merged_key_schemas_match_jsonschema(first: dict, second: dict, instance: dict) -> None:
    schema = {"type": "object", "allOf": [first, second]}
    automaton = compiled(json.dumps(schema))
    valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
    if automaton == "refused":
        return
    if automaton == "empty":
        assert not valid
        return
    assert isinstance(automaton, Automaton)
    own = json.dumps(instance, separators=(",", ":"))
    assert not automaton.accepts(own.encode()) or valid, (schema, own)
    if valid:
        assert automaton.accepts(dump_in_schema_order(instance, schema).encode()), (schema, instance)


@pytest.mark.parametrize("schema, merged", [
    ({"allOf": [{"patternProperties": {"a": {"type": "number", "minimum": 10}}},
                {"patternProperties": {"b": {"type": "number", "minimum": 3}}}]}, True),
    ({"patternProperties": {"^[a-z]{2,3}$": {"type": "integer"}}, "additionalProperties": False,
      "allOf": [{"properties": {"ios": False}}]}, True),
    ({"allOf": [{"patternProperties": {"^.{1,3}$": False}, "additionalProperties": True},
                {"patternProperties": {"a": True}, "additionalProperties": False}]}, False),
])
def test_which_merges_are_exact(schema: dict, merged: bool) -> None:
    try:
        schema_to_ir(schema)
    except SchemaError:
        assert not merged
        return
    assert merged
