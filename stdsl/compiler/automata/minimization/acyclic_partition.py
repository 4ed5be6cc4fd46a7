"""The Myhill-Nerode partition of a large trim acyclic DFA without Hopcroft refinement: a long bounded string's.

Two Nerode-equivalent states accept the same words, so they agree on anything their language decides: whether
they accept, the length of their longest word (the state's height in an acyclic DFA), and, round after round,
which of these values each symbol leads to (Moore's rounds, hashed).  Where these values alone give every state
one of its own, no two states are equivalent and the DFA is already minimal (`distinct_by_language`): the
refinement that would find the same thing one splitter at a time (a long bounded string's product, MaskBench
o48164: 17,886 states whose last splits are one chain step each, 0.1 s) is not run.  A hash collision can only give
two states one value, never part equivalent ones, so it can cost the shortcut but never its answer.

Where states do merge, an acyclic DFA of few heights is partitioned a height at a time, lowest first
(`blocks_by_height`, Revuz's order): every move leads to a lower height, whose blocks are final, so two states of
one height are equivalent exactly when they agree on acceptance and on the block each symbol leads to; a numpy pass
per height (o1052's and o37683's products of 43,111 and 28,225 states: 256 heights, 2-2.5x Hopcroft's time).
The rows are compared hashed, and the caller keeps the result only once `is_congruence` confirms it.
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler.automata.state_graph import csr_gather, distinct_values, odd_multipliers
from stdsl.compiler.automata.table_blocks import block_rows
from stdsl.compiler.deadline import check_deadline

MOORE_ROUNDS = 2
"""Hashed Moore rounds after the heights: a bounded string's product is told apart by its heights and one round
(its states alike in height differ in the pattern state they hold); more rounds rarely finish what these leave."""
DISTINCT_SHARE = 0.25
"""The share of states the heights must already tell apart for the rounds to be tried (a bounded string's product:
a third to two thirds): a table they leave mostly alike has equivalent states or needs many rounds."""
CHAIN_RUNS = 3.0
"""Runs of moves (adjacent symbols into one state) a row at most, on average, for a table to count as a chain: a
long bounded string's product moves on a class or two a row (2.1-2.8 runs), many heights that a Python queue finds
faster than a numpy pass per height; a product whose pattern branches more (o1052's 43,111 states: 4.8 runs) has
few heights, found a height at a time (`level_heights`)."""
STATES_PER_HEIGHT = 16
"""States a height at least, on average, for `blocks_by_height` (a few numpy calls per height): a chain of
thousands of heights of a few states each costs more so than Hopcroft's refinement."""
_STREAM = 0x5EED_82
"""Stream of the hash multipliers (`odd_multipliers`)."""


def distinct_by_language(table: np.ndarray, accepting: np.ndarray, height: np.ndarray) -> np.ndarray | None:
    """Each state's own block number (0..n-1) where the trim acyclic DFA `table`'s states are told apart one by one
    by their `height`s, acceptance and `MOORE_ROUNDS` hashed rounds, which proves it minimal; else None."""
    num_states = len(table)
    block, count = _numbered(height * 2 + accepting)
    if count < DISTINCT_SHARE * num_states:
        return None
    multipliers = odd_multipliers(_STREAM, table.shape[1] + 1)
    for _ in range(MOORE_ROUNDS):
        if count == num_states:
            return block
        block, refined = _numbered(_round_signatures(table, block, multipliers))
        if refined == count:
            return None
        count = refined
    return block if count == num_states else None


def blocks_by_height(table: np.ndarray, accepting: np.ndarray, height: np.ndarray) -> np.ndarray | None:
    """The trim acyclic DFA `table`'s states in blocks, a height at a time from the lowest (states alike in
    acceptance and in the block of each move's target, hashed), or None where its heights hold fewer than
    `STATES_PER_HEIGHT` states on average.  Equivalent states always share a block; a hash collision may join
    states that are not, which the caller's congruence check finds."""
    levels = int(height.max()) + 1
    if levels * STATES_PER_HEIGHT > len(table):
        return None
    order = np.argsort(height, kind="stable")
    bounds = np.searchsorted(height[order], np.arange(levels + 1)).tolist()
    valued = np.zeros(len(table) + 1, dtype=np.uint64)
    """Each state's block number plus one once its height is done (0 for the dead move, the last entry)."""
    multipliers = odd_multipliers(_STREAM, table.shape[1] + 1)
    count = 0
    for lo, hi in zip(bounds, bounds[1:]):
        states = order[lo:hi]
        signature = _with_moves_hashed(accepting[states].astype(np.uint64) * multipliers[0], table, valued,
                                       multipliers, states)
        block, found = _numbered(signature)
        valued[states] = block.astype(np.uint64) + np.uint64(count + 1)
        count += found
    return (valued[:-1] - np.uint64(1)).astype(np.int64)


def chain_like(table: np.ndarray) -> bool | None:
    """Whether `table`'s rows hold at most `CHAIN_RUNS` runs of moves on average (found a block of rows at a time),
    or None where a state moves to itself (the DFA has a cycle)."""
    runs = 0
    step = block_rows(table.shape[1])
    for lo in range(0, len(table), step):
        check_deadline("minimization")
        rows = table[lo:lo + step]
        if (rows == np.arange(lo, lo + len(rows))[:, None]).any():
            return None
        runs += int(np.count_nonzero(rows[:, 0] >= 0)) + int(np.count_nonzero((rows[:, 1:] != rows[:, :-1])
                                                                              & (rows[:, 1:] >= 0)))
    return runs <= CHAIN_RUNS * len(table)


def heights(indptr: np.ndarray, reverse_indptr: np.ndarray, predecessors: np.ndarray) -> np.ndarray | None:
    """Each state's longest path to a state without moves (Kahn's order from those states, over the distinct
    successor lists' counts and the predecessor lists), or None where some state is on or leads to a cycle."""
    remaining = np.diff(indptr).tolist()
    starts, sources = reverse_indptr.tolist(), predecessors.tolist()
    height = [0] * len(remaining)
    order = [state for state, count in enumerate(remaining) if count == 0]
    head = 0
    while head < len(order):
        state = order[head]
        head += 1
        if head & 8191 == 0:
            check_deadline("minimization")
        above = height[state] + 1
        for source in sources[starts[state]:starts[state + 1]]:
            if height[source] < above:
                height[source] = above
            remaining[source] -= 1
            if remaining[source] == 0:
                order.append(source)
    if len(order) < len(remaining):
        return None
    return np.array(height, dtype=np.int64)


def level_heights(indptr: np.ndarray, reverse_indptr: np.ndarray, predecessors: np.ndarray) -> np.ndarray | None:
    """`heights`, a height at a time with numpy (a state's height is the pass in which its last successor is done),
    or None where some state is on or leads to a cycle, or once the heights pass `STATES_PER_HEIGHT` states each
    on average (the caller would not use them)."""
    num_states = len(indptr) - 1
    remaining = np.diff(indptr)
    height = np.full(num_states, -1, dtype=np.int64)
    frontier = np.flatnonzero(remaining == 0)
    level = 0
    while len(frontier):
        if (level + 1) * STATES_PER_HEIGHT > num_states:
            return None
        check_deadline("minimization")
        height[frontier] = level
        sources = csr_gather(reverse_indptr, predecessors, frontier)
        np.subtract.at(remaining, sources, 1)
        frontier = distinct_values(sources[remaining[sources] == 0])
        level += 1
    return height if (height >= 0).all() else None


def _round_signatures(table: np.ndarray, block: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """One Moore round hashed: each state's block and the blocks its symbols lead to (dead its own value), as a
    wrapping sum of odd multiples, a block of rows at a time with a deadline check between."""
    valued = np.append(block.astype(np.uint64) + np.uint64(1), np.uint64(0))
    with np.errstate(over="ignore"):
        signature = valued[:-1] * multipliers[0]
    return _with_moves_hashed(signature, table, valued, multipliers)


def _with_moves_hashed(signature: np.ndarray, table: np.ndarray, valued: np.ndarray, multipliers: np.ndarray,
                       states: np.ndarray | None = None) -> np.ndarray:
    """`signature` (one entry per state of `states`, every row of `table` where None) plus the wrapping sum of
    each state's move targets' values (`valued`, the dead move's last) times its symbols' multipliers (from the
    second on), a block of rows at a time with a deadline check between."""
    step = block_rows(table.shape[1])
    with np.errstate(over="ignore"):
        for lo in range(0, len(signature), step):
            check_deadline("minimization")
            rows = table[lo:lo + step] if states is None else table[states[lo:lo + step]]
            signature[lo:lo + step] += (valued[rows] * multipliers[1:]).sum(axis=1, dtype=np.uint64)
    return signature


def _numbered(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's rank among the distinct values (a block number), and how many there are."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    fresh = np.ones(len(values), dtype=bool)
    fresh[1:] = ordered[1:] != ordered[:-1]
    ranks = np.cumsum(fresh) - 1
    block = np.empty(len(values), dtype=np.int64)
    block[order] = ranks
    return block, int(ranks[-1]) + 1 if len(values) else 0

