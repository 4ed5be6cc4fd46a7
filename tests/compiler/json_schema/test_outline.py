"""Schemas too large for one DFA are outlined: container members become nonterminals, compiled once each.

The outlined pushdown must accept exactly what the single DFA accepts (where the DFA fits) and
every random accepting walk must validate (`jsonschema`); a member whose call would break an
L(1) condition is inlined again rather than refused.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.constraint import compile_embeddable
from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.compiler.json_schema.recursive import compile_recursive_schema
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from tests.compiler.accepting_walks import random_accepted

ITEM = {"type": "object", "properties": {f"k{i}": {"type": "string", "maxLength": 6} for i in range(5)},
        "additionalProperties": False}
NO_DEFINITIONS = {"type": "object", "properties": {f"p{i}": ITEM for i in range(12)}, "additionalProperties": False}
"""Twelve copies of one object, written out (no `$ref`), so only structure can be outlined."""

OVERLAP = {"type": "object", "additionalProperties": False, "properties": {
    "a": {"anyOf": [
        {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "integer"}}}, "required": ["x"],
         "additionalProperties": False},
        {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
         "additionalProperties": False}]},
    "free": {}}}
"""Two branches whose member `x` has different container schemas: their calls would meet at one state."""

TEXTS = ['{}', '{"p0":{"k1":"abc"},"p3":{}}', '{"p1":{"k0":"abcdef","k4":""},"p11":{"k2":"x"}}',
         '{"p0":{"k1":"abcdefg"}}', '{"p3":{},"p0":{}}', '{"p0":{"k9":""}}', '{"p0":[]}', '{"p12":{}}']


def test_a_schema_without_definitions_is_outlined_by_structure() -> None:
    flat = compile_constraint(NO_DEFINITIONS, max_states=200_000)
    outlined = compile_constraint(NO_DEFINITIONS, max_states=flat.num_states // 4)
    assert isinstance(outlined, PushdownConstraint)
    assert outlined.num_states < flat.num_states
    assert len(outlined.grammar.names) == 2, outlined.grammar.names
    for text in TEXTS:
        assert outlined.accepts(text) == flat.accepts(text), text


def test_conflicting_calls_are_inlined_and_free_values_nest_deeper() -> None:
    grammar = compile_recursive_schema(OVERLAP, outline=True)
    assert "any JSON value" in grammar.names
    constraint = compile_recursive(OVERLAP, outline=True)
    flat = compile_embeddable(OVERLAP)
    deep = json.dumps({"free": [[[[[{"k": [1]}]]]]]}, separators=(",", ":"))
    assert constraint.accepts(deep) and not flat.accepts(deep)
    assert compile_constraint(OVERLAP).accepts(deep)
    for text in ['{"a":{"x":[1,2,3]}}', '{"a":{"x":["s","t"]}}', '{"a":{"x":["s","t","u"]}}', '{"a":{}}',
                 '{"a":{"x":[]}}', '{"a":{"x":[1,"s"]}}', '{"a":{"y":1}}', '{"free":{"a":[1,{}]},"a":{}}']:
        assert constraint.accepts(text) == flat.accepts(text), text


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_outlined_walks_validate(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for schema in (NO_DEFINITIONS, OVERLAP):
        constraint = compile_recursive(schema, outline=True)
        validator = jsonschema.Draft202012Validator(schema)
        for _ in range(5):
            text = random_accepted(constraint.machine, rng).decode("utf-8")
            assert validator.is_valid(json.loads(text)), text


def test_members_equal_up_to_key_order_keep_their_own_member_order() -> None:
    first = {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "integer"}},
             "additionalProperties": False}
    second = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "boolean"}},
              "additionalProperties": False}
    schema = {"type": "object", "properties": {"x": first, "y": second}, "additionalProperties": False}
    constraint = compile_recursive(schema, outline=True)
    assert constraint.accepts('{"x":{"a":true,"b":1},"y":{"b":1,"a":true}}')
