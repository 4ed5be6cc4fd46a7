"""The regions a substitution searches are kept per piece (`subset_substitution.piece_region`): a piece met again, in
the same substitution or another one over other classes, gets the states a fresh search finds, and a substitution
served from kept regions writes the table a cold one writes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata import subset_substitution
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimize import minimize
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import StateBudgetError

PIECE_PATTERNS = ["[a-c]{0,6}", "(?:ab|a)+", "x[a-c]*y", "[a-c]{2,5}z", "(?:ab)*", "[^a]{1,3}", "a", "[a-c]{3}"]


def _skeletons(placeholders: int) -> st.SearchStrategy[ir.Node]:
    """Expressions over a few bytes and `placeholders` placeholder symbols (256 + j), in sequences, alternations and
    loops."""
    leaves = st.one_of(st.sampled_from([ir.literal(c) for c in "abxz,"]),
                       st.integers(0, placeholders - 1).map(lambda j: ir.ByteSet(((256 + j, 256 + j),))))
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda items: ir.seq(*items)),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: ir.alt(*items)),
        inner.map(ir.star), inner.map(ir.optional)), max_leaves=8)


def _skeleton(node: ir.Node, placeholders: int) -> tuple[np.ndarray, np.ndarray]:
    """The minimal DFA of `node` then ';' over the bytes and the placeholders, over every symbol."""
    try:
        dfa = determinize(build_nfa(ir.seq(node, ir.literal(";"))), 10_000, 256 + placeholders)
    except StateBudgetError:
        reject()
    table, accepting = minimize(dfa.table, dfa.accepting)
    return np.asarray(table, dtype=np.int32)[:, dfa.byte_class], accepting


def _fresh_region(piece: object, table: np.ndarray, states: np.ndarray) -> tuple[set[int], set[int]]:
    """The region searched afresh, as sets."""
    inside, ends = subset_substitution._searched_region(piece.accepting, table, states)  # type: ignore[attr-defined]
    return set(inside.tolist()), set(ends.tolist())


@settings(max_examples=100, deadline=None)
@given(pattern=st.sampled_from(PIECE_PATTERNS), data=st.data())
def test_a_kept_region_is_the_one_a_search_over_any_classes_finds(pattern: str, data: st.DataObject) -> None:
    """A piece's region, searched over its own classes and kept, is what a search over its 256-column table finds,
    and the kept one serves the next substitution entering the piece alike."""
    caches.clear()
    piece = build_automaton(parse_regex(pattern))
    bytes_table = np.asarray(piece.class_transitions, dtype=np.int32)[:, np.asarray(piece.byte_class)]
    candidates = np.flatnonzero(~piece.accepting)
    if not len(candidates):
        reject()
    chosen = data.draw(st.lists(st.sampled_from(candidates.tolist()), min_size=1, max_size=3, unique=True))
    states = np.array(sorted(chosen), dtype=np.int64)
    kept = subset_substitution.piece_region(piece, states)
    assert subset_substitution.piece_region(piece, states) is kept
    assert (set(kept[0].tolist()), set(kept[1].tolist())) == _fresh_region(piece, bytes_table, states)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 3).flatmap(lambda count: st.tuples(
    _skeletons(count), _skeletons(count),
    st.lists(st.lists(st.sampled_from(PIECE_PATTERNS), min_size=1, max_size=2), min_size=count, max_size=count))))
def test_a_substitution_served_from_kept_regions_writes_the_cold_table(case: tuple) -> None:
    """Two skeletons substituting the same pieces: the second, whose regions the first kept, gives the table, the
    accepting mask and the classes it gives with nothing kept, and refuses a budget one short of it alike."""
    first_node, second_node, patterns = case
    first, first_accepting = _skeleton(first_node, len(patterns))
    second, second_accepting = _skeleton(second_node, len(patterns))
    caches.clear()
    pieces = [[build_automaton(parse_regex(pattern)) for pattern in column] for column in patterns]
    cold = subset_substitution.substituted_classes(second, second_accepting, pieces, 256)
    caches.clear()
    pieces = [[build_automaton(parse_regex(pattern)) for pattern in column] for column in patterns]
    subset_substitution.substituted_classes(first, first_accepting, pieces, 256)
    warm = subset_substitution.substituted_classes(second, second_accepting, pieces, 256, None, len(cold[1]))
    assert all(np.array_equal(got, expected) for got, expected in zip(warm, cold))
    with pytest.raises(subset_substitution.TooManyStates):
        subset_substitution.substituted_classes(second, second_accepting, pieces, 256, None, len(cold[1]) - 1)
