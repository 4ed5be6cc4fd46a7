"""A DFA table's states as a graph: distinct successor and predecessor lists (CSR arrays), breadth-first distances,
reachability, and the states no run visits twice.  Trim, minimization, the pushdown's completion graph and the
certified cuts all walk these lists; the subset construction and minimization tell states apart by the fixed
64-bit hashes made here."""

from __future__ import annotations

from collections import deque

import numpy as np

from stdsl.compiler.automata.table_blocks import block_rows
from stdsl.compiler.deadline import check_deadline


def distinct_values(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array, as `np.unique(values)` (flattened): np.unique imports
    `numpy.ma` on its first plain call, 15-20 ms a fresh process's first compile would pay."""
    ordered = np.sort(np.asarray(values).reshape(-1))
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64 of each uint64 value (wrapping): well-spread fixed 64-bit hashes made with numpy's own loops, not
    `numpy.random`, whose import (13-17 ms) a fresh process's first minimization of an acyclic DFA paid."""
    with np.errstate(over="ignore"):
        z = values + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def odd_multipliers(stream: int, count: int) -> np.ndarray:
    """`count` fixed odd 64-bit multipliers of the given stream (odd: a product by one is invertible modulo 2**64),
    the same in every process, so that a compile does the same work every time."""
    return splitmix64(np.arange(count, dtype=np.uint64) + np.uint64(stream << 32)) | np.uint64(1)


def successor_lists(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct successors of each state as CSR arrays `(indptr, indices)` (dead -1 left out), sorted a block of
    rows at a time (`block_rows`) with a deadline check between."""
    step = block_rows(table.shape[1])
    counts, successors = [], []
    for lo in range(0, len(table), step):
        if lo:
            check_deadline("listing successors")
        ordered = np.sort(table[lo:lo + step], axis=1)
        keep = ordered >= 0
        keep[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
        counts.append(keep.sum(axis=1))
        successors.append(ordered[keep].astype(np.int64))
    indptr = np.zeros(len(table) + 1, dtype=np.int64)
    if counts:
        np.cumsum(np.concatenate(counts), out=indptr[1:])
    return indptr, np.concatenate(successors) if successors else np.zeros(0, dtype=np.int64)


def predecessor_lists(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct predecessors of each state as CSR arrays `(indptr, indices)`."""
    return reversed_lists(*successor_lists(table))


def reversed_lists(indptr: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR lists `(indptr, targets)` of each state's successors turned into each state's predecessors."""
    states = len(indptr) - 1
    sources = np.repeat(np.arange(states, dtype=np.int64), np.diff(indptr))
    check_deadline("listing successors")
    order = np.argsort(targets, kind="stable")
    check_deadline("listing successors")
    counts = np.bincount(targets, minlength=states)
    reverse_indptr = np.zeros(states + 1, dtype=np.int64)
    np.cumsum(counts, out=reverse_indptr[1:])
    return reverse_indptr, sources[order]


def csr_gather(indptr: np.ndarray, indices: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The CSR entries of every key in `keys`, concatenated in the order of the keys."""
    starts = indptr[keys]
    lengths = indptr[keys + 1] - starts
    total = int(lengths.sum())
    return indices[np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)]


def bfs_distances(indptr: np.ndarray, indices: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Fewest edges from any of `sources` to each state along the CSR graph (-1: unreachable).

    Dense graphs are searched level by level with numpy, sparse ones (long chains) with a queue.
    """
    if len(indices) > 8 * (len(indptr) - 1):
        return _bfs_levels(indptr, indices, sources)
    starts, targets = indptr.tolist(), indices.tolist()
    distance = [-1] * (len(starts) - 1)
    queue: deque[int] = deque()
    for source in np.asarray(sources, dtype=np.int64).tolist():
        if distance[source] < 0:
            distance[source] = 0
            queue.append(source)
    visited = 0
    while queue:
        node = queue.popleft()
        visited += 1
        if visited & 4095 == 0:
            check_deadline("searching the automaton")
        next_distance = distance[node] + 1
        for target in targets[starts[node]:starts[node + 1]]:
            if distance[target] < 0:
                distance[target] = next_distance
                queue.append(target)
    return np.array(distance, dtype=np.int64)


def single_visit(table: np.ndarray, cuts: list[int]) -> list[int]:
    """The `cuts` of the successor table `table` that no run from state 0 visits twice (none reaches itself again),
    in the order of their distance from state 0 (the order every run meets them)."""
    indptr, indices = successor_lists(table)
    distance = bfs_distances(indptr, indices, np.array([0]))
    single = []
    for cut in cuts:
        successors = indices[indptr[cut] : indptr[cut + 1]]
        if len(successors) and bfs_distances(indptr, indices, successors)[cut] >= 0:
            continue
        single.append(cut)
    return sorted(single, key=lambda c: int(distance[c]))


def _bfs_levels(indptr: np.ndarray, indices: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """`bfs_distances` one whole level per numpy step."""
    distance = np.full(len(indptr) - 1, -1, dtype=np.int64)
    frontier = distinct_values(np.asarray(sources, dtype=np.int64))
    distance[frontier] = 0
    level = 0
    while frontier.size:
        reached = csr_gather(indptr, indices, frontier)
        frontier = distinct_values(reached[distance[reached] < 0])
        level += 1
        distance[frontier] = level
    return distance


def reachable(indptr: np.ndarray, indices: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Boolean mask of the states reachable from `sources` along the CSR graph."""
    return bfs_distances(indptr, indices, sources) >= 0
