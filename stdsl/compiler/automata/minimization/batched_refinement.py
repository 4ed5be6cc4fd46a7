"""Hopcroft refinement a round of splitters at a time in numpy, for `minimize.nerode_blocks` on large DFAs.

Each round takes every waiting block as a splitter at once: a state's signature is a random linear hash of which
symbols take it into which splitter, the blocks its sources lie in are split by (block, hash), and every piece of a
split block but its largest waits (Hopcroft's smaller-half rule, valid for a batch as for one splitter: the
partition is stable with respect to the block split).  A chain of nested splits costs a round per step, so once a
round is thin the partition and its waiting blocks are handed back to the one-splitter loop.  A hash collision can
only leave two states together that a split should part: `is_congruence` checks the end result, and the caller
refines afresh if it fails (it never has).
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler.automata.state_graph import odd_multipliers
from stdsl.compiler.automata.table_blocks import block_rows, target_runs
from stdsl.compiler.deadline import check_deadline

THIN_ROUND_ENTRIES = 48
"""A round moving fewer than this many (source, target) pairs is thin: the one-splitter loop's few microseconds a
move are cheaper than a round's few dozen numpy calls (about 0.3 ms)."""
STATES_PER_THIN_ROUND = 256
"""Thin rounds allowed per this many states before the rest goes to the one-splitter loop, whose setup (listing
every state's entering moves, about 1.7 us a state) a short thin tail costs less than (o1052: 15 blocks left)."""
_SYMBOL_STREAM, _BLOCK_STREAM = 0x5EED_81, 0x5EED_83
"""Streams of the hash multipliers (`odd_multipliers`) of symbols and of blocks."""


def entering_weights(table: np.ndarray, symbol_weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The moves into each state grouped by source, as CSR arrays `(bounds, sources, weights)` by target: a weight is
    the wrapping sum of `symbol_weight` over the symbols on which the source moves to the target.  A row's moves are
    taken as runs of adjacent symbols into one target (one prefix-sum difference each), a block of rows at a time."""
    num_states, width = table.shape
    prefix = np.zeros(width + 1, dtype=np.uint64)
    np.cumsum(symbol_weight, out=prefix[1:])
    key_parts, weight_parts = [], []
    for lo in range(0, num_states, block_rows(width)):
        check_deadline("minimization")
        block = table[lo:lo + block_rows(width)]
        begins, ends = target_runs(block)
        key_parts.append(block.reshape(-1)[begins].astype(np.int64) * num_states + begins // width + lo)
        weight_parts.append(prefix[ends % width + 1] - prefix[begins % width])
    check_deadline("minimization")
    keys = np.concatenate(key_parts) if key_parts else np.zeros(0, dtype=np.int64)
    weights = np.concatenate(weight_parts) if weight_parts else np.zeros(0, dtype=np.uint64)
    order = np.argsort(keys)
    keys, weights = keys[order], weights[order]
    check_deadline("minimization")
    cut = np.ones(len(keys), dtype=bool)
    cut[1:] = keys[1:] != keys[:-1]
    starts = np.flatnonzero(cut)
    pairs = keys[starts]
    pair_weights = np.add.reduceat(weights, starts) if len(starts) else weights
    bounds = np.searchsorted(pairs, np.arange(num_states + 1, dtype=np.int64) * num_states)
    return bounds, pairs % num_states, pair_weights


def batched_rounds(table: np.ndarray, block: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Refine the partition `block` (numbered 0..count-1, every block waiting) of a trim DFA's states by rounds of
    all waiting splitters, until none waits or a round is thin; returns the partition and its waiting blocks."""
    num_states, width = table.shape
    bounds, sources, weights = entering_weights(table, odd_multipliers(_SYMBOL_STREAM, width))
    block_hash = odd_multipliers(_BLOCK_STREAM, num_states)
    block = block.astype(np.int64)
    size = np.zeros(num_states, dtype=np.int64)
    count = int(block.max()) + 1
    size[:count] = np.bincount(block, minlength=count)
    waiting = np.arange(count, dtype=np.int64)
    is_waiting = np.zeros(num_states, dtype=bool)
    thin_rounds_left = num_states // STATES_PER_THIN_ROUND
    while len(waiting):
        check_deadline("minimization")
        is_waiting[waiting] = True
        targets = np.flatnonzero(is_waiting[block])
        is_waiting[waiting] = False
        starts = bounds[targets]
        lengths = bounds[targets + 1] - starts
        total = int(lengths.sum())
        if total < THIN_ROUND_ENTRIES:
            if thin_rounds_left == 0:
                break
            thin_rounds_left -= 1
        entries = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        moved = block_hash[np.repeat(block[targets], lengths)] * weights[entries]
        source = sources[entries]
        check_deadline("minimization")
        order = np.argsort(source)
        source, moved = source[order], moved[order]
        check_deadline("minimization")
        first = np.ones(total, dtype=bool)
        first[1:] = source[1:] != source[:-1]
        heads = np.flatnonzero(first)
        touched, signature = source[heads], np.add.reduceat(moved, heads)
        old = block[touched]
        order = np.lexsort((signature, old))
        check_deadline("minimization")
        touched, signature, old = touched[order], signature[order], old[order]
        new_group = np.ones(len(touched), dtype=bool)
        new_group[1:] = (old[1:] != old[:-1]) | (signature[1:] != signature[:-1])
        group_starts = np.flatnonzero(new_group)
        group_size = np.diff(np.append(group_starts, len(touched)))
        group_block = old[group_starts]
        new_block = np.ones(len(group_starts), dtype=bool)
        new_block[1:] = group_block[1:] != group_block[:-1]
        block_starts = np.flatnonzero(new_block)
        split_block = group_block[block_starts]
        remainder = size[split_block] - np.add.reduceat(group_size, block_starts)
        groups_of_block = np.diff(np.append(block_starts, len(group_starts)))
        splits = groups_of_block + (remainder > 0) > 1
        check_deadline("minimization")
        if not splits.any():
            waiting = np.zeros(0, dtype=np.int64)
            continue
        block_of_group = np.repeat(np.arange(len(block_starts)), groups_of_block)
        splits_group = splits[block_of_group]
        keeps_id = new_block & (remainder == 0)[block_of_group]
        renamed = splits_group & ~keeps_id
        ids = np.full(len(group_starts), -1, dtype=np.int64)
        ids[renamed] = count + np.arange(int(renamed.sum()))
        count += int(renamed.sum())
        ids[~renamed] = group_block[~renamed]
        largest = np.maximum(np.maximum.reduceat(group_size, block_starts), remainder)
        rest_is_largest = (remainder > 0) & (remainder >= largest)
        is_largest = (group_size == largest[block_of_group]) & ~rest_is_largest[block_of_group]
        first_largest = _first_of_each_run(is_largest, block_starts, groups_of_block)
        block[touched] = np.repeat(ids, group_size)
        size[ids[renamed]] = group_size[renamed]
        kept = splits & (remainder == 0)
        size[split_block[kept]] = group_size[block_starts[kept]]
        size[split_block[splits & (remainder > 0)]] = remainder[splits & (remainder > 0)]
        waiting = np.concatenate([ids[splits_group & ~first_largest],
                                  split_block[splits & (remainder > 0) & ~rest_is_largest]])
    return block, waiting.tolist()


def _first_of_each_run(flags: np.ndarray, run_starts: np.ndarray, run_lengths: np.ndarray) -> np.ndarray:
    """`flags` with only the first set one of each run (runs: `run_lengths` items from each of `run_starts`) kept."""
    seen = np.cumsum(flags)
    before_run = seen[run_starts] - flags[run_starts]
    return flags & (seen - np.repeat(before_run, run_lengths) == 1)


def is_congruence(table: np.ndarray, accepting: np.ndarray, block: np.ndarray) -> bool:
    """Whether the partition `block` keeps accepting and rejecting states apart and every block's states move on
    each symbol into one block (or all have no move): then it is at least as fine as Myhill-Nerode equivalence."""
    count = int(block.max()) + 1
    representative = np.empty(count, dtype=np.int64)
    representative[block[::-1]] = np.arange(len(block))[::-1]
    if not np.array_equal(accepting, accepting[representative][block]):
        return False
    with_dead = np.append(block, -1)
    step = block_rows(table.shape[1])
    for lo in range(0, len(table), step):
        check_deadline("minimization")
        rows = slice(lo, lo + step)
        if not np.array_equal(with_dead[table[rows]], with_dead[table[representative[block[rows]]]]):
            return False
    return True
