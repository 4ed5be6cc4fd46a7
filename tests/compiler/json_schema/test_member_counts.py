"""`minProperties`/`maxProperties` counted member by member, against `jsonschema`.

Soundness on every instance and on random accepting walks: whatever the automaton accepts is
valid.  Completeness where the module promises it: a valid instance whose count is reached with
at most one undeclared member is accepted in schema order.
"""

from __future__ import annotations

import json
from functools import cache

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.member_counts import MAX_COUNTED_MEMBERS
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import EmptyLanguageError, SchemaError
from tests.compiler.accepting_walks import distances, random_accepted

DECLARED = ["a", "b", "c"]
EXTRA_SCHEMAS = [False, True, {"type": "integer"}]
KEYS = st.sampled_from(DECLARED + ["x", "y", "é"])
VALUES = st.one_of(st.integers(-3, 3), st.sampled_from(["s", ""]), st.none())


@st.composite
def counted_schemas(draw: st.DrawFn) -> dict:
    """An object schema with some declared properties, some required, and member-count bounds."""
    names = draw(st.lists(st.sampled_from(DECLARED), unique=True, max_size=3))
    props = {n: draw(st.sampled_from([{}, {"type": "integer"}, {"type": "string"}])) for n in names}
    required = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    schema: dict = {"type": "object", "properties": props, "additionalProperties": draw(st.sampled_from(EXTRA_SCHEMAS))}
    if required:
        schema["required"] = required
    low = draw(st.integers(0, 4))
    high = draw(st.one_of(st.none(), st.integers(0, 5)))
    if low:
        schema["minProperties"] = low
    if high is not None:
        schema["maxProperties"] = high
    return schema


@cache
def compiled(text: str) -> Automaton | str:
    """The automaton of a schema, or why there is none ('refused' or 'empty')."""
    try:
        return build_automaton(schema_to_ir(json.loads(text)))
    except SchemaError as error:
        assert "Properties" in str(error)
        return "refused"
    except EmptyLanguageError:
        return "empty"


@settings(max_examples=150, deadline=None)
@given(counted_schemas(), st.dictionaries(KEYS, VALUES, max_size=5), st.integers(0, 2**32 - 1))
def test_counted_objects_match_jsonschema(schema: dict, instance: dict, seed: int) -> None:
    automaton = compiled(json.dumps(schema))
    validator = jsonschema.Draft202012Validator(schema)
    if automaton == "refused":
        extras_needed = schema.get("minProperties", 0) - len(schema["properties"])
        assert schema["additionalProperties"] is not False and extras_needed >= 2
        return
    if isinstance(automaton, str):
        assert not validator.is_valid(instance)
        return
    own = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    assert not automaton.accepts(own.encode()) or validator.is_valid(instance), own
    declared_present = sum(1 for k in instance if k in schema["properties"])
    extras = len(instance) - declared_present
    if validator.is_valid(instance) and declared_present + min(extras, 1) >= schema.get("minProperties", 0):
        assert automaton.accepts(dump_in_schema_order(instance, schema).encode()), (schema, instance)
    rng = np.random.default_rng(seed)
    dist = distances(automaton)
    if dist[0] < len(dist) + 1:
        for _ in range(5):
            text = random_accepted(automaton, rng, dist=dist).decode("utf-8")
            assert validator.is_valid(json.loads(text)), (schema, text)


@pytest.mark.parametrize("schema, count, accepted", [
    ({"maxProperties": 1, "properties": {"p": {"type": "integer"}, "q": {}}}, 1, True),
    ({"maxProperties": 1, "properties": {"p": {"type": "integer"}, "q": {}}}, 2, False),
    ({"minProperties": 2, "maxProperties": 2, "properties": {"p": {}, "q": {}, "r": {}},
      "additionalProperties": False}, 2, True),
    ({"minProperties": 2, "maxProperties": 2, "properties": {"p": {}, "q": {}, "r": {}},
      "additionalProperties": False}, 3, False),
])
def test_typical_counted_objects(schema: dict, count: int, accepted: bool) -> None:
    instance = {k: 1 for k in ["p", "q", "r", "z"][:count]}
    text = dump_in_schema_order(instance, schema)
    assert build_automaton(schema_to_ir(schema)).accepts(text.encode()) is accepted


def test_a_large_bound_beside_additional_properties_is_refused() -> None:
    with pytest.raises(SchemaError, match="maxProperties"):
        schema_to_ir({"type": "object", "maxProperties": MAX_COUNTED_MEMBERS + 1})
    assert build_automaton(schema_to_ir({"type": "object", "maxProperties": MAX_COUNTED_MEMBERS})).accepts(b'{"k":1}')
