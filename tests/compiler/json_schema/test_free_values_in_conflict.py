"""A free-form value whose call meets an L(1) conflict keeps its whole language.

In a union of an open object and a declared one (`anyOf`), a member's free-form value (a call of the
any-value nonterminal) stands where the other branch reads bytes of its own, which one byte of lookahead
cannot tell apart.  The value is then written out down to a nesting depth with calls below, one past the
deepest member declared (`recursive.MAX_ANY_LEVELS`); it used to be bounded at `ANY_VALUE_DEPTH` levels, so
a valid instance nested deeper was refused.  Oracle: `jsonschema`, on random instances and random accepted walks.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint import Constraint
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.to_ir import ANY_VALUE_DEPTH
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from tests.compiler.accepting_walks import random_accepted

OPEN_OR_DECLARED = {"anyOf": [{"type": "object"}, {"properties": {"a": {"type": "string"}}}]}
FEED = {"type": "object", "anyOf": [
    {"properties": {"lang": {"type": "string"}}},
    {"properties": {"id": {"type": "object", "additionalProperties": False},
                    "entry": {"type": "array", "items": {"properties": {
                        "author": {"type": "array", "items": {"properties": {"uri": {"type": "object"}}}}}}}}}]}
"""The shape of MaskBench's Github_hard o10421 (an Atom feed): a valid feed's `entry` was refused once `id` had
ruled out the declared branch."""

KEYS = st.sampled_from(["a", "b", "id", "entry", "lang"])
SHALLOW = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3), max_leaves=8)


def wrapped(value: Any, wrappers: list[str]) -> Any:
    """The value inside the given containers, innermost first: a key's one-member object, or `[]` an array."""
    for wrapper in wrappers:
        value = [value] if wrapper == "[]" else {wrapper: value}
    return value


JSON_VALUES = st.builds(wrapped, SHALLOW, st.lists(st.sampled_from(["a", "b", "id", "entry", "author", "[]"]),
                                                   max_size=7))


def deep(levels: int) -> Any:
    """Objects and arrays alternating, `levels` containers deep."""
    value: Any = 1
    for level in range(levels):
        value = {"k": value} if level % 2 else [value, "x"]
    return value


def compiled(schema: dict) -> Constraint | PushdownConstraint:
    return compile_constraint(schema, strict=False)


def accepted(constraint: Constraint | PushdownConstraint, value: Any, schema: dict) -> bool:
    """Whether the value is accepted in its own key order or in the schema's (the orders the compiler writes)."""
    own = json.dumps(value, separators=(",", ":"))
    return constraint.accepts(own) or constraint.accepts(dump_in_schema_order(value, schema))


def test_a_value_past_the_dfa_bound_is_accepted_beside_a_conflicting_branch() -> None:
    constraint = compiled(OPEN_OR_DECLARED)
    for value in ({"a": deep(ANY_VALUE_DEPTH + 3)}, {"b": deep(ANY_VALUE_DEPTH + 5), "a": "s"}, {"a": "s"}):
        assert constraint.accepts(json.dumps(value, separators=(",", ":"))), value
    assert not constraint.accepts('{"a":[1}') and not constraint.accepts('{"a"}')


def test_the_feed_shape_is_accepted_whole() -> None:
    constraint = compiled(FEED)
    feed = {"id": "x", "entry": [{"author": [{"name": "n", "uri": "u"}], "more": deep(ANY_VALUE_DEPTH + 2)}]}
    assert jsonschema.Draft202012Validator(FEED).is_valid(feed)
    assert accepted(constraint, feed, FEED)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([OPEN_OR_DECLARED, FEED]), JSON_VALUES)
def test_random_values_are_accepted_exactly_when_valid(schema: dict, value: Any) -> None:
    constraint = compiled(schema)
    valid = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert accepted(constraint, value, schema) == valid, (value, valid)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_accepted_walks_validate(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for schema in (OPEN_OR_DECLARED, FEED):
        validator = jsonschema.Draft202012Validator(schema)
        constraint = compiled(schema)
        machine = constraint.machine if isinstance(constraint, PushdownConstraint) else constraint.automaton
        for _ in range(5):
            text = random_accepted(machine, rng).decode("utf-8")
            assert validator.is_valid(json.loads(text)), text
