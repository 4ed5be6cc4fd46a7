"""`approximated` with the document's memo (`Context.approximated`) answers as the plain walk does, however often
and in whatever order parts (shared or not) are asked."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.json_schema.logic.disjoint import approximated
from stdsl.compiler.json_schema.resolve import INEXACT

leaves = st.one_of(st.integers(), st.text(max_size=3), st.booleans(), st.none())
schemas = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["properties", "items", "enum", "anyOf", "a", INEXACT]), inner, max_size=3),
        st.dictionaries(st.sampled_from(["x", "enum"]), inner, max_size=2).map(lambda d: {**d, INEXACT: True})),
    max_leaves=12)


def parts(node: Any) -> list[Any]:
    """`node` and every dict and list inside it."""
    found = [node]
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        found.extend(parts(child))
    return found


@settings(max_examples=200, deadline=None)
@given(schemas, schemas, st.randoms(use_true_random=False))
def test_the_memo_answers_as_the_walk(first: Any, second: Any, order: Any) -> None:
    shared = {"properties": {"p": first, "q": second}, "items": [second, first]}
    asked = parts(shared) + parts(first) + parts(second)
    order.shuffle(asked)
    known: dict[int, tuple[Any, bool]] = {}
    for part in asked:
        assert approximated(part, known) == approximated(part)
