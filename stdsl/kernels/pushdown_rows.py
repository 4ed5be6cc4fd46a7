"""Rows on demand for a pushdown: every token's run from one configuration, by the level pass.

`pushdown_row` walks the trie level by level as for a DFA (Theorem 18(i)) from one concrete
configuration: a node's configuration is an interned id of the `PushdownMachine`, and each level
steps only its distinct (configuration, byte) pairs, memoized across calls; it is the exact
reference.  `PushdownRows`, what decoding uses, composes the same rows from symbolic rows
(`pushdown_context_rows`), walked once per state and top of stack (Theorem 22).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from stdsl.compiler.pushdown.machine import DEAD, PushdownMachine
from stdsl.errors import StdslError
from stdsl.kernels.pushdown_context_rows import DEFAULT_MAX_BYTES, ContextRows, ContextRowStats
from stdsl.kernels.vocabulary import Vocabulary


def pushdown_row(machine: PushdownMachine, config: int, vocab: Vocabulary) -> np.ndarray:
    """Next configuration per token from `config` (int32 (V,)): DEAD for refused tokens, specials and eos."""
    row = np.full(vocab.size, DEAD, dtype=np.int64)
    current = np.array([config], dtype=np.int64)
    for level in vocab.levels:
        parents = level.parents_of(current)
        alive = np.flatnonzero(parents >= 0)
        nxt = np.full(level.size, DEAD, dtype=np.int64)
        if alive.size:
            keys = parents[alive] * 256 + level.byte[alive].astype(np.int64)
            unique, inverse = np.unique(keys, return_inverse=True)
            stepped = np.fromiter((machine.step_byte(k >> 8, k & 255) for k in unique.tolist()),
                                  dtype=np.int64, count=len(unique))
            nxt[alive] = stepped[inverse.reshape(-1)]
        if level.end_tokens.size:
            row[level.end_tokens] = level.ends_of(nxt)
        if not (nxt >= 0).any():
            break
        current = nxt
    row[vocab.special | vocab.eos] = DEAD
    return row.astype(np.int32)


class PushdownRows:
    """Rows of next configurations per configuration, composed from symbolic rows (Theorem 22) and kept in a small LRU.

    The symbolic rows (`ContextRows`, bounded by `max_bytes`) are shared by every configuration
    with the same state and top of stack, so the trie is walked once per such context; the
    concrete LRU of `max_rows` only serves the repeated asks of one step (the mask, then the
    singleton check after the advance).  Each row equals `pushdown_row` at its configuration.
    """

    def __init__(self, machine: PushdownMachine, vocab: Vocabulary, max_rows: int = 4,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_rows < 1:
            raise StdslError(f"PushdownRows: max_rows must be at least 1, got {max_rows}")
        self.machine = machine
        self.vocab = vocab
        self.max_rows = max_rows
        self.symbolic = ContextRows(machine, vocab, max_bytes)
        self._rows: OrderedDict[int, np.ndarray] = OrderedDict()

    def next_states(self, config: int) -> np.ndarray:
        """Next configuration per token from `config` (read-only; DEAD where the token is refused)."""
        row = self._rows.get(config)
        if row is not None:
            self._rows.move_to_end(config)
            return row
        row = self.symbolic.next_states(config)
        row.flags.writeable = False
        self._rows[config] = row
        if len(self._rows) > self.max_rows:
            self._rows.popitem(last=False)
        return row

    def mask(self, config: int) -> np.ndarray:
        """Admissible tokens at `config`: live runs, plus eos iff the configuration accepts."""
        allowed = self.next_states(config) >= 0
        allowed[self.vocab.eos_ids] = self.machine.config_accepts(config)
        return allowed

    @property
    def stats(self) -> ContextRowStats:
        """Lookups of the symbolic rows so far (hit rate, walks, concrete steps, evictions)."""
        return self.symbolic.stats

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached concrete rows and the symbolic rows."""
        return sum(r.nbytes for r in self._rows.values()) + self.symbolic.nbytes

    def __len__(self) -> int:
        return len(self._rows)
