"""Walk counts and the bounded fixed point of Theorem 14(i) agree with brute-force enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.theory import (
    GraphError,
    bounded_fixed_point,
    bounded_walk_counts,
    dag_walk_counts,
    is_bounded_fixed_point,
    walk_counts,
)


@st.composite
def graphs(draw: st.DrawFn, max_n: int = 5, acyclic: bool | None = None) -> list[list[int]]:
    """Random small graphs (DAGs when `acyclic`), parallel edges allowed."""
    n = draw(st.integers(1, max_n))
    forward_only = draw(st.booleans()) if acyclic is None else acyclic
    order = draw(st.permutations(range(n)))
    position = {v: i for i, v in enumerate(order)}
    density = draw(st.sampled_from([0.2, 0.4, 0.6]))
    graph: list[list[int]] = [[] for _ in range(n)]
    for u, v in itertools.product(range(n), repeat=2):
        if forward_only and position[u] >= position[v]:
            continue
        if draw(st.floats(0, 1)) < density:
            graph[u] += [v] * draw(st.sampled_from([1, 1, 1, 2]))
    return graph


def brute_bounded(graph: list[list[int]], max_length: int) -> list[list[int]]:
    """N^{<=L} by listing every walk of length at most L."""
    n = len(graph)
    counts = [[0] * n for _ in range(n)]

    def explore(start: int, v: int, length: int) -> None:
        counts[start][v] += 1
        if length < max_length:
            for w in graph[v]:
                explore(start, w, length + 1)

    for a in range(n):
        explore(a, a, 0)
    return counts


def brute_reach(graph: list[list[int]], u: int) -> set[int]:
    seen, stack = {u}, [u]
    while stack:
        for w in graph[stack.pop()]:
            if w not in seen:
                seen.add(w)
                stack.append(w)
    return seen


def brute_on_cycle(graph: list[list[int]], w: int) -> bool:
    return any(w in brute_reach(graph, x) for x in graph[w])


def brute_strongly_few(graph: list[list[int]], k: int) -> bool:
    n = len(graph)
    if any(brute_on_cycle(graph, w) for w in range(n)):
        return False
    return all(c <= k for row in brute_bounded(graph, n) for c in row)


@settings(max_examples=200, deadline=None)
@given(graphs(max_n=4), st.integers(0, 5))
def test_bounded_counts_agree_with_enumeration(graph: list[list[int]], max_length: int) -> None:
    expected = brute_bounded(graph, max_length)
    assert bounded_walk_counts(graph, max_length).tolist() == expected
    capped = bounded_walk_counts(graph, max_length, saturate_at=3).tolist()
    assert capped == [[min(c, 3) for c in row] for row in expected]


@settings(max_examples=200, deadline=None)
@given(graphs(max_n=7, acyclic=True))
def test_dag_counts_agree_with_enumeration(graph: list[list[int]]) -> None:
    expected = brute_bounded(graph, len(graph))
    assert dag_walk_counts(graph).tolist() == expected
    assert walk_counts(graph).tolist() == expected


@settings(max_examples=200, deadline=None)
@given(graphs(max_n=5))
def test_walk_counts_are_infinite_exactly_through_a_cycle(graph: list[list[int]]) -> None:
    n = len(graph)
    counts = walk_counts(graph)
    finite = brute_bounded(graph, n - 1)
    for u, v in itertools.product(range(n), repeat=2):
        through_cycle = any(
            brute_on_cycle(graph, w) and w in brute_reach(graph, u) and v in brute_reach(graph, w) for w in range(n)
        )
        assert (counts[u, v] == math.inf) == through_cycle
        if not through_cycle:
            assert counts[u, v] == finite[u][v]


def column_solutions(graph: list[list[int]], column: int, k: int) -> list[tuple[int, ...]]:
    """Every c in {0..k}^n with c = e_column + A c (one column of C = I + AC), by exhaustive search."""
    n = len(graph)
    found = []
    for c in itertools.product(range(k + 1), repeat=n):
        if all(c[u] == (u == column) + sum(c[w] for w in graph[u]) for u in range(n)):
            found.append(c)
    return found


@settings(max_examples=200, deadline=None)
@given(graphs(max_n=4), st.integers(1, 3))
def test_fixed_point_exists_iff_strongly_few_and_is_the_path_count_matrix(graph: list[list[int]], k: int) -> None:
    n = len(graph)
    columns = [column_solutions(graph, j, k) for j in range(n)]
    exists = all(columns)
    assert exists == brute_strongly_few(graph, k)
    solution = bounded_fixed_point(graph, k)
    assert (solution is not None) == exists
    if exists:
        assert all(len(found) == 1 for found in columns), "the solution is unique"
        expected = np.array([found[0] for found in columns]).T
        assert solution.tolist() == expected.tolist()
        assert solution.tolist() == brute_bounded(graph, n).copy()
        assert is_bounded_fixed_point(graph, solution, k)


def test_is_bounded_fixed_point_rejects_wrong_candidates() -> None:
    diamond = [[1, 2], [3], [3], []]
    good = dag_walk_counts(diamond)
    assert is_bounded_fixed_point(diamond, good, 2)
    assert not is_bounded_fixed_point(diamond, good, 1)
    bad = good.copy()
    bad[0, 3] = 1
    assert not is_bounded_fixed_point(diamond, bad, 2)
    assert not is_bounded_fixed_point(diamond, np.zeros((3, 3), dtype=int), 2)


def test_cycles_have_no_bounded_fixed_point() -> None:
    assert bounded_fixed_point([[1], [0]], 4) is None
    assert bounded_fixed_point([[0]], 1) is None
    with pytest.raises(GraphError, match="directed cycle"):
        dag_walk_counts([[1], [0]])


def test_counts_are_exact_beyond_machine_integers() -> None:
    diamonds = 70
    graph: list[list[int]] = []
    for i in range(diamonds):
        graph += [[3 * i + 1, 3 * i + 2], [3 * i + 3], [3 * i + 3]]
    graph.append([])
    assert dag_walk_counts(graph)[0, -1] == 2**diamonds
