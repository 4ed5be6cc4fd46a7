"""Trim and minimize a DFA table (any alphabet: byte classes or bytes), renumbering states in BFS order.

Trim drops states not reachable from the start and states from which no accepting state
is reachable; minimization is Hopcroft partition refinement (measured faster than vectorized
Moore refinement here, which needs one full pass per round and one round per chain step).  The result
has its start at 0 and the other states numbered in breadth-first order from the start,
visiting symbols in increasing order, so equal languages give identical tables.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from stdsl import caches
from stdsl.compiler.automata.minimization.acyclic_partition import (
    blocks_by_height,
    chain_like,
    distinct_by_language,
    heights,
    level_heights,
)
from stdsl.compiler.automata.minimization.batched_refinement import batched_rounds, is_congruence
from stdsl.compiler.automata.state_graph import predecessor_lists, reachable, reversed_lists, successor_lists
from stdsl.compiler.automata.table_blocks import block_rows, concatenated, converted, in_row_blocks, target_runs
from stdsl.compiler.deadline import check_deadline
from stdsl.errors import EmptyLanguageError

BATCHED_FROM = 2048
"""States from which `nerode_blocks` refines by batched rounds first (measured below it: the one-splitter loop)."""
SPLITTER_STATES = 4096
"""States Hopcroft refinement handles between two deadline checks (a few milliseconds); a round counts 64 more."""


def trim(table: np.ndarray, accepting: np.ndarray, all_reachable: bool = False, all_live: bool = False
         ) -> tuple[np.ndarray, np.ndarray]:
    """Keep the states that are reachable from 0 and can reach acceptance; start stays 0.

    `all_reachable` says every state is known to be reachable from 0 (as in a subset construction's
    output), which skips that search; `all_live` that every state is known to reach acceptance (a chain layout's
    output), which skips the other.  A table found trim already is returned as given, not renumbered into a copy.
    Raises `EmptyLanguageError` when no accepting state is reachable.
    """
    if all_live and all_reachable:
        if not accepting.any():
            raise EmptyLanguageError("the constraint admits no string at all (empty language)")
        return table, accepting
    keep = reachable(*predecessor_lists(table), np.flatnonzero(accepting))
    if not all_reachable:
        keep &= reachable(*successor_lists(table), np.array([0]))
    if not keep[0]:
        raise EmptyLanguageError("the constraint admits no string at all (empty language)")
    check_deadline("trimming the automaton")
    if keep.all():
        return table, accepting
    kept = np.flatnonzero(keep)
    new_id = np.full(len(table) + 1, -1, dtype=np.int64)
    new_id[kept] = np.arange(len(kept))
    return renamed_rows(new_id, table, kept, "trimming the automaton"), accepting[keep]


def renamed_rows(new_id: np.ndarray, table: np.ndarray, rows: np.ndarray, stage: str) -> np.ndarray:
    """`new_id[table[rows]]` (`new_id[-1]` for a dead move), a block of rows at a time with a deadline check between
    blocks: a product of 140,000 states by 44 classes took 0.2 s at once on a loaded machine."""
    return in_row_blocks(len(rows), table.shape[1], new_id.dtype, lambda lo, hi: new_id[table[rows[lo:hi]]], stage)


def entering_symbols(table: np.ndarray) -> tuple[list[int], list[int], list[int]]:
    """The moves into each state grouped by source: for target t, entries bounds[t]..bounds[t+1]-1 give a source
    and, as a bit mask (a Python int), every symbol on which it moves to t.

    A row's moves are taken as runs: adjacent symbols (within one 64-bit word of the mask) moving to one target
    are one run and one contiguous range of bits, found a block of rows at a time (`block_rows`, with a deadline
    check between).  One sort of the runs by (target, source) groups them, and their ranges are or-ed per pair: a
    string's characters are runs of dozens of symbols (o82829's object skeleton: 23,256 runs of 188,357 moves,
    whose sort was most of the time)."""
    num_states, width = table.shape
    key_parts, first_parts, last_parts = [], [], []
    for lo in range(0, num_states, block_rows(width)):
        check_deadline("minimization")
        block = table[lo:lo + block_rows(width)]
        begins, ends = target_runs(block, 64)
        key_parts.append(block.reshape(-1)[begins].astype(np.int64) * num_states + begins // width + lo)
        first_parts.append(begins % width)
        last_parts.append(ends % width)
    empty = np.zeros(0, dtype=np.int64)
    keys = concatenated(key_parts, "minimization") if key_parts else empty
    check_deadline("minimization")
    order = np.argsort(keys)
    check_deadline("minimization")
    keys = keys[order]
    first = (concatenated(first_parts, "minimization") if first_parts else empty)[order].astype(np.uint64)
    last = (concatenated(last_parts, "minimization") if last_parts else empty)[order].astype(np.uint64)
    cut = np.ones(len(keys), dtype=bool)
    cut[1:] = keys[1:] != keys[:-1]
    starts = np.flatnonzero(cut)
    ranges = np.left_shift(np.right_shift(np.uint64(2**64 - 1), np.uint64(63) - (last - first)), first & np.uint64(63))
    masks: list[int] = []
    for word in range((width + 63) // 64):
        bits = np.where(first >> np.uint64(6) == np.uint64(word), ranges, np.uint64(0))
        words = np.bitwise_or.reduceat(bits, starts).tolist() if len(starts) else []
        masks = words if word == 0 else [mask | (high << (64 * word)) for mask, high in zip(masks, words)]
    pairs = keys[starts]
    check_deadline("minimization")
    bounds = np.searchsorted(pairs, np.arange(num_states + 1, dtype=np.int64) * num_states).tolist()
    return bounds, (pairs % num_states).tolist(), masks


def nerode_blocks(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Block number of each state of a trim DFA under Myhill–Nerode equivalence (Hopcroft refinement).

    Starts from {accepting, rejecting}; missing transitions go to an implicit dead block, the one block left out
    of the initial worklist.  A DFA of `BATCHED_FROM` states or more without a cycle is first partitioned without
    refinement where its shape allows (`acyclic_partition`); else it is refined by rounds of all waiting splitters
    in numpy (`batched_refinement`: o1052's 43,111-state product split 170 blocks a round for 250 rounds), then one
    splitter at a time (`refined_one_at_a_time`); a batched result that is not a congruence (a hash collision) is
    refined afresh one splitter at a time.  Block numbers differ between the ways; the partition is the same.
    """
    _, block = np.unique(accepting, return_inverse=True)
    block = block.reshape(-1)
    if len(table) >= BATCHED_FROM:
        acyclic = _acyclic_blocks(table, accepting)
        if acyclic is not None:
            return acyclic
        batched, waiting = batched_rounds(table, block)
        refined = refined_one_at_a_time(table, batched, waiting)
        if is_congruence(table, accepting, refined):
            return refined
    return refined_one_at_a_time(table, block, list(range(int(block.max()) + 1)))


def _acyclic_blocks(table: np.ndarray, accepting: np.ndarray) -> np.ndarray | None:
    """The Myhill-Nerode partition of a trim DFA without a cycle (`acyclic_partition`): a chain's states told apart
    by their languages, else its states in blocks a height at a time where its heights are few (kept once checked
    to be a congruence); None for a DFA with a cycle or neither shape (Hopcroft refinement then)."""
    chain = chain_like(table)
    if chain is None:
        return None
    indptr, successors = successor_lists(table)
    reverse = reversed_lists(indptr, successors)
    height = heights(indptr, *reverse) if chain else level_heights(indptr, *reverse)
    if height is None:
        return None
    if chain:
        distinct = distinct_by_language(table, accepting, height)
        if distinct is not None:
            return distinct
    block = blocks_by_height(table, accepting, height)
    return block if block is not None and is_congruence(table, accepting, block) else None


def refined_one_at_a_time(table: np.ndarray, block: np.ndarray, waiting: list[int]) -> np.ndarray:
    """Hopcroft refinement of the partition `block` (numbered 0..count-1) of a trim DFA's states, `waiting` its
    blocks still to split by, one splitter at a time, to the coarsest partition stable under every block.

    A splitter splits each block it touches by every symbol at once: the states of
    the block are grouped by the set of symbols that take them into the splitter (those outside it form one
    more group), and all groups but the largest wait (all of them if the block was waiting).  A source moving
    into the splitter on many symbols is handled once, and blocks already down to one state are skipped.
    Work is O(transitions · log states).
    """
    if not waiting:
        return block
    bounds, entry_source, entry_symbols = entering_symbols(table)
    check_deadline("minimization")
    block_of = block.tolist()
    members: list[set[int]] = [set() for _ in range(max(block_of) + 1)]
    for state, number in enumerate(block_of):
        members[number].add(state)
    in_waiting = [False] * len(members)
    for number in waiting:
        in_waiting[number] = True
    spent = 0
    while waiting:
        splitter = waiting.pop()
        spent += len(members[splitter]) + 64
        if spent > SPLITTER_STATES:
            check_deadline("minimization")
            spent = 0
        in_waiting[splitter] = False
        touched: dict[int, dict[int, list[int]]] = {}
        if len(members[splitter]) == 1:
            (target,) = members[splitter]
            moves_in: Iterable[tuple[int, int]] = zip(entry_source[bounds[target]:bounds[target + 1]],
                                                      entry_symbols[bounds[target]:bounds[target + 1]])
        else:
            symbols_of: dict[int, int] = {}
            for count, target in enumerate(members[splitter], 1):
                if count % SPLITTER_STATES == 0:
                    check_deadline("minimization")
                for entry in range(bounds[target], bounds[target + 1]):
                    source = entry_source[entry]
                    symbols_of[source] = symbols_of.get(source, 0) | entry_symbols[entry]
            moves_in = symbols_of.items()
        for count, (source, symbols) in enumerate(moves_in, 1):
            if count % SPLITTER_STATES == 0:
                check_deadline("minimization")
            old = block_of[source]
            if len(members[old]) > 1:
                if old in touched:
                    touched[old].setdefault(symbols, []).append(source)
                else:
                    touched[old] = {symbols: [source]}
        for old, groups in touched.items():
            parts = list(groups.values())
            remainder = len(members[old]) - (len(parts[0]) if len(parts) == 1 else sum(map(len, parts)))
            if remainder == 0:
                if len(parts) == 1:
                    continue
                largest = max(parts, key=len)
                parts.remove(largest)
                remainder = len(largest)
            resting = -1
            if not in_waiting[old]:
                biggest = 0 if len(parts) == 1 else max(range(len(parts)), key=lambda index: len(parts[index]))
                if len(parts[biggest]) > remainder:
                    resting = biggest
                    waiting.append(old)
                    in_waiting[old] = True
            kept = members[old]
            for index, part in enumerate(parts):
                spent += len(part)
                if spent > SPLITTER_STATES:
                    check_deadline("minimization")
                    spent = 0
                new = len(members)
                kept.difference_update(part)
                members.append(set(part))
                for state in part:
                    block_of[state] = new
                in_waiting.append(index != resting)
                if index != resting:
                    waiting.append(new)
    return np.array(block_of, dtype=np.int64)


def bfs_order(table: np.ndarray, start: int = 0) -> np.ndarray:
    """States in breadth-first order from `start`, visiting each row's symbols in increasing order.

    A row's first move to each target is found among its moves that differ from the move on the symbol before (a
    first move always does): a run of symbols into one target (a string's characters) is one move then, and the
    sort finding the first ones sorts fewer (o82829's object skeleton: 23,256 moves of 188,357)."""
    num_states, width = table.shape
    flat = table.reshape(-1)
    first_parts = []
    for lo in range(0, num_states, block_rows(width)):
        check_deadline("minimization")
        block = table[lo:lo + block_rows(width)]
        fresh = block >= 0
        fresh[:, 1:] &= block[:, 1:] != block[:, :-1]
        live = np.flatnonzero(fresh)
        _, first = np.unique((live // width) * (num_states + 1) + block.reshape(-1)[live], return_index=True)
        first_parts.append(np.sort(live[first]) + lo * width)
    first_live = np.concatenate(first_parts) if first_parts else np.zeros(0, dtype=np.int64)
    check_deadline("minimization")
    indptr = np.zeros(num_states + 1, dtype=np.int64)
    np.cumsum(np.bincount(first_live // width, minlength=num_states), out=indptr[1:])
    starts, targets = indptr.tolist(), flat[first_live].tolist()
    seen = [False] * num_states
    seen[start] = True
    order = [start]
    head = 0
    while head < len(order):
        node = order[head]
        head += 1
        if head & 16383 == 0:
            check_deadline("minimization")
        for target in targets[starts[node]:starts[node + 1]]:
            if not seen[target]:
                seen[target] = True
                order.append(target)
    return np.array(order, dtype=np.int64)


def renumber_bfs(table: np.ndarray, accepting: np.ndarray, start: int = 0,
                 dtype: type[np.integer] = np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Renumber states in `bfs_order` from `start`, which becomes 0 (unreachable states are dropped); the table
    written in `dtype`."""
    order = bfs_order(table, start)
    new_id = np.full(len(table) + 1, -1, dtype=dtype)
    new_id[order] = np.arange(len(order))
    return renamed_rows(new_id, table, order, "minimization"), accepting[order]


MEMO_CELLS = 1 << 18
"""Tables of up to this many cells are minimized once per content (`_MINIMAL`): allany12's build minimized 304 of
its 318 tables and intersected 110 of its 126 products again, a third of its compile."""
_MINIMAL = caches.kind("minimal DFAs", max_bytes=64 << 20)
"""`minimize`'s result per table (shape, dtype and bytes: a digest would import hashlib, 3 ms of a cold compile),
accepting states and flags; each value holds its key's table bytes too, so that they count against the bound."""


def minimize(table: np.ndarray, accepting: np.ndarray, all_reachable: bool = False, all_live: bool = False,
             in_bfs_order: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """`minimized`, kept per content for a table of up to `MEMO_CELLS` cells; the arrays returned are the
    caller's own."""
    table, accepting = np.asarray(table), np.asarray(accepting, dtype=bool)
    if table.size > MEMO_CELLS:
        return minimized(table, accepting, all_reachable, all_live, in_bfs_order)
    content = table.tobytes()
    key = (table.shape, table.dtype.str, content, accepting.tobytes(), all_reachable, all_live, in_bfs_order)
    small, small_accepting, _ = _MINIMAL.get((), lambda: (*(np.array(part) for part in minimized(
        table, accepting, all_reachable, all_live, in_bfs_order)), content), key)
    return small.copy(), small_accepting.copy()


def minimized(table: np.ndarray, accepting: np.ndarray, all_reachable: bool = False, all_live: bool = False,
              in_bfs_order: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The minimal trim DFA of the same language, start 0, states in BFS order.

    `table[q, a]` is the next state (-1 dead) on symbol `a`; `all_reachable` and `all_live` as for `trim`,
    `in_bfs_order` as for `trim_in_bfs_order`: a DFA so numbered that is minimal already is returned as trimmed
    (most subset constructions are), its quotient and renumbering being itself.
    Raises `EmptyLanguageError` when the language is empty.
    """
    table, accepting = trim(converted(np.asarray(table), np.int64, "minimization"), np.asarray(accepting, dtype=bool),
                            all_reachable, all_live)
    check_deadline("minimization")
    block = nerode_blocks(table, accepting)
    count = int(block.max()) + 1
    if count == len(table):
        return (table, accepting) if in_bfs_order else renumber_bfs(table, accepting)
    representative = np.empty(count, dtype=np.int64)
    representative[block[::-1]] = np.arange(len(block))[::-1]
    with_dead = np.append(block, -1)
    quotient = renamed_rows(with_dead, table, representative, "minimization")
    check_deadline("minimization")
    return renumber_bfs(quotient, accepting[representative], int(block[0]))


def trim_in_bfs_order(table: np.ndarray, accepting: np.ndarray, all_reachable: bool = False, all_live: bool = False,
                      in_bfs_order: bool = False, dtype: type[np.integer] = np.int64) -> tuple[np.ndarray, np.ndarray]:
    """`trim`, states renumbered in `bfs_order`: `minimize`'s table whenever the DFA given is already minimal (a
    minimal DFA's BFS numbering is unique), else the same language with some equivalent states kept apart.
    `in_bfs_order` says the table is numbered so already (a subset construction's): the trim keeps that order
    (a kept state's first visitor is kept too), so nothing is renumbered.  A table known reachable, live and so
    numbered is returned as given (its dtype too): copying a large one to int64 took 0.1 s on a loaded machine; one
    known reachable and live is renumbered from the table as given (only read), into a table of `dtype` (a pushdown
    body's int32: a laid-out chain's table was written in int64 only to be copied to int32)."""
    if all_reachable and all_live and in_bfs_order:
        return trim(np.asarray(table), np.asarray(accepting, dtype=bool), True, True)
    given = (np.asarray(table) if all_reachable and all_live
             else converted(np.asarray(table), np.int64, "trimming the automaton"))
    table, accepting = trim(given, np.asarray(accepting, dtype=bool), all_reachable, all_live)
    return (table, accepting) if in_bfs_order else renumber_bfs(table, accepting, dtype=dtype)


MINIMIZE_UP_TO = 8_000
"""A subset construction with more states is trimmed, not minimized: on the MaskBench sample the DFAs that large
were within 0.03% of minimal (the NFA builder shares repeated parts), and Hopcroft refinement over them took six
to seven times as long as the trim.  The language is the same either way."""


def shrink(table: np.ndarray, accepting: np.ndarray, all_reachable: bool = False, all_live: bool = False,
           in_bfs_order: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """`minimize` up to `MINIMIZE_UP_TO` states, `trim` above (start 0 either way); flags as for `trim` and
    `trim_in_bfs_order`.  A large table known reachable and live is returned as given (its dtype too: a laid-out
    chain's int32 table copied to int64 was 29 MB of fresh pages for o9870)."""
    if len(table) <= MINIMIZE_UP_TO:
        return minimize(table, accepting, all_reachable, all_live, in_bfs_order)
    if all_reachable and all_live:
        return trim(np.asarray(table), np.asarray(accepting, dtype=bool), True, True)
    return trim(np.asarray(table, dtype=np.int64), np.asarray(accepting, dtype=bool), all_reachable, all_live)
