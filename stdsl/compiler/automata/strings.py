"""A finite set of byte strings (an enum, a list of keywords) as its minimal DFA, built directly with numpy.

A DFA for finitely many strings needs no subset construction: the trie of the strings is one,
built a byte position at a time (each new trie node is a distinct (parent, byte) pair), and
merging trie nodes bottom-up by height, each with the same finality and the same transitions
to already merged nodes, gives the minimal DFA (Revuz's algorithm for acyclic automata).
Each step is one numpy pass over the strings still active at a position or the nodes of a height.
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.state_graph import distinct_values
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


def _trie(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """The trie in breadth-first numbering: each edge's parent and byte, each string's end node, edges per depth.

    Edge `e` creates node `e + 1` (node 0 is the root); edges come sorted by (parent, byte).  Memory is
    linear in the total length: the strings are read in place, longest first, so that the ones
    still active at a position are a prefix of that order.
    """
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    offsets = np.cumsum(lengths) - lengths
    by_length = np.argsort(-lengths, kind="stable")
    lengths, offsets = lengths[by_length], offsets[by_length]
    flat = np.frombuffer(b"".join(strings), dtype=np.uint8)
    node = np.zeros(len(strings), dtype=np.int64)
    parents, symbols, edges_per_depth = [], [], []
    size = 1
    for position in range(int(lengths[0])):
        check_deadline("building a string trie")
        active = int(np.searchsorted(-lengths, -position, side="left"))
        unique_keys, inverse = np.unique(node[:active] * 256 + flat[offsets[:active] + position], return_inverse=True)
        parents.append(unique_keys >> 8)
        symbols.append(unique_keys & 255)
        edges_per_depth.append(len(unique_keys))
        node[:active] = size + inverse.reshape(-1)
        size += len(unique_keys)
    ends = np.empty(len(strings), dtype=np.int64)
    ends[by_length] = node
    empty = np.zeros(0, dtype=np.int64)
    return (np.concatenate(parents) if parents else empty), (np.concatenate(symbols) if symbols else empty), \
        ends, edges_per_depth


def _pair_ranks(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Dense ranks of the pairs `(first[i], second[i])` of non-negative integers: equal pairs get equal ranks,
    numbered from 0 in pair order.  Pairs are packed into one integer to sort when that cannot overflow."""
    span = int(second.max()) + 1
    if (int(first.max()) + 1) * span < 2**62:
        keys = first * span + second
        order = np.argsort(keys)
        keys = keys[order]
        new = np.empty(len(order), dtype=bool)
        new[:1] = True
        new[1:] = keys[1:] != keys[:-1]
    else:
        order = np.lexsort((second, first))
        first, second = first[order], second[order]
        new = np.empty(len(order), dtype=bool)
        new[:1] = True
        new[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.cumsum(new) - 1
    return ranks


def _merged_states(parent: np.ndarray, symbol: np.ndarray, final: np.ndarray, edges_per_depth: list[int]) -> np.ndarray:
    """The state of each trie node in the minimal DFA: nodes merged bottom-up by height (Revuz).

    Two nodes of one height are merged when they agree on finality, degree and, edge by edge in byte
    order, on (byte, merged child); the signature is ranked one edge at a time so it is never a wide row.
    """
    size = len(final)
    child = np.arange(1, size)
    height = np.zeros(size, dtype=np.int64)
    depth_starts = np.cumsum([0] + edges_per_depth).tolist()
    for first, last in reversed(list(zip(depth_starts[:-1], depth_starts[1:]))):
        np.maximum.at(height, parent[first:last], height[child[first:last]] + 1)
    degree = np.bincount(parent, minlength=size)
    first_edge = np.cumsum(degree) - degree
    state = np.full(size, -1, dtype=np.int64)
    by_height = np.argsort(height, kind="stable")
    bounds = np.searchsorted(height[by_height], np.arange(int(height.max()) + 2))
    count = 0
    for level in range(len(bounds) - 1):
        check_deadline("merging a string trie")
        nodes = by_height[bounds[level]:bounds[level + 1]]
        node_degree = degree[nodes]
        signature = 2 * node_degree + final[nodes]
        for slot in range(int(node_degree.max())):
            with_slot = np.flatnonzero(node_degree > slot)
            edge = first_edge[nodes[with_slot]] + slot
            step = _pair_ranks(signature[with_slot], symbol[edge] * (count + 1) + state[child[edge]])
            signature[with_slot] = int(signature.max()) + 1 + step
        _, ranks = np.unique(signature, return_inverse=True)
        state[nodes] = count + ranks.reshape(-1)
        count += int(ranks.max()) + 1
    return state


SMALL_STRINGS_BYTES = 4_096
"""Up to this many bytes in all, `strings_dfa` merges the trie in plain Python: a handful of enum values costs
tens of microseconds there against about half a millisecond of numpy passes."""


def strings_dfa(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The minimal DFA of a non-empty finite set of byte strings: class table (-1 dead), accepting, byte_class.

    Each byte used is its own class, numbered in byte order, and one more class holds the unused
    bytes; states are numbered breadth-first from the start in byte order, like `minimize`'s output.
    A state's breadth-first place is that of its first trie node in the trie's own breadth-first numbering.
    """
    if sum(map(len, strings)) <= SMALL_STRINGS_BYTES:
        return _small_strings_dfa(strings)
    parent, symbol, ends, edges_per_depth = _trie(strings)
    final = np.zeros(len(parent) + 1, dtype=bool)
    final[ends] = True
    merged = _merged_states(parent, symbol, final, edges_per_depth)
    count = int(merged.max()) + 1
    first_node = np.full(count, len(merged), dtype=np.int64)
    np.minimum.at(first_node, merged, np.arange(len(merged)))
    bfs_number = np.empty(count, dtype=np.int64)
    bfs_number[np.argsort(first_node)] = np.arange(count)
    state = bfs_number[merged]
    used = distinct_values(symbol)
    byte_class = np.full(256, len(used), dtype=np.int64)
    byte_class[used] = np.arange(len(used))
    table = np.full((count, len(used) + 1), -1, dtype=np.int32)
    table[state[parent], byte_class[symbol]] = state[1:]
    accepting = np.zeros(count, dtype=bool)
    accepting[state[final]] = True
    return table, accepting, byte_class


def byte_trie(strings: list[bytes]) -> tuple[list[dict[int, int]], list[int]]:
    """The trie of a few byte strings in plain Python: each node's children by byte (node 0 is the root, the others
    numbered as inserted) and each string's end node."""
    children: list[dict[int, int]] = [{}]
    ends = []
    for string in strings:
        node = 0
        for byte in string:
            child = children[node].get(byte)
            if child is None:
                child = children[node][byte] = len(children)
                children.append({})
            node = child
        ends.append(node)
    return children, ends


def _small_strings_dfa(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`strings_dfa` for a few strings: the same trie, numbering and merge (two nodes are one state when they agree
    on finality and, byte by byte, on their children's states), with dicts instead of numpy passes."""
    children, ends = byte_trie(strings)
    final = [False] * len(children)
    for end in ends:
        final[end] = True
    order = [0]
    for node in order:
        order += [children[node][byte] for byte in sorted(children[node])]
    merged = [0] * len(children)
    signatures: dict[tuple[bool, tuple[tuple[int, int], ...]], int] = {}
    for node in reversed(order):
        signature = (final[node], tuple((byte, merged[child]) for byte, child in sorted(children[node].items())))
        merged[node] = signatures.setdefault(signature, len(signatures))
    number: dict[int, int] = {}
    for node in order:
        number.setdefault(merged[node], len(number))
    used = sorted({byte for edges in children for byte in edges})
    byte_class = np.full(256, len(used), dtype=np.int64)
    byte_class[used] = np.arange(len(used))
    table = np.full((len(number), len(used) + 1), -1, dtype=np.int32)
    accepting = np.zeros(len(number), dtype=bool)
    column = {byte: i for i, byte in enumerate(used)}
    for node in order:
        state = number[merged[node]]
        accepting[state] = final[node]
        for byte, child in children[node].items():
            table[state, column[byte]] = number[merged[child]]
    return table, accepting, byte_class
