"""A trim acyclic DFA shown minimal without partition refinement: its states told apart by their languages.

Two Nerode-equivalent states accept the same words, so they agree on anything their language decides: whether
they accept, the length of their longest word (the state's height in an acyclic DFA), and, round after round,
which of these values each symbol leads to (Moore's rounds, hashed).  Where these values alone give every state
one of its own, no two states are equivalent and the DFA is already minimal: the Hopcroft refinement that would
find the same thing one splitter at a time (a long bounded string's product, MaskBench o48164: 17,886 states whose
last splits are one chain step each, 0.1 s) is not run.  A hash collision can only give two states one value,
never part equivalent ones, so it can cost the shortcut but never its answer.  A DFA with a cycle (a state of
unbounded height) or whose heights leave many states alike is left to the refinement at once.
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler.automata.batched_refinement import odd_multipliers
from stdsl.compiler.automata.table_blocks import block_rows
from stdsl.compiler.deadline import check_deadline

MOORE_ROUNDS = 2
"""Hashed Moore rounds after the heights: a bounded string's product is told apart by its heights and one round
(its states alike in height differ in the pattern state they hold); more rounds rarely finish what these leave."""
DISTINCT_SHARE = 0.25
"""The share of states the heights must already tell apart for the rounds to be tried (a bounded string's product:
a third to two thirds): a table they leave mostly alike has equivalent states or needs many rounds."""
CHAIN_RUNS = 3.0
"""Runs of moves (adjacent symbols into one state) a row at most, on average, for the heights to be searched: a long
bounded string's product is a chain whose rows move on a class or two (2.1-2.8 runs); a product whose pattern
branches more has too few heights to tell its states apart (o1052's 43,111 states: 4.8 runs, 255 heights), and the
search for them would be lost time."""
_SEED = 0x5EED_82
"""Seed of the round's hash multipliers: fixed, so that a compile does the same work every time."""


def distinct_by_language(table: np.ndarray, accepting: np.ndarray, height: np.ndarray) -> np.ndarray | None:
    """Each state's own block number (0..n-1) where the trim acyclic DFA `table`'s states are told apart one by one
    by their `height`s (`heights`), acceptance and `MOORE_ROUNDS` hashed rounds, which proves it minimal; else
    None."""
    num_states = len(table)
    block, count = _numbered(height * 2 + accepting)
    if count < DISTINCT_SHARE * num_states:
        return None
    multipliers = odd_multipliers(np.random.default_rng(_SEED), table.shape[1] + 1)
    for _ in range(MOORE_ROUNDS):
        if count == num_states:
            return block
        block, refined = _numbered(_round_signatures(table, block, multipliers))
        if refined == count:
            return None
        count = refined
    return block if count == num_states else None


def chain_like(table: np.ndarray) -> bool:
    """Whether no state of `table` moves to itself and its rows hold at most `CHAIN_RUNS` runs of moves on average
    (found a block of rows at a time): the tables whose heights are worth searching."""
    runs = 0
    step = block_rows(table.shape[1])
    for lo in range(0, len(table), step):
        check_deadline("minimization")
        rows = table[lo:lo + step]
        if (rows == np.arange(lo, lo + len(rows))[:, None]).any():
            return False
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


def _round_signatures(table: np.ndarray, block: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """One Moore round hashed: each state's block and the blocks its symbols lead to (dead its own value), as a
    wrapping sum of odd multiples, a block of rows at a time with a deadline check between."""
    valued = np.append(block.astype(np.uint64) + np.uint64(1), np.uint64(0))
    step = block_rows(table.shape[1])
    with np.errstate(over="ignore"):
        signature = valued[:-1] * multipliers[0]
        for lo in range(0, len(table), step):
            check_deadline("minimization")
            signature[lo:lo + step] += (valued[table[lo:lo + step]] * multipliers[1:]).sum(axis=1, dtype=np.uint64)
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
