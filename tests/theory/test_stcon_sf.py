"""The capped stack traversal decides STCON_sf, RootBudget and PairBudget exactly as brute-force walk enumeration
does."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.theory import (
    Decision,
    GraphError,
    decide_pair_budget,
    decide_root_budget,
    decide_stcon_sf,
    pair_budget,
    root_budget,
    stcon_sf,
)


class _Cycle(Exception):
    """A walk of length n exists, so a directed cycle lies on it and some count is infinite."""


def brute_counts(graph: list[list[int]]) -> list[list[int]] | None:
    """All walk counts by explicit enumeration, or None once a walk of length n (a cycle) is found."""
    n = len(graph)
    counts = [[0] * n for _ in range(n)]

    def explore(start: int, v: int, length: int) -> None:
        if length == n:
            raise _Cycle
        counts[start][v] += 1
        for w in graph[v]:
            explore(start, w, length + 1)

    try:
        for a in range(n):
            explore(a, a, 0)
    except _Cycle:
        return None
    return counts


def brute_root_counts(graph: list[list[int]], root: int, cap: int) -> list[int] | None:
    """Walk counts from `root`, or None if more than `cap` walks start there (counting would not end)."""
    counts = [0] * len(graph)
    total = 0
    stack = [root]
    while stack:
        v = stack.pop()
        counts[v] += 1
        total += 1
        if total > cap:
            return None
        stack.extend(graph[v])
    return counts


@st.composite
def graphs(draw: st.DrawFn, max_n: int = 6) -> list[list[int]]:
    """Random small graphs: half DAGs (edges forward in a random order), half arbitrary; parallel edges allowed."""
    n = draw(st.integers(1, max_n))
    acyclic = draw(st.booleans())
    order = draw(st.permutations(range(n)))
    position = {v: i for i, v in enumerate(order)}
    density = draw(st.sampled_from([0.15, 0.3, 0.5]))
    graph: list[list[int]] = [[] for _ in range(n)]
    for u in range(n):
        for v in range(n):
            if acyclic and position[u] >= position[v]:
                continue
            if draw(st.floats(0, 1)) < density:
                graph[u].append(v)
                if draw(st.floats(0, 1)) < 0.1:
                    graph[u].append(v)
    return graph


def check_budget(decision: Decision, n: int) -> None:
    """A traversal enters at most node_cap + 1 nodes (the +1 is the overflow witness), at most node_cap on
    acceptance."""
    assert decision.max_entered <= decision.node_cap + 1
    if decision.accepted:
        assert decision.max_entered <= decision.node_cap
    assert decision.total_entered <= decision.traversals * (decision.node_cap + 1)


@settings(max_examples=400, deadline=None)
@given(graphs(), st.integers(1, 4), st.data())
def test_decider_agrees_with_brute_force(graph: list[list[int]], k: int, data: st.DataObject) -> None:
    n = len(graph)
    s = data.draw(st.integers(0, n - 1))
    t = data.draw(st.integers(0, n - 1))
    counts = brute_counts(graph)
    expected = counts is not None and all(c <= k for row in counts for c in row) and counts[s][t] >= 1
    decision = decide_stcon_sf(graph, s, t, k)
    assert decision.accepted == expected, decision.reason
    assert decision.node_cap == n * k
    assert decision.traversals <= n + n * n
    if counts is None:
        # Lemma 10(iii): a source on a cycle overflows in the global pass, before any recount starts.
        assert decision.traversals <= n and "walk tree" in decision.reason
    check_budget(decision, n)


@settings(max_examples=150, deadline=None)
@given(graphs(max_n=4), st.integers(1, 3), st.data())
def test_pair_budget_agrees_with_brute_force(graph: list[list[int]], k: int, data: st.DataObject) -> None:
    n = len(graph)
    budgets = [[data.draw(st.integers(0, k)) for _ in range(n)] for _ in range(n)]
    s = data.draw(st.integers(0, n - 1))
    t = data.draw(st.integers(0, n - 1))
    counts = brute_counts(graph)
    expected = (
        counts is not None
        and all(counts[a][v] <= budgets[a][v] for a in range(n) for v in range(n))
        and counts[s][t] >= 1
    )
    decision = decide_pair_budget(graph, budgets, s, t)
    assert decision.accepted == expected, decision.reason
    assert decision.node_cap == 1 + sum(map(sum, budgets))
    check_budget(decision, n)
    uniform = [[k] * n for _ in range(n)]
    assert pair_budget(graph, uniform, s, t) == stcon_sf(graph, s, t, k)


@settings(max_examples=300, deadline=None)
@given(graphs(), st.data())
def test_root_budget_agrees_with_brute_force(graph: list[list[int]], data: st.DataObject) -> None:
    n = len(graph)
    budgets = [data.draw(st.integers(0, 4)) for _ in range(n)]
    root = data.draw(st.integers(0, n - 1))
    finals = data.draw(st.sets(st.integers(0, n - 1), max_size=n))
    counts = brute_root_counts(graph, root, sum(budgets))
    expected = (
        counts is not None and all(counts[q] <= budgets[q] for q in range(n)) and any(counts[f] >= 1 for f in finals)
    )
    decision = decide_root_budget(graph, root, budgets, finals)
    assert decision.accepted == expected, decision.reason
    assert decision.node_cap == sum(budgets)
    check_budget(decision, n)


@settings(max_examples=100, deadline=None)
@given(graphs(), st.integers(1, 4))
def test_an_adjacency_matrix_is_the_same_graph(graph: list[list[int]], k: int) -> None:
    n = len(graph)
    matrix = np.zeros((n, n), dtype=np.int64)
    for u, successors in enumerate(graph):
        for v in successors:
            matrix[u, v] += 1
    assert decide_stcon_sf(matrix, 0, n - 1, k) == decide_stcon_sf(graph, 0, n - 1, k)


def test_a_cycle_unreachable_from_s_still_rejects() -> None:
    # 0 -> 1 is a fine single path, but 2 <-> 3 makes N(2, 2) infinite: not k-strongly few for any k.
    graph = [[1], [], [3], [2]]
    assert not stcon_sf(graph, 0, 1, 4)
    assert stcon_sf([[1], [], [3], []], 0, 1, 1)


def test_small_cases() -> None:
    diamond = [[1, 2], [3], [3], []]
    assert not stcon_sf(diamond, 0, 3, 1)
    assert stcon_sf(diamond, 0, 3, 2)
    assert not stcon_sf(diamond, 3, 0, 2)
    assert stcon_sf([[]], 0, 0, 1)
    assert not stcon_sf([[0]], 0, 0, 4)
    assert not stcon_sf([[1, 1], []], 0, 1, 1)
    assert stcon_sf([[1, 1], []], 0, 1, 2)


def test_exponentially_many_walks_are_rejected_within_the_budget() -> None:
    # A chain of 40 diamonds has 2^40 walks end to end; the traversal must stop after n*k + 1 nodes.
    diamonds = 40
    graph: list[list[int]] = []
    for i in range(diamonds):
        base = 3 * i
        graph += [[base + 1, base + 2], [base + 3], [base + 3]]
    graph.append([])
    n, k = len(graph), 4
    started = time.perf_counter()
    decision = decide_stcon_sf(graph, 0, n - 1, k)
    assert not decision.accepted
    assert decision.traversals == 1
    assert decision.max_entered == n * k + 1
    assert time.perf_counter() - started < 1.0


def test_a_long_cycle_is_rejected_within_the_budget() -> None:
    n, k = 200, 3
    graph = [[(v + 1) % n] for v in range(n)]
    decision = decide_stcon_sf(graph, 0, 5, k)
    assert not decision.accepted
    assert decision.max_entered == n * k + 1


def test_a_long_mangrove_is_accepted() -> None:
    n = 120
    graph = [[v + 1] for v in range(n - 1)] + [[]]
    decision = decide_stcon_sf(graph, 0, n - 1, 1)
    assert decision.accepted
    assert decision.max_entered == n


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stcon_sf([[1], [2]], 0, 1, 1), "adjacency[1][0] = 2 is outside the vertices 0..1"),
        (lambda: stcon_sf([[1], []], 0, 5, 1), "t = 5 is outside the vertices 0..1"),
        (lambda: stcon_sf([[1], []], 0, 1, 0), "k = 0 must be at least 1"),
        (lambda: stcon_sf([["x"], []], 0, 1, 1), "adjacency[0][0] = 'x' is not a vertex index"),
        (lambda: stcon_sf("ab", 0, 1, 1), "adjacency must be a list"),
        (lambda: root_budget([[1], []], 0, [1], [1]), "budgets has 1 entries for 2 vertices"),
        (lambda: root_budget([[1], []], 0, [1, -1], [1]), "budgets[1] = -1 must be at least 0"),
        (lambda: pair_budget([[1], []], [[1, 1]], 0, 1), "budgets must be an 2x2 matrix"),
        (lambda: stcon_sf(np.zeros((2, 3), dtype=int), 0, 1, 1), "an adjacency matrix must be square"),
        (lambda: stcon_sf(np.array([[0, -1], [0, 0]]), 0, 1, 1), "adjacency matrix entry [0, 1] = -1 is negative"),
    ],
)
def test_bad_input_is_named(call, message: str) -> None:
    with pytest.raises(GraphError, match=re.escape(message)):
        call()
