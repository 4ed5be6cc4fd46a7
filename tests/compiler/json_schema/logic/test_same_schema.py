"""`disjoint.same_schema` tells two schemas written apart by a walk, without writing them: its answer is always
whether `json.dumps(.., sort_keys=True, default=str)` writes them alike (NaN, -0.0, 1 against 1.0 or true, a
`Decimal` against its text, integer against string keys included)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.json_schema.logic.disjoint import same_schema

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from([0.0, -0.0, 1.0, float("nan"), 2.5]),
    st.sampled_from(["", "a", "1", "true", "null"]), st.sampled_from([Decimal("1"), Decimal("2.5")]))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["a", "b", "type"]), inner, max_size=3)),
    max_leaves=10)


def _written_alike(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


@settings(max_examples=500, deadline=None)
@given(_VALUES, _VALUES)
def test_same_schema_is_whether_both_are_written_alike(a: Any, b: Any) -> None:
    assert same_schema(a, b) == _written_alike(a, b)
    assert same_schema(a, a)


@settings(max_examples=200, deadline=None)
@given(_VALUES)
def test_a_value_and_its_copy_through_json_text_are_the_same_when_written_alike(a: Any) -> None:
    copy = json.loads(json.dumps(a, default=str))
    assert same_schema(a, copy) == _written_alike(a, copy)


def test_keys_that_are_no_strings_leave_it_to_the_written_text() -> None:
    assert same_schema({1: "a"}, {"1": "a"})
    assert not same_schema({"a": 1}, {"a": 1.0}) and not same_schema({"a": 1}, {"a": True})
    assert same_schema({"a": float("nan")}, {"a": float("nan")}) and same_schema({"a": Decimal("1")}, {"a": "1"})
