"""A DFA table's graph helpers against brute force: successor and predecessor lists, gathers, breadth-first
distances (queue and level by level), reachability and the states no run visits twice."""

from __future__ import annotations

import subprocess
import sys
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata import state_graph
from stdsl.compiler.automata.state_graph import (
    bfs_distances,
    csr_gather,
    distinct_values,
    odd_multipliers,
    predecessor_lists,
    reachable,
    reversed_lists,
    single_visit,
    successor_lists,
)
from tests.compiler.automata.minimization.test_minimize import random_tables


def _moves(table: np.ndarray) -> dict[int, set[int]]:
    """Each state's set of successors, read cell by cell."""
    return {state: {int(t) for t in row if t >= 0} for state, row in enumerate(table)}


def _distances(moves: dict[int, set[int]], sources: list[int]) -> list[int]:
    """Fewest moves from any source, by relaxing every edge until nothing changes."""
    distance = [-1] * len(moves)
    for source in sources:
        distance[source] = 0
    changed = True
    while changed:
        changed = False
        for state, targets in moves.items():
            if distance[state] < 0:
                continue
            for target in targets:
                if distance[target] < 0 or distance[target] > distance[state] + 1:
                    distance[target] = distance[state] + 1
                    changed = True
    return distance


def _lists(indptr: np.ndarray, indices: np.ndarray) -> list[list[int]]:
    return [indices[indptr[s]:indptr[s + 1]].tolist() for s in range(len(indptr) - 1)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-5, 2**40), max_size=60), st.integers(1, 3))
def test_distinct_values_equals_numpy_unique(values: list[int], rows: int) -> None:
    array = np.array(values * rows, dtype=np.int64).reshape(rows, -1) if values else np.zeros(0, dtype=np.int64)
    found = distinct_values(array)
    assert found.dtype == array.dtype
    assert found.tolist() == np.unique(array).tolist()


@settings(max_examples=300, deadline=None)
@given(random_tables())
def test_successor_and_predecessor_lists_are_each_states_distinct_moves(dfa: tuple[np.ndarray, np.ndarray]) -> None:
    table, _ = dfa
    moves = _moves(table)
    assert _lists(*successor_lists(table)) == [sorted(moves[s]) for s in range(len(table))]
    into = [sorted(s for s in moves if t in moves[s]) for t in range(len(table))]
    assert _lists(*predecessor_lists(table)) == into
    assert _lists(*reversed_lists(*successor_lists(table))) == into


@settings(max_examples=300, deadline=None)
@given(random_tables(), st.lists(st.integers(0, 9), max_size=6))
def test_csr_gather_concatenates_the_keys_lists_in_order(dfa: tuple[np.ndarray, np.ndarray], keys: list[int]) -> None:
    table, _ = dfa
    indptr, indices = successor_lists(table)
    chosen = [k % len(table) for k in keys]
    expected = [t for k in chosen for t in _lists(indptr, indices)[k]]
    assert csr_gather(indptr, indices, np.array(chosen, dtype=np.int64)).tolist() == expected


@settings(max_examples=300, deadline=None)
@given(random_tables(), st.sets(st.integers(0, 9), min_size=1, max_size=3), st.booleans())
def test_bfs_distances_by_queue_and_by_level_are_the_fewest_moves(dfa: tuple[np.ndarray, np.ndarray],
                                                                    sources: set[int], levels: bool) -> None:
    table, _ = dfa
    starts = sorted({s % len(table) for s in sources})
    expected = _distances(_moves(table), starts)
    indptr, indices = successor_lists(table)
    if levels:
        found = state_graph._bfs_levels(indptr, indices, np.array(starts))
    else:
        with mock.patch.object(state_graph, "_bfs_levels", side_effect=AssertionError("levels")):
            found = bfs_distances(indptr, indices, np.array(starts)) if len(indices) <= 8 * len(table) else None
    if found is not None:
        assert found.tolist() == expected
    assert reachable(indptr, indices, np.array(starts)).tolist() == [d >= 0 for d in expected]


@settings(max_examples=300, deadline=None)
@given(random_tables(), st.lists(st.integers(0, 9), max_size=5))
def test_single_visit_keeps_the_cuts_no_run_reaches_twice(dfa: tuple[np.ndarray, np.ndarray],
                                                          cuts: list[int]) -> None:
    table, _ = dfa
    moves = _moves(table)
    chosen = sorted({c % len(table) for c in cuts})
    from_start = _distances(moves, [0])
    on_a_cycle = {c for c in chosen if _distances(moves, sorted(moves[c]))[c] >= 0 if moves[c]}
    found = single_visit(table, chosen)
    assert sorted(found) == [c for c in chosen if c not in on_a_cycle]
    assert [from_start[c] for c in found] == sorted(from_start[c] for c in found)


def test_odd_multipliers_are_odd_distinct_fixed_and_differ_by_stream() -> None:
    first = odd_multipliers(0x5EED_81, 4096)
    assert first.dtype == np.uint64 and (first & np.uint64(1)).all()
    assert len(distinct_values(first)) == 4096
    assert np.array_equal(first[:100], odd_multipliers(0x5EED_81, 100))
    assert not np.isin(odd_multipliers(0x5EED_83, 4096), first).any()


MINIMIZED_WITHOUT_NUMPY_RANDOM = """
import sys
import numpy as np
from stdsl.compiler.automata.minimization import acyclic_partition, batched_refinement, minimize
reached = []
for module in (acyclic_partition, batched_refinement):
    def counted(stream, count, made=module.odd_multipliers, name=module.__name__):
        reached.append(name)
        return made(stream, count)
    module.odd_multipliers = counted
n = minimize.BATCHED_FROM
cyclic = np.stack([(np.arange(n) + 1) % n, (2 * np.arange(n)) % n], axis=1)
minimize.nerode_blocks(cyclic, np.arange(n) % 3 == 0)
chain = np.full((n, 2), -1)
chain[:-1, 0] = np.arange(1, n)
chain[:-1:2, 1] = np.arange(1, n, 2)
minimize.nerode_blocks(chain, np.arange(n) % 5 == 4)
assert sorted(set(reached)) == [acyclic_partition.__name__, batched_refinement.__name__], reached
assert "numpy.random" not in sys.modules
"""


def test_minimizing_hashes_states_without_importing_numpy_random() -> None:
    """Batched refinement and the acyclic partition hash with fixed multipliers made by numpy's own loops: importing
    `numpy.random` for them cost a fresh process's first such minimization 13-17 ms."""
    subprocess.run([sys.executable, "-c", MINIMIZED_WITHOUT_NUMPY_RANDOM], check=True)
