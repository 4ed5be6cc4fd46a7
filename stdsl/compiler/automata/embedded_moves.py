"""What the NFA builder reads of an embedded automaton: its moves grouped by target (`dfa_edges`), kept on small
leaves, and the facts the code that wrote a table records on its leaf (`known_edges`, `known_minimal`) so that
nobody reads them off the table again.

A leaf's moves are listed per state as (the number of a distinct symbol-range set, target): small tables row by
row in Python, large ones by runs of equal cells with numpy (`_moves_by_runs`), between deadline checks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.table_blocks import block_rows, equal_row_keys, in_row_blocks
from stdsl.compiler.deadline import check_deadline

Ranges = tuple[tuple[int, int], ...]


def known_edges(node: ir.Embedded, edges: DfaMoves | Callable[[], DfaMoves]) -> ir.Embedded:
    """`node` with its moves (in `dfa_edges`'s form) kept on it by the code that wrote its table, so that the NFA
    builder need not read them off the table; that code chooses the byte sets (as the IR it stands for gave them).
    Given as a function, they are written when the NFA builder first reads them."""
    object.__setattr__(node, "_edges", edges)
    return node


def known_minimal(node: ir.Embedded, byte_labels: np.ndarray) -> ir.Embedded:
    """`node`, recorded by the code that wrote its table as minimal (every state reachable from its start) and as
    moving alike on bytes with equal `byte_labels`, so that a layout of its copies (`pushdown.quoted_keys`) need
    neither search it nor compare its columns."""
    object.__setattr__(node, "_minimal_labels", byte_labels)
    return node


def minimal_labels(node: ir.Embedded) -> np.ndarray | None:
    """The byte labels `known_minimal` recorded on `node`, or None."""
    return node.__dict__.get("_minimal_labels")


KEPT_EDGES_UP_TO = 1024
"""An embedded automaton of at most this many states keeps its grouped moves (`embedded_edges`) on its node: the
JSON string's units beyond ASCII are one such leaf in every open object, copied into each schema's NFA."""


DfaMoves = tuple[list[Ranges], list[list[tuple[int, int]]]]
"""An automaton's moves as `dfa_edges` gives them: the distinct symbol sets, and per state (set number, target)."""


def embedded_edges(node: ir.Embedded) -> DfaMoves:
    """`dfa_edges` of an embedded automaton, kept on the node when it is small (nodes are immutable)."""
    known = node.__dict__.get("_edges")
    if callable(known):
        known = known()
        object.__setattr__(node, "_edges", known)
    if known is not None:
        return known  # type: ignore[no-any-return]
    edges = dfa_edges(node.transitions)
    if len(edges[1]) <= KEPT_EDGES_UP_TO:
        object.__setattr__(node, "_edges", edges)
    return edges


def dfa_edges(transitions: np.ndarray) -> DfaMoves:
    """Per DFA state (rows of a (n, 256) table, -1 dead; wider in a pushdown body, whose columns past 255 are call
    symbols), its moves grouped by target, targets in the order of their first symbol: (the number of the
    move's symbol ranges among the distinct ones, numbered in the order the moves meet them, target); and those
    symbol ranges.  Small tables are read row by row in Python, larger ones by `_moves_by_runs`."""
    table = np.asarray(transitions)
    if len(table) > ROW_BY_ROW_UP_TO:
        return _moves_by_runs(table)
    width = table.shape[1]
    flat = table.reshape(-1)
    boundary = np.ones(flat.size, dtype=bool)
    boundary[1:] = flat[1:] != flat[:-1]
    boundary[::width] = True
    starts = np.flatnonzero(boundary)
    ends = np.append(starts[1:], flat.size) - 1
    live = flat[starts] >= 0
    grouped: list[dict[int, list[tuple[int, int]]]] = [{} for _ in range(table.shape[0])]
    for start, end, target in zip(starts[live].tolist(), ends[live].tolist(), flat[starts[live]].tolist()):
        grouped[start // width].setdefault(target, []).append((start % width, end % width))
    numbers: dict[Ranges, int] = {}
    moves = [[(numbers.setdefault(tuple(spans), len(numbers)), target) for target, spans in by_target.items()]
             for by_target in grouped]
    return list(numbers), moves


ROW_BY_ROW_UP_TO = 256
"""States up to which `dfa_edges` reads a table row by row in Python (0.015 ms for 9 states, where numpy's
grouping costs 0.45 ms; even at about 300 states)."""


def _moves_by_runs(table: np.ndarray) -> DfaMoves:
    """`dfa_edges` of a large table: runs of columns equal in every row are read as one column, and the runs of
    equal cells are found, grouped and their symbol sets numbered with numpy; Python only builds the lists,
    `EDGE_CHUNK` states between two deadline checks (a string-length product of 120k states took 1.4 s read row by
    row)."""
    count, width = table.shape
    column_cut = np.zeros(width, dtype=bool)
    column_cut[:1] = True
    for lo in range(0, count, block_rows(width)):
        check_deadline("listing an automaton's moves")
        block = table[lo:lo + block_rows(width)]
        column_cut[1:] |= (block[:, 1:] != block[:, :-1]).any(axis=0)
    first_column = np.flatnonzero(column_cut)
    last_column = np.append(first_column[1:], width) - 1
    segments = len(first_column)
    flat = in_row_blocks(count, segments, table.dtype, lambda lo, hi: table[lo:hi, first_column],
                         "listing an automaton's moves").reshape(-1)
    check_deadline("listing an automaton's moves")
    boundary = np.ones(flat.size, dtype=bool)
    boundary[1:] = flat[1:] != flat[:-1]
    boundary[::segments] = True
    starts = np.flatnonzero(boundary)
    ends = np.append(starts[1:], flat.size) - 1
    live = flat[starts] >= 0
    starts, ends = starts[live], ends[live]
    targets = flat[starts].astype(np.int64)
    states = starts // segments
    keys = states * (int(targets.max(initial=0)) + 1) + targets
    order = np.argsort(keys, kind="stable")
    check_deadline("listing an automaton's moves")
    run_first, run_last = starts[order] % segments, ends[order] % segments
    cut = np.ones(len(order), dtype=bool)
    cut[1:] = keys[order][1:] != keys[order][:-1]
    group_start = np.flatnonzero(cut)
    group_bounds = np.append(group_start, len(order))
    check_deadline("listing an automaton's moves")
    group_order = np.argsort(states[order][group_start] * segments + run_first[group_start], kind="stable")
    check_deadline("listing an automaton's moves")
    masks = _segment_masks(run_first, run_last, group_start, segments)[group_order]
    check_deadline("listing an automaton's moves")
    by_key = equal_row_keys(masks, "listing an automaton's moves")
    check_deadline("listing an automaton's moves")
    first_met = np.full(int(by_key.max(initial=-1)) + 1, len(by_key), dtype=np.int64)
    np.minimum.at(first_met, by_key, np.arange(len(by_key)))
    rank = np.empty(len(first_met), dtype=np.int64)
    rank[np.argsort(first_met)] = np.arange(len(first_met))
    first_group = group_order[np.sort(first_met)]
    symbol_sets = [tuple(zip(first_column[run_first[lo:hi]].tolist(), last_column[run_last[lo:hi]].tolist()))
                   for lo, hi in zip(group_bounds[first_group].tolist(), group_bounds[first_group + 1].tolist())]
    state_bounds = np.searchsorted(states[order][group_start][group_order], np.arange(count + 1)).tolist()
    group_set = rank[by_key].tolist()
    group_target = targets[order][group_start][group_order].tolist()
    moves: list[list[tuple[int, int]]] = []
    for first in range(0, count, EDGE_CHUNK):
        check_deadline("listing an automaton's moves")
        last = min(first + EDGE_CHUNK, count)
        base, stop = state_bounds[first], state_bounds[last]
        pairs = list(zip(group_set[base:stop], group_target[base:stop]))
        moves += [pairs[lo - base:hi - base]
                  for lo, hi in zip(state_bounds[first:last], state_bounds[first + 1:last + 1])]
    return symbol_sets, moves


def _segment_masks(first: np.ndarray, last: np.ndarray, group_start: np.ndarray, segments: int) -> np.ndarray:
    """Per group of runs (runs `group_start[g]` up to the next group's), the segments its runs `first[r]..last[r]`
    cover, as a bit mask in 64-bit words: equal masks, equal symbol sets."""
    words = np.zeros((len(group_start), (segments + 63) // 64), dtype=np.uint64)
    if not len(group_start):
        return words
    full = np.uint64(0xFFFFFFFFFFFFFFFF)
    for word in range(words.shape[1]):
        lo = np.maximum(first - 64 * word, 0)
        hi = np.minimum(last - 64 * word, 63)
        inside = lo <= hi
        upper = full >> (63 - np.clip(hi, 0, 63)).astype(np.uint64)
        lower = (np.uint64(1) << np.clip(lo, 0, 63).astype(np.uint64)) - np.uint64(1)
        bits = np.where(inside, upper & ~lower, np.uint64(0))
        words[:, word] = np.bitwise_or.reduceat(bits, group_start)
    return words


EDGE_CHUNK = 16384
"""States whose moves `dfa_edges` lists between two deadline checks (some tens of milliseconds)."""
