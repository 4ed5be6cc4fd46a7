"""Directed graphs as adjacency lists: validation, reachability, topological order and reversal.

A graph on vertices 0..n-1 is a list whose entry v lists the successors of v, or an n x n numpy
matrix of edge counts. A successor listed twice is two parallel edges (walks are sequences of
edges), as in the paper's multigraphs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

from stdsl.errors import StdslError

Adjacency = Sequence[Sequence[int]] | np.ndarray


class GraphError(StdslError, ValueError):
    """A graph, vertex or budget given to a theory function is malformed; the message says which."""


def _matrix_to_lists(matrix: np.ndarray) -> list[list[int]]:
    """An n x n matrix of edge multiplicities as successor lists."""
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise GraphError(f"an adjacency matrix must be square, got shape {matrix.shape}")
    if not np.issubdtype(matrix.dtype, np.integer) and matrix.dtype != np.bool_:
        raise GraphError(f"an adjacency matrix must hold integers, got {matrix.dtype}")
    if (matrix < 0).any():
        u, v = (int(i) for i in np.argwhere(matrix < 0)[0])
        raise GraphError(f"adjacency matrix entry [{u}, {v}] = {matrix[u, v]} is negative")
    return [[v for v in range(len(matrix)) for _ in range(int(matrix[u, v]))] for u in range(len(matrix))]


def validate_adjacency(adjacency: Adjacency) -> list[list[int]]:
    """Return `adjacency` (successor lists, or a square matrix of edge counts) as int lists; GraphError names a bad
    entry."""
    if isinstance(adjacency, np.ndarray):
        return _matrix_to_lists(adjacency)
    if isinstance(adjacency, (str, bytes)) or not isinstance(adjacency, Sequence):
        raise GraphError(f"adjacency must be a list of successor lists, got {type(adjacency).__name__}")
    n = len(adjacency)
    graph: list[list[int]] = []
    for u, successors in enumerate(adjacency):
        if isinstance(successors, (str, bytes)) or not isinstance(successors, Iterable):
            raise GraphError(f"adjacency[{u}] must be a list of successors, got {type(successors).__name__}")
        row: list[int] = []
        for position, v in enumerate(successors):
            if isinstance(v, bool) or not hasattr(v, "__index__"):
                raise GraphError(f"adjacency[{u}][{position}] = {v!r} is not a vertex index")
            v = int(v)
            if not 0 <= v < n:
                raise GraphError(f"adjacency[{u}][{position}] = {v} is outside the vertices 0..{n - 1}")
            row.append(v)
        graph.append(row)
    return graph


def validate_vertex(name: str, vertex: int, n: int) -> int:
    """Return `vertex` as an int if it is one of 0..n-1, else raise GraphError naming it."""
    if isinstance(vertex, bool) or not hasattr(vertex, "__index__"):
        raise GraphError(f"{name} = {vertex!r} is not a vertex index")
    vertex = int(vertex)
    if not 0 <= vertex < n:
        raise GraphError(f"{name} = {vertex} is outside the vertices 0..{n - 1}")
    return vertex


def validate_bound(name: str, value: int, minimum: int) -> int:
    """Return `value` as an int if it is at least `minimum`, else raise GraphError naming it."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise GraphError(f"{name} = {value!r} is not an integer")
    value = int(value)
    if value < minimum:
        raise GraphError(f"{name} = {value} must be at least {minimum}")
    return value


def reverse(graph: list[list[int]]) -> list[list[int]]:
    """The graph with every edge turned around (parallel edges kept)."""
    reversed_graph: list[list[int]] = [[] for _ in graph]
    for u, successors in enumerate(graph):
        for v in successors:
            reversed_graph[v].append(u)
    return reversed_graph


def reachable(graph: list[list[int]], sources: Iterable[int], blocked: Iterable[int] = ()) -> set[int]:
    """Vertices reachable from `sources` by walks that never leave a `blocked` vertex (sources excepted)."""
    seen = set(sources)
    stop = set(blocked) - seen
    queue = deque(seen)
    while queue:
        u = queue.popleft()
        if u in stop:
            continue
        for v in graph[u]:
            if v not in seen:
                seen.add(v)
                queue.append(v)
    return seen


def topological_order(graph: list[list[int]]) -> list[int] | None:
    """A topological order of the vertices (Kahn), or None if the graph has a directed cycle."""
    indegree = [0] * len(graph)
    for successors in graph:
        for v in successors:
            indegree[v] += 1
    queue = deque(v for v, d in enumerate(indegree) if d == 0)
    order: list[int] = []
    while queue:
        u = queue.popleft()
        order.append(u)
        for v in graph[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                queue.append(v)
    return order if len(order) == len(graph) else None


def induced(graph: list[list[int]], vertices: Iterable[int]) -> tuple[list[list[int]], list[int]]:
    """The subgraph induced on `vertices`, renumbered 0..m-1, and the old index of each new vertex."""
    old = sorted(set(vertices))
    new = {v: i for i, v in enumerate(old)}
    sub = [[new[w] for w in graph[v] if w in new] for v in old]
    return sub, old
