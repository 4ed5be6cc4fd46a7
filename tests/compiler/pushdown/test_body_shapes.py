"""A body's subset construction kept per shape (`body_shapes`) and widened to another body of that shape, or to a
wider alphabet, is the table that body's own construction builds, symbol for symbol; two bodies share a shape exactly
where renumbering their calls in increasing order makes them equal; a kept construction is not reused past a
smaller budget."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.pushdown.body_shapes import call_shape, subset_body_dfa, subset_dfa
from stdsl.compiler.pushdown.grammar import CALL_BASE
from stdsl.errors import StateBudgetError

CALLS = 5
WIDE_CALLS = 12


def _calls(*indices: int) -> ir.Node:
    """A byte set of the call symbols of `indices` (ranges merged, as a grammar may write several calls as one)."""
    return ir.ByteSet(ir.merged_ranges((CALL_BASE + index, CALL_BASE + index) for index in indices))


def body_nodes() -> st.SearchStrategy[ir.Node]:
    """Random bodies over a few bytes and `CALLS` call symbols (alone, several in one set, or beside bytes), with
    repeats and shared parts."""
    call = st.integers(0, CALLS - 1)
    leaf = st.one_of(
        st.sampled_from([ir.literal("a"), ir.literal("ab"), ir.byte_set([(0x61, 0x63)])]),
        call.map(lambda index: ir.seq(ir.literal("c"), _calls(index))),
        st.lists(call, min_size=1, max_size=3).map(lambda indices: _calls(*indices)),
        call.map(lambda index: ir.ByteSet(((0x64, 0x64), (CALL_BASE + index, CALL_BASE + index)))))
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.seq(*items)),
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.alt(*items)),
        st.tuples(inner, st.integers(0, 2), st.integers(0, 2)).map(lambda t: ir.repeat(t[0], t[1], t[1] + t[2]))),
        max_leaves=8)


def renamed(node: ir.Node, symbol_of: dict[int, int]) -> ir.Node:
    """`node` with each call symbol s read as `symbol_of[s]` (a brute-force rewrite of every node)."""
    if isinstance(node, ir.ByteSet):
        symbols = sorted(symbol_of.get(s, s) for lo, hi in node.ranges for s in range(lo, hi + 1))
        return ir.ByteSet(ir.merged_ranges((s, s) for s in symbols))
    if isinstance(node, ir.Repeat):
        return ir.Repeat(renamed(node.item, symbol_of), node.min, node.max)
    if isinstance(node, ir.Seq):
        return ir.Seq(tuple(renamed(item, symbol_of) for item in node.items))
    assert isinstance(node, ir.Alt)
    return ir.Alt(tuple(renamed(item, symbol_of) for item in node.items))


def canonical(node: ir.Node) -> ir.Node:
    """`node` with its call symbols renumbered from `CALL_BASE` in increasing order (the reference for the key)."""
    shape = call_shape(node, CALL_BASE, {})
    assert shape is not None
    return renamed(node, {symbol: CALL_BASE + rank for rank, symbol in enumerate(shape[1])})


def per_symbol(dfa: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """A body DFA's table over every symbol, its accepting mask, and its byte classes as a canonical labelling."""
    table, symbol_class, accepting = dfa
    first: dict[int, int] = {}
    labels = [first.setdefault(int(c), len(first)) for c in symbol_class[:CALL_BASE]]
    return table[:, symbol_class], np.asarray(accepting), labels


def assert_same(got: tuple[np.ndarray, np.ndarray, np.ndarray], expected: tuple[np.ndarray, np.ndarray, np.ndarray]
                ) -> None:
    left, right = per_symbol(got), per_symbol(expected)
    assert np.array_equal(left[0], right[0]) and np.array_equal(left[1], right[1]) and left[2] == right[2]


@settings(max_examples=150, deadline=None)
@given(body_nodes(), st.data())
def test_a_shape_widened_to_another_body_is_that_bodys_construction(body: ir.Node, data: st.DataObject) -> None:
    """Built for one body, served to a body whose calls are other definitions in the same order under a wider
    alphabet (and back to the first body): the tables that each body's own subset construction builds."""
    shape = call_shape(body, CALL_BASE, {})
    assert shape is not None
    calls = shape[1]
    targets = sorted(data.draw(st.sets(st.integers(0, WIDE_CALLS - 1), min_size=len(calls), max_size=len(calls))))
    other = renamed(body, {symbol: CALL_BASE + target for symbol, target in zip(calls, targets)})
    caches.clear()
    first = subset_body_dfa(body, 100_000, CALL_BASE + CALLS, CALL_BASE)
    widened = subset_body_dfa(other, 100_000, CALL_BASE + WIDE_CALLS, CALL_BASE)
    again = subset_body_dfa(body, 100_000, CALL_BASE + CALLS, CALL_BASE)
    other_shape = call_shape(other, CALL_BASE, {})
    assert other_shape is not None and other_shape[0] == shape[0]
    assert_same(first, subset_dfa(body, 100_000, CALL_BASE + CALLS)[0])
    assert_same(widened, subset_dfa(other, 100_000, CALL_BASE + WIDE_CALLS)[0])
    assert_same(again, first)
    caches.clear()


@settings(max_examples=200, deadline=None)
@given(body_nodes(), body_nodes())
def test_two_bodies_share_a_shape_exactly_where_their_renumbered_calls_agree(left: ir.Node, right: ir.Node) -> None:
    left_shape, right_shape = call_shape(left, CALL_BASE, {}), call_shape(right, CALL_BASE, {})
    assert left_shape is not None and right_shape is not None
    assert (left_shape[0] == right_shape[0]) == (canonical(left) == canonical(right))
    assert left_shape[1] == tuple(sorted({s for part in ir.distinct_nodes(left) if isinstance(part, ir.ByteSet)
                                          for lo, hi in part.ranges for s in range(max(lo, CALL_BASE), hi + 1)}))


@settings(max_examples=80, deadline=None)
@given(body_nodes(), st.integers(1, 40))
def test_a_kept_shape_serves_only_a_budget_its_construction_fitted_in(body: ir.Node, budget: int) -> None:
    """Kept from a large budget, then asked under a small one: refused exactly where the body's own construction
    is, else the same table."""
    caches.clear()
    subset_body_dfa(body, 100_000, CALL_BASE + CALLS, CALL_BASE)
    try:
        expected = subset_dfa(body, budget, CALL_BASE + CALLS)[0]
    except StateBudgetError:
        with pytest.raises(StateBudgetError):
            subset_body_dfa(body, budget, CALL_BASE + CALLS, CALL_BASE)
    else:
        assert_same(subset_body_dfa(body, budget, CALL_BASE + CALLS, CALL_BASE), expected)
    caches.clear()


def test_a_body_holding_a_grammar_has_no_shape() -> None:
    grammar = ir.EmbeddedGrammar("g", ir.literal("a"), (), (), False)
    assert call_shape(ir.seq(ir.literal("a"), grammar), CALL_BASE, {}) is None
