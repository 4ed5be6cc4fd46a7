"""A finite set of byte strings (an enum, a list of keywords) as its minimal DFA, built directly with numpy.

A DFA for finitely many strings needs no subset construction: the trie of the strings is one,
built a byte position at a time (each new trie node is a distinct (parent, byte) pair), and
merging trie nodes bottom-up by height, each with the same finality and the same transitions
to already merged nodes, gives the minimal DFA (Revuz's algorithm for acyclic automata).
Each step is one numpy pass over all strings or all nodes of a height.
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.minimize import renumber_bfs
from stdsl.compiler.deadline import check_deadline


def literal_strings(node: ir.Node) -> list[bytes] | None:
    """The strings of `node` when it is a literal or an alternation of literals (single bytes only), else None."""
    items = node.items if isinstance(node, ir.Alt) else (node,)
    if not items:
        return None
    out = []
    for item in items:
        data = ir.literal_bytes(item)
        if data is None:
            return None
        out.append(data)
    return out


def _trie(strings: list[bytes]) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray, int]:
    """The trie: its edges (parent, byte, child) per byte position, the end node of each string, and its size."""
    lengths = np.fromiter((len(s) for s in strings), dtype=np.int64, count=len(strings))
    longest = int(lengths.max())
    padded = np.zeros((len(strings), max(longest, 1)), dtype=np.int64)
    flat = np.frombuffer(b"".join(strings), dtype=np.uint8)
    rows = np.repeat(np.arange(len(strings)), lengths)
    padded[rows, np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = flat
    node = np.zeros(len(strings), dtype=np.int64)
    size = 1
    levels = []
    for position in range(longest):
        check_deadline("building a string trie")
        active = np.flatnonzero(lengths > position)
        unique_keys, inverse = np.unique(node[active] * 256 + padded[active, position], return_inverse=True)
        levels.append((unique_keys // 256, unique_keys % 256, size + np.arange(len(unique_keys))))
        node[active] = size + inverse.reshape(-1)
        size += len(unique_keys)
    return levels, node, size


def strings_dfa(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The minimal DFA of a non-empty finite set of byte strings: class table (-1 dead), accepting, byte_class.

    Each byte used is its own class, numbered in byte order, and one more class holds the unused
    bytes; states are numbered breadth-first from the start in byte order, like `minimize`'s output.
    """
    levels, ends, size = _trie(strings)
    height = np.zeros(size, dtype=np.int64)
    for parent, _, child in reversed(levels):
        np.maximum.at(height, parent, height[child] + 1)
    empty = np.zeros(0, dtype=np.int64)
    parent, symbol, child = (np.concatenate([level[i] for level in levels]) if levels else empty for i in range(3))
    final = np.zeros(size, dtype=bool)
    final[ends] = True
    order = np.lexsort((symbol, parent))
    parent, symbol, child = parent[order], symbol[order], child[order]
    degree = np.bincount(parent, minlength=size)
    first_edge = np.cumsum(degree) - degree
    width = 1 + 2 * int(degree.max(initial=0))
    canonical = np.full(size, -1, dtype=np.int64)
    count = 0
    for level in range(int(height.max()) + 1):
        check_deadline("merging a string trie")
        nodes = np.flatnonzero(height == level)
        signature = np.full((len(nodes), width), -1, dtype=np.int64)
        signature[:, 0] = final[nodes]
        edge_nodes = np.repeat(np.arange(len(nodes)), degree[nodes])
        slot = np.arange(len(edge_nodes)) - np.repeat(np.cumsum(degree[nodes]) - degree[nodes], degree[nodes])
        edges = np.repeat(first_edge[nodes], degree[nodes]) + slot
        signature[edge_nodes, 1 + 2 * slot] = symbol[edges]
        signature[edge_nodes, 2 + 2 * slot] = canonical[child[edges]]
        row_type = np.dtype((np.void, width * signature.itemsize))
        _, inverse = np.unique(np.ascontiguousarray(signature).view(row_type).reshape(-1), return_inverse=True)
        canonical[nodes] = count + inverse.reshape(-1)
        count += int(inverse.max()) + 1
    used = np.unique(symbol)
    byte_class = np.full(256, len(used), dtype=np.int64)
    byte_class[used] = np.arange(len(used))
    table = np.full((count, len(used) + 1), -1, dtype=np.int64)
    table[canonical[parent], byte_class[symbol]] = canonical[child]
    accepting = np.zeros(count, dtype=bool)
    accepting[canonical[final.nonzero()[0]]] = True
    table, accepting = renumber_bfs(table, accepting, int(canonical[0]))
    return table, accepting, byte_class
