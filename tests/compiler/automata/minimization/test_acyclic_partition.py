"""A trim acyclic DFA partitioned without Hopcroft refinement: told minimal by its states' languages only where no two
states are equivalent, and in blocks a height at a time exactly as Myhill-Nerode equivalence puts it."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import compile_regex
from stdsl.compiler.automata.minimization import acyclic_partition, minimize
from stdsl.compiler.automata.minimization.acyclic_partition import (
    blocks_by_height,
    distinct_by_language,
    heights,
    level_heights,
)
from stdsl.compiler.automata.minimization.minimize import minimized, nerode_blocks, refined_one_at_a_time, trim
from stdsl.compiler.automata.state_graph import reversed_lists, successor_lists
from stdsl.errors import EmptyLanguageError
from tests.compiler.automata.minimization.test_minimize import distinguishable_pairs


@st.composite
def acyclic_tables(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """A trim DFA whose moves all go to higher-numbered states: a chain (a bounded string's counter), with or
    without moves that skip ahead, and with copies of a state's row that make states equivalent."""
    num_states = draw(st.integers(1, 30))
    num_symbols = draw(st.integers(1, 4))
    table = np.full((num_states, num_symbols), -1, dtype=np.int64)
    for state in range(num_states - 1):
        for symbol in range(num_symbols):
            if draw(st.integers(0, 2)):
                table[state, symbol] = draw(st.integers(state + 1, min(num_states - 1, state + draw(
                    st.sampled_from([1, 1, 2, 30])))))
    accepting = np.array(draw(st.lists(st.booleans(), min_size=num_states, max_size=num_states)))
    for _ in range(draw(st.integers(0, 3))):
        source, copy = sorted(draw(st.lists(st.integers(0, num_states - 1), min_size=2, max_size=2)))
        moves = table[source][table[source] >= 0]
        if source != copy and (table[copy] < 0).all() and (moves > copy).all():
            table[copy] = table[source]
            accepting[copy] = accepting[source]
    try:
        return trim(table, accepting)
    except EmptyLanguageError:
        return np.full((1, num_symbols), -1, dtype=np.int64), np.array([True])


def _longest_paths(table: np.ndarray) -> list[int]:
    """The longest path from each state to a state without moves, by a memoized search (the oracle)."""
    found: dict[int, int] = {}

    def longest(state: int) -> int:
        if state not in found:
            found[state] = max((longest(int(t)) + 1 for t in table[state] if t >= 0), default=0)
        return found[state]

    return [longest(state) for state in range(len(table))]


def _lists(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    indptr, successors = successor_lists(table)
    return (indptr, successors, *reversed_lists(indptr, successors))


@settings(max_examples=300, deadline=None)
@given(acyclic_tables())
def test_heights_are_the_longest_paths_and_a_cycle_has_none(dfa: tuple[np.ndarray, np.ndarray]) -> None:
    table, _ = dfa
    indptr, _, reverse_indptr, predecessors = _lists(table)
    assert heights(indptr, reverse_indptr, predecessors).tolist() == _longest_paths(table)
    with mock.patch.object(acyclic_partition, "STATES_PER_HEIGHT", 0):
        assert level_heights(indptr, reverse_indptr, predecessors).tolist() == _longest_paths(table)
    looped = table.copy()
    looped[-1, 0] = 0
    indptr, _, reverse_indptr, predecessors = _lists(looped)
    assert heights(indptr, reverse_indptr, predecessors) is None
    with mock.patch.object(acyclic_partition, "STATES_PER_HEIGHT", 0):
        assert level_heights(indptr, reverse_indptr, predecessors) is None


@settings(max_examples=400, deadline=None)
@given(acyclic_tables(), st.sampled_from([0.0, 0.25, 1.0]))
def test_states_are_told_apart_only_where_none_is_equivalent(dfa: tuple[np.ndarray, np.ndarray],
                                                             share: float) -> None:
    table, accepting = dfa
    indptr, _, reverse_indptr, predecessors = _lists(table)
    height = heights(indptr, reverse_indptr, predecessors)
    assert height is not None
    with mock.patch.object(acyclic_partition, "DISTINCT_SHARE", share):
        block = distinct_by_language(table, accepting, height)
    equivalent = ~distinguishable_pairs(table, accepting)
    if block is not None:
        assert sorted(block.tolist()) == list(range(len(table)))
        assert np.array_equal(equivalent, np.eye(len(table), dtype=bool))
    with mock.patch.object(minimize, "BATCHED_FROM", 1), mock.patch.object(acyclic_partition, "DISTINCT_SHARE", share):
        found = nerode_blocks(table, accepting)
    assert np.array_equal(found[:, None] == found[None, :], equivalent)


@settings(max_examples=400, deadline=None)
@given(acyclic_tables(), st.sampled_from([0, 1, 3]))
def test_blocks_by_height_are_the_myhill_nerode_partition(dfa: tuple[np.ndarray, np.ndarray], per_height: int
                                                          ) -> None:
    table, accepting = dfa
    indptr, _, reverse_indptr, predecessors = _lists(table)
    height = heights(indptr, reverse_indptr, predecessors)
    equivalent = ~distinguishable_pairs(table, accepting)
    with mock.patch.object(acyclic_partition, "STATES_PER_HEIGHT", per_height):
        block = blocks_by_height(table, accepting, height)
        with mock.patch.object(minimize, "BATCHED_FROM", 1), \
                mock.patch.object(acyclic_partition, "CHAIN_RUNS", 0.0), \
                mock.patch.object(minimize, "batched_rounds", side_effect=AssertionError("refined")):
            found = nerode_blocks(table, accepting) if block is not None else None
    if (int(height.max()) + 1) * per_height > len(table):
        assert block is None
        return
    assert np.array_equal(block[:, None] == block[None, :], equivalent)
    assert np.array_equal(found[:, None] == found[None, :], equivalent)


def test_a_hash_collision_in_a_height_is_caught_by_the_congruence_check() -> None:
    """States of one height joined by a colliding hash fail `is_congruence`, and refinement gives the partition."""
    table = np.array([[1, 2], [3, -1], [-1, 3], [-1, -1]], dtype=np.int64)
    accepting = np.array([False, False, False, True])
    equivalent = ~distinguishable_pairs(table, accepting)
    colliding = mock.patch.object(acyclic_partition, "odd_multipliers",
                                  lambda stream, count: np.zeros(count, dtype=np.uint64))
    with colliding, mock.patch.object(acyclic_partition, "STATES_PER_HEIGHT", 0), \
            mock.patch.object(minimize, "BATCHED_FROM", 1):
        joined = blocks_by_height(table, accepting, np.array([2, 1, 1, 0]))
        found = nerode_blocks(table, accepting)
    assert joined[1] == joined[2] and not equivalent[1, 2]
    assert np.array_equal(found[:, None] == found[None, :], equivalent)


def test_a_long_bounded_string_is_minimal_without_refinement() -> None:
    """A bounded string's DFA (a chain of a few thousand states, a step per character) is shown minimal by its
    states' heights and one round, and its table is the one Hopcroft refinement gives."""
    automaton = compile_regex(r"[a-z]{1,8}(-[a-z0-9]{1,8}){0,300}")
    table = np.asarray(automaton.class_transitions, dtype=np.int64)
    accepting = np.asarray(automaton.accepting, dtype=bool)
    assert len(table) >= minimize.BATCHED_FROM
    with mock.patch.object(minimize, "batched_rounds", side_effect=AssertionError("refined")), \
            mock.patch.object(minimize, "refined_one_at_a_time", side_effect=AssertionError("refined")):
        block = nerode_blocks(table, accepting)
        shortcut = minimized(table[::1], accepting)
    initial = accepting.astype(np.int64)
    refined = refined_one_at_a_time(table, initial, [0, 1])
    assert np.array_equal(block[:, None] == block[None, :], refined[:, None] == refined[None, :])
    assert np.array_equal(shortcut[0], table) and np.array_equal(shortcut[1], accepting)
