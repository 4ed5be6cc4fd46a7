"""The level pass over a token trie, shared by DFA rows and pushdown (symbolic) rows.

A walk from one root steps every trie node of a depth at once: dense levels (most nodes alive) in one gather by
parent, listing every token that ends there with a dead value for the dead ones; once few nodes live, only their
children, listing only live tokens. Levels of at most `SMALL_LEVEL` nodes (the trie's deep levels, a few dozen
nodes each) are walked whole again: there a whole level costs fewer numpy calls than the bookkeeping of its live
part. What a step reads (a DFA's scaled table, a pushdown's symbolic step table) is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

import numpy as np

DENSE_FRACTION = 4
"""A level's live nodes below 1/DENSE_FRACTION of it switch the walk to stepping only their children."""
SMALL_LEVEL = 2048
"""Levels of at most this many nodes are walked whole."""


class WalkedLevel(Protocol):
    """One depth of a token trie as the walk reads it (`vocabulary.TrieLevel`, `pushdown.context_rows.SubsetLevel`):
    nodes ordered by parent, tokens ending here ordered by node."""

    @property
    def end_tokens(self) -> np.ndarray: ...

    @property
    def byte(self) -> np.ndarray: ...

    @property
    def size(self) -> int: ...

    def parents_of(self, above: np.ndarray) -> np.ndarray: ...

    def ends_of(self, here: np.ndarray) -> np.ndarray: ...

    def children(self, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def tokens_at(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


def expand_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of the ranges [starts[i], starts[i] + counts[i])."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.cumsum(counts) - counts
    return np.repeat(starts.astype(np.int64, copy=False) - shift, counts) + np.arange(total)


def level_pass(levels: Sequence[WalkedLevel], root: int, dead: int,
               step_dense: Callable[[WalkedLevel, np.ndarray], np.ndarray],
               step_sparse: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per level: the tokens ending there and their values (dense levels list every token, `dead` marking dead ones;
    sparse ones only live tokens). `root` is the walk's start value; `step_dense(level, above)` steps a whole level
    from the values of the level above, `step_sparse(values, bytes)` the live nodes' children from their parents'
    values by the children's bytes."""
    dense: np.ndarray | None = np.full(1, root, dtype=np.int32)
    live = np.zeros(0, dtype=np.int64)
    values = np.zeros(0, dtype=np.int32)
    above = 1
    for level in levels:
        if dense is None and level.size <= SMALL_LEVEL:
            dense = np.full(above, dead, dtype=np.int32)
            dense[live] = values
        above = level.size
        if dense is not None:
            dense = step_dense(level, dense)
            yield level.end_tokens, level.ends_of(dense)
            alive = dense != dead
            count = int(np.count_nonzero(alive))
            if count == 0:
                return
            if count * DENSE_FRACTION < level.size and level.size > SMALL_LEVEL:
                live = np.flatnonzero(alive)
                values = dense[live]
                dense = None
        else:
            starts, child_counts = level.children(live)
            children = expand_ranges(starts, child_counts)
            values = step_sparse(np.repeat(values, child_counts), level.byte[children])
            keep = values != dead
            live, values = children[keep], values[keep]
            if live.shape[0] == 0:
                return
            if not level.end_tokens.shape[0]:
                continue
            token_starts, counts = level.tokens_at(live)
            if counts.any():
                yield level.end_tokens[expand_ranges(token_starts, counts)], np.repeat(values, counts)
