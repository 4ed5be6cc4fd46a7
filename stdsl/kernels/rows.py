"""Rows on demand (D.6): the token table's row for one state, by the level pass from that root.

`RowCache` keeps only the automaton and a bounded LRU of compact rows, so memory follows the
visited states, not |Q|·|V|.  A row is computed on first use and stored as the state most tokens
reach plus the exceptions (sorted token ids and their states): inside a string almost every token
leads back to the same state, and at a structural state almost every token is dead.  Masks and
next-state rows are expanded from it on request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from stdsl.errors import StdslError
from stdsl.kernels.combined import WalkTable
from stdsl.kernels.token_table import DEAD, ScaledTable, root_row, root_row_live, root_row_scaled, state_dtype
from stdsl.kernels.vocabulary import Vocabulary

MODE_SAMPLE_STRIDE = 61


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


@dataclass(frozen=True)
class CompactRow:
    """One state's row: `default` for every token but `tokens` (sorted ids), which go to `states` (-1 dead).

    `flips` are the exceptions whose liveness differs from the default's (the mask's exceptions).
    Eos and specials are always exceptions when the default is live (they never walk).
    """

    default: int
    tokens: np.ndarray
    states: np.ndarray
    flips: np.ndarray

    @staticmethod
    def of(row: np.ndarray, dtype: np.dtype | None = None, scale: ScaledTable | None = None) -> CompactRow:
        """The compact form of a full row (states stored as `dtype`, default the row's); the default is
        the most frequent value of a strided sample.  With `scale` the row holds scaled states
        (`scale.sink` dead), converted only where stored."""
        sample = row[::MODE_SAMPLE_STRIDE]
        values, counts = np.unique(sample, return_counts=True)
        common = int(values[np.argmax(counts)]) if sample.size else DEAD
        tokens = np.flatnonzero(row != common).astype(np.int32)
        stored = row[tokens]
        if scale is not None:
            stored = scale.states_of(stored)
            common = int(scale.states_of(np.asarray([common]))[0])
        default = common
        states = stored.astype(dtype or row.dtype)
        flips = tokens if default < 0 else tokens[states < 0]
        for array in (tokens, states, flips):
            array.flags.writeable = False
        return CompactRow(default, tokens, states, flips)

    @staticmethod
    def dead_except(tokens: np.ndarray, states: np.ndarray, dtype: np.dtype) -> CompactRow:
        """The row where only `tokens` (distinct, any order) are live, going to `states`."""
        order = np.argsort(tokens, kind="stable")
        live_tokens = tokens[order].astype(np.int32)
        live_states = states[order].astype(dtype)
        for array in (live_tokens, live_states):
            array.flags.writeable = False
        return CompactRow(DEAD, live_tokens, live_states, live_tokens)

    def next_states(self, size: int, dtype: np.dtype) -> np.ndarray:
        """The full row (V,) of next states."""
        out = np.full(size, self.default, dtype=dtype)
        out[self.tokens] = self.states
        return out

    def live(self, size: int) -> np.ndarray:
        """bool (V,): tokens with a live walk."""
        live = self.default >= 0
        out = np.ones(size, dtype=bool) if live else np.zeros(size, dtype=bool)
        out[self.flips] = not live
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held by the exceptions (`flips` counted only where it is not `tokens` itself)."""
        flips = 0 if self.flips is self.tokens else self.flips.nbytes
        return int(self.tokens.nbytes + self.states.nbytes + flips)


class RowCache:
    """Masks and next states per automaton state, computed on first use and kept compact in a bounded LRU."""

    def __init__(self, automaton: Any, vocab: Vocabulary, max_rows: int = 256) -> None:
        if max_rows < 1:
            raise StdslError(f"RowCache: max_rows must be at least 1, got {max_rows}")
        self.table = WalkTable.of(automaton)
        self.vocab = vocab
        self.max_rows = max_rows
        self._dtype = state_dtype(self.table.num_states)
        self._rows: OrderedDict[int, CompactRow] = OrderedDict()
        self._lock = threading.Lock()

    def row(self, state: int) -> CompactRow:
        """The compact row of a state, from the cache or computed now (one thread at a time: rows are shared)."""
        with self._lock:
            row = self._rows.get(state)
            if row is not None:
                self._rows.move_to_end(state)
                return row
            if not 0 <= state < self.table.num_states:
                raise StdslError(
                    f"rows: state {state} is outside the automaton (0..{self.table.num_states - 1})"
                )
            row = self._compute(state)
            self._rows[state] = row
            if len(self._rows) > self.max_rows:
                self._rows.popitem(last=False)
            return row

    def _compute(self, state: int) -> CompactRow:
        """A state's compact row: from its live entries where few bytes are live (structural), else from the full row.

        Both give the same row; the choice only saves a pass over the vocabulary where most tokens die.
        """
        live_bytes = int(np.count_nonzero(self.table.class_transitions[state][self.table.byte_class] >= 0))
        if live_bytes * 2 > 256:
            scaled = root_row_scaled(self.table.scaled, state, self.vocab)
            return CompactRow.of(scaled, self._dtype, self.table.scaled)
        tokens, states = root_row_live(self.table.scaled, state, self.vocab)
        if tokens.shape[0] * 2 <= self.vocab.size:
            return CompactRow.dead_except(tokens, states, self._dtype)
        full = np.full(self.vocab.size, DEAD, dtype=np.int32)
        full[tokens] = states
        return CompactRow.of(full, self._dtype)

    def next_states(self, state: int) -> np.ndarray:
        """Row T[state, ·] (read-only): next state per token, -1 dead."""
        out = self.row(state).next_states(self.vocab.size, self._dtype)
        out.flags.writeable = False
        return out

    def mask(self, state: int) -> np.ndarray:
        """Allowed tokens at `state` (read-only bool (V,)): live walks, plus eos iff accepting."""
        out = self.row(state).live(self.vocab.size)
        if self.table.accepting[state]:
            out[self.vocab.eos_ids] = True
        out.flags.writeable = False
        return out

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
        table, byte_class = self.table.class_transitions, self.table.byte_class
        s = state
        for b in self.vocab.data[start : start + length].tolist():
            s = int(table[s, byte_class[b]])
            if s < 0:
                return DEAD
        return s

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached rows."""
        return sum(row.nbytes for row in self._rows.values())

    def __len__(self) -> int:
        return len(self._rows)
