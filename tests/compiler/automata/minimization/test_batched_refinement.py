"""Batched Hopcroft rounds (then the one-splitter loop) give exactly the Myhill-Nerode partition of a trim DFA."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.minimization import batched_refinement, minimize
from stdsl.compiler.automata.minimization.batched_refinement import batched_rounds, entering_weights, is_congruence
from stdsl.compiler.automata.minimization.minimize import nerode_blocks, refined_one_at_a_time, trim
from stdsl.errors import EmptyLanguageError
from tests.compiler.automata.minimization.test_minimize import distinguishable_pairs


@st.composite
def trim_tables(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """A trim DFA with many equivalent states: targets drawn from a few states, or a chain of them (a counter)."""
    num_states = draw(st.integers(1, 40))
    num_symbols = draw(st.one_of(st.integers(1, 4), st.integers(60, 140)))
    reach = draw(st.integers(1, num_states))
    rows = draw(st.lists(st.lists(st.integers(-1, reach - 1), min_size=num_symbols, max_size=num_symbols),
                         min_size=num_states, max_size=num_states))
    table = np.array(rows, dtype=np.int64).reshape(num_states, num_symbols)
    if draw(st.booleans()):
        table[:-1, 0] = np.arange(1, num_states)
    accepting = np.array(draw(st.lists(st.booleans(), min_size=num_states, max_size=num_states)))
    try:
        return trim(table, accepting)
    except EmptyLanguageError:
        return np.zeros((1, num_symbols), dtype=np.int64) - 1, np.array([True])


def _same_partition(block: np.ndarray, other: np.ndarray) -> bool:
    """Whether two block numberings put the same states together."""
    return bool(np.array_equal(block[:, None] == block[None, :], other[:, None] == other[None, :]))


@settings(max_examples=400, deadline=None)
@given(trim_tables(), st.sampled_from([(0, 1), (48, 256), (6, 4), (1 << 30, 1)]))
def test_batched_rounds_give_the_myhill_nerode_partition(dfa: tuple[np.ndarray, np.ndarray],
                                                         thin: tuple[int, int]) -> None:
    table, accepting = dfa
    equivalent = ~distinguishable_pairs(table, accepting)
    with mock.patch.object(minimize, "BATCHED_FROM", 1), \
            mock.patch.object(batched_refinement, "THIN_ROUND_ENTRIES", thin[0]), \
            mock.patch.object(batched_refinement, "STATES_PER_THIN_ROUND", thin[1]):
        block = nerode_blocks(table, accepting)
        initial = np.unique(accepting, return_inverse=True)[1].reshape(-1)
        batched = refined_one_at_a_time(table, *batched_rounds(table, initial))
    assert np.array_equal(block[:, None] == block[None, :], equivalent)
    assert np.array_equal(batched[:, None] == batched[None, :], equivalent)
    assert _same_partition(block, refined_one_at_a_time(table, initial, list(range(int(initial.max()) + 1))))


@settings(max_examples=200, deadline=None)
@given(trim_tables())
def test_a_partition_coarser_than_nerode_is_no_congruence_and_is_refined_afresh(
        dfa: tuple[np.ndarray, np.ndarray]) -> None:
    """A hash collision leaves states together that differ; `is_congruence` sees it and the loop starts over."""
    table, accepting = dfa
    initial = np.unique(accepting, return_inverse=True)[1].reshape(-1)
    equivalent = ~distinguishable_pairs(table, accepting)
    assert is_congruence(table, accepting, initial) == bool(equivalent[initial[:, None] == initial[None, :]].all())
    with mock.patch.object(minimize, "BATCHED_FROM", 1), \
            mock.patch.object(minimize, "batched_rounds", lambda table, block: (block, [])):
        block = nerode_blocks(table, accepting)
    assert np.array_equal(block[:, None] == block[None, :], equivalent)


@settings(max_examples=200, deadline=None)
@given(trim_tables(), st.integers(0, 2**32))
def test_entering_weights_sum_the_symbols_of_each_move(dfa: tuple[np.ndarray, np.ndarray], seed: int) -> None:
    table, _ = dfa
    weight = np.random.default_rng(seed).integers(0, 2**63, size=table.shape[1], dtype=np.uint64)
    bounds, sources, weights = entering_weights(table, weight)
    expected: dict[tuple[int, int], int] = {}
    for source, row in enumerate(table.tolist()):
        for symbol, target in enumerate(row):
            if target >= 0:
                expected[target, source] = (expected.get((target, source), 0) + int(weight[symbol])) % 2**64
    listed = {(target, int(sources[entry])): int(weights[entry])
              for target in range(len(table)) for entry in range(int(bounds[target]), int(bounds[target + 1]))}
    assert listed == expected
    assert len(sources) == len(expected)
