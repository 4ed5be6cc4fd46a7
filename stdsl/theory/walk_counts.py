"""Walk counts: bounded counts N^{<=L}(u, v), exact counts on DAGs, and the bounded fixed point of Theorem 14(i).

Counts are exact Python integers held in numpy object arrays (they grow exponentially with L);
an optional saturation value keeps them small where only "more than k" matters.
"""

from __future__ import annotations

import numpy as np

from stdsl.theory.graph import Adjacency, GraphError, topological_order, validate_adjacency, validate_bound


def adjacency_matrix(adjacency: Adjacency) -> np.ndarray:
    """The n x n matrix A with A[u, v] = number of (parallel) edges u -> v, as exact integers."""
    graph = validate_adjacency(adjacency)
    n = len(graph)
    matrix = np.zeros((n, n), dtype=object)
    matrix[:] = 0
    for u, successors in enumerate(graph):
        for v in successors:
            matrix[u, v] += 1
    return matrix


def _identity(n: int) -> np.ndarray:
    identity = np.zeros((n, n), dtype=object)
    identity[:] = 0
    for v in range(n):
        identity[v, v] = 1
    return identity


def bounded_walk_counts(adjacency: Adjacency, max_length: int, saturate_at: int | None = None) -> np.ndarray:
    """N^{<=L}(u, v): walks of length at most `max_length` from u to v, each entry capped at `saturate_at` if given.

    Capping each step is exact for the capped value because every term is nonnegative.
    """
    max_length = validate_bound("max_length", max_length, 0)
    if saturate_at is not None:
        saturate_at = validate_bound("saturate_at", saturate_at, 0)
    a = adjacency_matrix(adjacency)
    n = a.shape[0]
    power = _identity(n)
    total = _identity(n)
    for _ in range(max_length):
        power = a.dot(power)
        if saturate_at is not None:
            power = np.minimum(power, saturate_at)
        total = total + power
        if saturate_at is not None:
            total = np.minimum(total, saturate_at)
        if not power.any():
            break
    return np.minimum(total, saturate_at) if saturate_at is not None else total


def dag_walk_counts(adjacency: Adjacency) -> np.ndarray:
    """Exact N(u, v) on a DAG by dynamic programming in reverse topological order; GraphError on a cycle."""
    graph = validate_adjacency(adjacency)
    order = topological_order(graph)
    if order is None:
        raise GraphError("the graph has a directed cycle, so some walk counts are infinite")
    n = len(graph)
    counts = _identity(n)
    for u in reversed(order):
        for v in graph[u]:
            counts[u] = counts[u] + counts[v]
    return counts


def walk_counts(adjacency: Adjacency) -> np.ndarray:
    """N(u, v) for every pair, with inf where a directed cycle lies on a u-v walk (Definition 1)."""
    graph = validate_adjacency(adjacency)
    n = len(graph)
    reach = bounded_walk_counts(graph, n, saturate_at=1).astype(bool)
    step = adjacency_matrix(graph).astype(bool)
    on_cycle = np.array([bool((step[w] & reach[:, w]).any()) for w in range(n)], dtype=bool)
    infinite = (reach[:, on_cycle].astype(int) @ reach[on_cycle, :].astype(int)) > 0
    counts = bounded_walk_counts(graph, max(n - 1, 0)).copy()
    counts[infinite] = float("inf")
    return counts


def bounded_fixed_point(adjacency: Adjacency, k: int) -> np.ndarray | None:
    """Theorem 14(i): the solution C in {0..k}^{n x n} of C = I + AC, or None when none exists.

    Iterates C <- min(I + AC, k+1) from 0, which after i steps is min(N^{<=i-1}, k+1); after n*k+1
    steps (or at a fixed point) an entry k+1 certifies more than k walks (Lemma 1), else C solves it.
    """
    k = validate_bound("k", k, 1)
    a = adjacency_matrix(adjacency)
    n = a.shape[0]
    identity = _identity(n)
    current = np.zeros((n, n), dtype=object)
    current[:] = 0
    for _ in range(n * k + 1):
        following = np.minimum(identity + a.dot(current), k + 1)
        if np.array_equal(following, current):
            break
        current = following
    if (current > k).any():
        return None
    return current.astype(np.int64)


def is_bounded_fixed_point(adjacency: Adjacency, candidate: np.ndarray, k: int) -> bool:
    """Whether `candidate` has entries in {0..k} and satisfies C = I + AC exactly."""
    a = adjacency_matrix(adjacency)
    n = a.shape[0]
    c = np.asarray(candidate, dtype=object)
    if c.shape != (n, n) or (c < 0).any() or (c > k).any():
        return False
    return bool(np.array_equal(c, _identity(n) + a.dot(c)))
