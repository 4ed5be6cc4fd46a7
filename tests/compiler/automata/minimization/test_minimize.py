"""Trim and minimization keep the language, leave a trim automaton, and leave no two equivalent states."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import compile_regex
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization.minimize import (
    bfs_order,
    entering_symbols,
    minimize,
    minimized,
    renumber_bfs,
    trim,
    trim_in_bfs_order,
)
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import EmptyLanguageError


def _with_dead(table: np.ndarray, accepting: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Complete a partial DFA with an explicit dead state (the last one)."""
    dead = len(table)
    complete = np.where(table < 0, dead, table)
    complete = np.vstack([complete, np.full((1, table.shape[1]), dead)])
    return complete, np.append(accepting, False)


def distinguishable_pairs(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Table-filling (Myhill–Nerode marking): `marked[p, q]` iff some word separates p and q."""
    complete, accept = _with_dead(table, accepting)
    columns = np.unique(complete, axis=1)
    marked = accept[:, None] != accept[None, :]
    while True:
        spread = marked.copy()
        for column in columns.T:
            spread |= marked[column[:, None], column[None, :]]
        if (spread == marked).all():
            return marked[:-1, :-1]
        marked = spread


def same_language(table_a: np.ndarray, accept_a: np.ndarray, table_b: np.ndarray, accept_b: np.ndarray) -> bool:
    """Product-automaton search over the two tables (same alphabet) for a separating word."""
    complete_a, acc_a = _with_dead(table_a, accept_a)
    complete_b, acc_b = _with_dead(table_b, accept_b)
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        p, q = stack.pop()
        if acc_a[p] != acc_b[q]:
            return False
        for pair in set(zip(complete_a[p].tolist(), complete_b[q].tolist())):
            if pair not in seen:
                seen.add(pair)
                stack.append(pair)
    return True


def _is_trim(table: np.ndarray, accepting: np.ndarray) -> bool:
    forward = {0}
    stack = [0]
    while stack:
        for target in table[stack.pop()].tolist():
            if target >= 0 and target not in forward:
                forward.add(target)
                stack.append(target)
    alive = set(np.flatnonzero(accepting).tolist())
    changed = True
    while changed:
        changed = False
        for state in range(len(table)):
            if state not in alive and any(t in alive for t in table[state].tolist() if t >= 0):
                alive.add(state)
                changed = True
    return len(forward) == len(table) == len(alive)


PATTERNS = [
    "(a|b)*abb", "a*|b*", "(ab|a)(bc|c)", "(a|ab)(c|bcd)(d*)", r"[a-c]{0,5}x?", "(?:aa|aaa)*",
    r"\d+(\.\d*)?|\.\d+", r'\{"k":(?:"[a-z]*"|[0-9]{1,3})\}', "é|e\u0301|ü+", r"(a|b)*a(a|b){3}", "",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_minimized_automaton_is_minimal_trim_and_same_language(pattern: str) -> None:
    dfa = determinize(build_nfa(parse_regex(pattern)))
    table, accepting = minimize(dfa.table, dfa.accepting)
    assert same_language(table, accepting, dfa.table, dfa.accepting)
    assert _is_trim(table, accepting)
    marked = distinguishable_pairs(table, accepting)
    assert marked[~np.eye(len(table), dtype=bool)].all()
    automaton = compile_regex(pattern)
    assert automaton.num_states == len(table)
    assert same_language(automaton.transitions.astype(np.int64), automaton.accepting,
                         dfa.byte_table().astype(np.int64), dfa.accepting)


@st.composite
def random_tables(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    num_states = draw(st.integers(1, 10))
    num_symbols = draw(st.one_of(st.integers(1, 3), st.integers(60, 140)))
    table = np.array(draw(st.lists(
        st.lists(st.integers(-1, num_states - 1), min_size=num_symbols, max_size=num_symbols),
        min_size=num_states, max_size=num_states)), dtype=np.int64).reshape(num_states, num_symbols)
    accepting = np.array(draw(st.lists(st.booleans(), min_size=num_states, max_size=num_states)))
    return table, accepting


@settings(max_examples=400, deadline=None)
@given(random_tables())
def test_minimize_random_tables(dfa: tuple[np.ndarray, np.ndarray]) -> None:
    table, accepting = dfa
    try:
        small, small_accepting = minimize(table, accepting)
    except EmptyLanguageError:
        assert not _reachable_accepting(table, accepting)
        return
    assert same_language(small, small_accepting, table, accepting)
    assert _is_trim(small, small_accepting)
    marked = distinguishable_pairs(small, small_accepting)
    assert marked[~np.eye(len(small), dtype=bool)].all()
    again, again_accepting = minimize(small, small_accepting)
    assert np.array_equal(again, small) and np.array_equal(again_accepting, small_accepting)


@settings(max_examples=300, deadline=None)
@given(random_tables())
def test_trim_in_bfs_order_keeps_the_language_and_is_minimize_on_a_minimal_dfa(dfa: tuple[np.ndarray, np.ndarray]
                                                                             ) -> None:
    """The pushdown's bodies with calls are trimmed in BFS order, not minimized: trim, the same language, minimized
    to `minimize`'s table, and that very table whenever the DFA given was minimal already."""
    table, accepting = dfa
    try:
        minimal = minimize(table, accepting)
    except EmptyLanguageError:
        with pytest.raises(EmptyLanguageError):
            trim_in_bfs_order(table, accepting)
        return
    trimmed, trimmed_accepting = trim_in_bfs_order(table, accepting)
    assert _is_trim(trimmed, trimmed_accepting)
    assert same_language(trimmed, trimmed_accepting, table, accepting)
    again = minimize(trimmed, trimmed_accepting)
    assert np.array_equal(again[0], minimal[0]) and np.array_equal(again[1], minimal[1])
    if len(trimmed) == len(minimal[0]):
        assert np.array_equal(trimmed, minimal[0]) and np.array_equal(trimmed_accepting, minimal[1])
    assert np.array_equal(trim_in_bfs_order(*minimal)[0], minimal[0])


@settings(max_examples=300, deadline=None)
@given(random_tables())
def test_a_trim_keeps_the_breadth_first_order_of_what_it_keeps(dfa: tuple[np.ndarray, np.ndarray]) -> None:
    """A table numbered in BFS order (as a subset construction numbers its states) trimmed of its dead ends is still
    in BFS order, so `trim_in_bfs_order` told so returns the renumbered table without renumbering, and `minimize`
    told so returns it as trimmed when it is minimal."""
    ordered, accepting = renumber_bfs(*dfa)
    try:
        expected = trim_in_bfs_order(ordered, accepting, all_reachable=True)
    except EmptyLanguageError:
        return
    kept = trim_in_bfs_order(ordered, accepting, all_reachable=True, in_bfs_order=True)
    assert np.array_equal(kept[0], expected[0]) and np.array_equal(kept[1], expected[1])
    minimal = minimize(ordered, accepting, all_reachable=True)
    told = minimize(ordered, accepting, all_reachable=True, in_bfs_order=True)
    assert np.array_equal(told[0], minimal[0]) and np.array_equal(told[1], minimal[1])
    assert told[0].dtype == minimal[0].dtype and told[1].dtype == minimal[1].dtype


def _reachable_accepting(table: np.ndarray, accepting: np.ndarray) -> bool:
    seen, stack = {0}, [0]
    while stack:
        state = stack.pop()
        if accepting[state]:
            return True
        for target in table[state].tolist():
            if target >= 0 and target not in seen:
                seen.add(target)
                stack.append(target)
    return False


def test_trim_drops_unreachable_and_dead_end_states() -> None:
    table = np.array([[1, 2], [3, -1], [2, 2], [-1, -1], [0, 3]])
    accepting = np.array([False, False, False, True, False])
    trimmed, trimmed_accepting = trim(table, accepting)
    assert trimmed.tolist() == [[1, -1], [2, -1], [-1, -1]]
    assert trimmed_accepting.tolist() == [False, False, True]
    with pytest.raises(EmptyLanguageError):
        trim(table, np.zeros(5, dtype=bool))


@settings(max_examples=300, deadline=None)
@given(random_tables())
def test_entering_symbols_lists_every_move_into_each_state(dfa: tuple[np.ndarray, np.ndarray]) -> None:
    """Against a walk over every cell: per target, its sources in increasing order, each with the bit mask of the
    symbols that move it there (widths past 64 symbols span several words)."""
    table, _ = dfa
    expected: dict[int, dict[int, int]] = {}
    for source, symbol in zip(*np.nonzero(table >= 0)):
        into = expected.setdefault(int(table[source, symbol]), {})
        into[int(source)] = into.get(int(source), 0) | 1 << int(symbol)
    bounds, sources, masks = entering_symbols(table)
    assert len(bounds) == len(table) + 1
    for target in range(len(table)):
        listed = list(zip(sources[bounds[target]:bounds[target + 1]], masks[bounds[target]:bounds[target + 1]]))
        assert listed == sorted(expected.get(target, {}).items())


@settings(max_examples=300, deadline=None)
@given(random_tables(), st.integers(0, 9))
def test_bfs_order_is_a_search_visiting_each_row_by_symbol(dfa: tuple[np.ndarray, np.ndarray], start: int) -> None:
    """Against a queue over the table, each row's symbols in increasing order (rows of few targets over many
    symbols repeat a target in runs, which the search takes once)."""
    table, _ = dfa
    start %= len(table)
    order, seen = [start], {start}
    for state in order:
        for target in table[state].tolist():
            if target >= 0 and target not in seen:
                seen.add(target)
                order.append(target)
    assert bfs_order(table, start).tolist() == order


@settings(max_examples=200, deadline=None)
@given(random_tables())
def test_a_kept_minimization_is_the_fresh_one_and_the_callers_own(dfa: tuple[np.ndarray, np.ndarray]) -> None:
    """`minimize` keeps its result per table content: a second call returns equal arrays, unharmed by what the
    first caller wrote into its copy, and equal to `minimized`'s."""
    table, accepting = dfa
    try:
        fresh = minimized(table, accepting)
    except EmptyLanguageError:
        return
    for _ in range(2):
        small, small_accepting = minimize(table.copy(), accepting.copy())
        assert np.array_equal(small, fresh[0]) and np.array_equal(small_accepting, fresh[1])
        assert small.dtype == fresh[0].dtype
        small[:] = -7
        small_accepting[:] = ~small_accepting
