"""Rows on demand (D.6): the token table's row for one state, by the level pass from that root.

`RowCache` keeps only the automaton and a bounded LRU of rows, so memory follows the visited
states, not |Q|·|V|. A row is computed on first use; a fetched mask is a dictionary hit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from stdsl.errors import StdslError
from stdsl.kernels.combined import WalkTable
from stdsl.kernels.token_table import DEAD, root_row, state_dtype
from stdsl.kernels.vocabulary import Vocabulary


def row_next_states(table: Any, state: int, vocab: Vocabulary) -> np.ndarray:
    """Row T[state, ·] (V,) by the level pass restricted to one root: -1 dead, specials and eos -1."""
    prepared = WalkTable.of(table)
    if not 0 <= state < prepared.num_states:
        raise StdslError(
            f"rows: state {state} is outside the automaton (0..{prepared.num_states - 1})"
        )
    return root_row(prepared.scaled, state, vocab).astype(
        state_dtype(prepared.num_states)
    )


class RowCache:
    """Masks and next states per automaton state, computed on first use and kept in a bounded LRU."""

    def __init__(self, automaton: Any, vocab: Vocabulary, max_rows: int = 256) -> None:
        if max_rows < 1:
            raise StdslError(f"RowCache: max_rows must be at least 1, got {max_rows}")
        self.table = WalkTable.of(automaton)
        self.vocab = vocab
        self.max_rows = max_rows
        self._rows: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def _row(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(next states, mask) of a state, from the cache or computed now (one thread at a time: rows are shared)."""
        with self._lock:
            return self._row_locked(state)

    def _row_locked(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        row = self._rows.get(state)
        if row is not None:
            self._rows.move_to_end(state)
            return row
        next_states = row_next_states(self.table, state, self.vocab)
        mask = next_states >= 0
        if self.table.accepting[state]:
            mask[self.vocab.eos_ids] = True
        next_states.flags.writeable = False
        mask.flags.writeable = False
        row = (next_states, mask)
        self._rows[state] = row
        if len(self._rows) > self.max_rows:
            self._rows.popitem(last=False)
        return row

    def next_states(self, state: int) -> np.ndarray:
        """Row T[state, ·] (read-only): next state per token, -1 dead."""
        return self._row(state)[0]

    def mask(self, state: int) -> np.ndarray:
        """Allowed tokens at `state` (read-only bool (V,)): live walks, plus eos iff accepting."""
        return self._row(state)[1]

    def advance(self, state: int, token_id: int) -> int:
        """State after `token_id` from `state` (-1 dead), walking only that token's bytes."""
        if not 0 <= token_id < self.vocab.size:
            raise StdslError(
                f"rows: token id {token_id} is outside the vocabulary (size {self.vocab.size})"
            )
        if not 0 <= state < self.table.num_states:
            raise StdslError(
                f"rows: state {state} is outside the automaton (0..{self.table.num_states - 1})"
            )
        length = int(self.vocab.walk_lengths[token_id])
        if length == 0:
            return DEAD
        start = int(self.vocab.offsets[token_id])
        transitions = self.table.transitions
        s = state
        for b in self.vocab.data[start : start + length].tolist():
            s = int(transitions[s, b])
            if s < 0:
                return DEAD
        return s

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached rows."""
        return sum(a.nbytes + m.nbytes for a, m in self._rows.values())

    def __len__(self) -> int:
        return len(self._rows)
