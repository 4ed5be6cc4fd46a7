"""Rows on demand (D.6): the token table's row for one state, by the level pass from that root.

`RowCache` keeps only the automaton and a bounded LRU of compact rows, so memory follows the
visited states, not |Q|·|V|.  A row is computed on first use and stored as the state most tokens
reach plus the exceptions (sorted token ids and their states): inside a string almost every token
leads back to the same state, and at a structural state almost every token is dead.  Beside it the
state's `TokenMask` (the allowed or the refused ids, whichever are fewer) is kept, so a warm mask
is a lookup; bool masks and next-state rows are expanded on request, and int32 bitmasks are kept
packed per state (`PackedMasks`, bounded in bytes) so a warm fill only writes finished words.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from stdsl.errors import StdslError
from stdsl.kernels.combined import WalkTable
from stdsl.kernels.front_rows import FRONT_START_ROWS, front_cut
from stdsl.kernels.packed_masks import DEFAULT_MAX_PACKED_BYTES, PackedMasks
from stdsl.kernels.token_mask import TokenMask
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
    """Masks and next states per automaton state, computed on first use and kept compact in a bounded LRU.

    Each cached state holds its compact row and its `TokenMask` (the allowed ids at a structural
    state, the refused ids inside a string), so a warm `token_mask` is a lookup.  Rows whose default
    is live (inside strings) mostly share one mask: their dead tokens (`flips`) are interned, so equal
    ones are one array with one `TokenMask` per acceptance, and the last such bool mask is kept expanded.
    """

    def __init__(self, automaton: Any, vocab: Vocabulary, max_rows: int = 256,
                 max_packed_bytes: int = DEFAULT_MAX_PACKED_BYTES) -> None:
        if max_rows < 1:
            raise StdslError(f"RowCache: max_rows must be at least 1, got {max_rows}")
        self.table = WalkTable.of(automaton)
        self._front = front_cut(automaton)
        self.vocab = vocab
        self.max_rows = max_rows
        self._dtype = state_dtype(self.table.num_states)
        self._rows: OrderedDict[int, tuple[CompactRow, TokenMask]] = OrderedDict()
        self._flip_sets: dict[int, list[np.ndarray]] = {}
        self._shared_masks: dict[tuple[int, bool], TokenMask] = {}
        self._live_mask: tuple[TokenMask, np.ndarray] | None = None
        self._lock = threading.Lock()
        self.packed = PackedMasks(vocab.size, max_packed_bytes)

    def _entry(self, state: int) -> tuple[CompactRow, TokenMask]:
        """A state's compact row and mask, from the cache or computed now (one thread at a time: rows are shared).

        The start's row kept per front is looked up outside the lock: storing it may make the cache registry
        measure this very cache, which takes the lock."""
        if not 0 <= state < self.table.num_states:
            raise StdslError(
                f"rows: state {state} is outside the automaton (0..{self.table.num_states - 1})"
            )
        with self._lock:
            entry = self._rows.get(state)
            if entry is not None:
                self._rows.move_to_end(state)
                return entry
        kept = self._front_start_row() if state == 0 else None
        with self._lock:
            entry = self._rows.get(state)
            if entry is not None:
                self._rows.move_to_end(state)
                return entry
            row = self._intern(kept if kept is not None else self._compute(state))
            entry = (row, self._mask_of(row, bool(self.table.accepting[state])))
            self._rows[state] = entry
            if len(self._rows) > self.max_rows:
                self._forget(self._rows.popitem(last=False)[1][0])
            return entry

    def row(self, state: int) -> CompactRow:
        """The compact row of a state, from the cache or computed now."""
        return self._entry(state)[0]

    def token_mask(self, state: int) -> TokenMask:
        """Allowed tokens at `state` in compact form (live walks, plus eos iff accepting): cached, read-only."""
        return self._entry(state)[1]

    def _mask_of(self, row: CompactRow, accepting: bool) -> TokenMask:
        """The mask of a row: its live tokens (plus eos if accepting), or its dead ones (less eos if accepting),
        one shared mask per interned dead-token set and acceptance."""
        eos = self.vocab.eos_ids
        if row.default < 0:
            listed = np.union1d(row.flips, eos).astype(np.int32) if accepting and eos.size else row.flips
            return TokenMask.of(self.vocab.size, listed, True)
        key = (id(row.flips), accepting)
        shared = self._shared_masks.get(key)
        if shared is None:
            listed = row.flips
            if accepting and eos.size:
                listed = np.setdiff1d(row.flips, eos, assume_unique=True).astype(np.int32)
            shared = self._shared_masks[key] = TokenMask.of(self.vocab.size, listed, False)
        return shared

    def _forget(self, evicted: CompactRow) -> None:
        """Drop an evicted row's interned dead-token set and its masks once no cached row shares them."""
        if evicted.default < 0 or any(row.flips is evicted.flips for row, _ in self._rows.values()):
            return
        bucket = self._flip_sets.get(hash(evicted.flips.tobytes()), [])
        bucket[:] = [flips for flips in bucket if flips is not evicted.flips]
        for accepting in (False, True):
            self._shared_masks.pop((id(evicted.flips), accepting), None)
        kept = self._live_mask
        if kept is not None and all(mask is not kept[0] for _, mask in self._rows.values()):
            self._live_mask = None

    def _intern(self, row: CompactRow) -> CompactRow:
        """The row with its dead tokens as the one array already held for an equal set (default-live rows)."""
        if row.default < 0:
            return row
        bucket = self._flip_sets.setdefault(hash(row.flips.tobytes()), [])
        for flips in bucket:
            if np.array_equal(flips, row.flips):
                return CompactRow(row.default, row.tokens, row.states, flips)
        bucket.append(row.flips)
        return row

    def _front_start_row(self) -> CompactRow | None:
        """The start's row of a reply laid out as a front and blocks, from its front's cut, kept per front and
        vocabulary (`front_rows`); None where the automaton has no front or a token walks into a block."""
        if self._front is None:
            return None
        front, key = self._front

        def walk_front() -> CompactRow | None:
            row = RowCache(front, self.vocab, max_rows=1)._compute(0)
            escape = front.num_states - 1
            return None if row.default == escape or bool((row.states == escape).any()) else row

        held = FRONT_START_ROWS.get((self.vocab,), walk_front, (key,))
        if held is None:
            return None
        states = held.states.astype(self._dtype)
        states.flags.writeable = False
        return CompactRow(held.default, held.tokens, states, held.flips)

    def _compute(self, state: int) -> CompactRow:
        """A state's compact row: from its live entries where few bytes are live (structural), else from the full row.

        Both give the same row; the choice only saves a pass over the vocabulary where most tokens die.
        """
        live_bytes = self.table.live_byte_count(state)
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
        """Allowed tokens at `state` (read-only bool (V,)): `token_mask` expanded (the last mostly-live one is kept)."""
        compact = self.token_mask(state)
        kept = self._live_mask
        if kept is not None and kept[0] is compact:
            return kept[1]
        out = compact.dense()
        out.flags.writeable = False
        if not compact.listed_allowed:
            self._live_mask = (compact, out)
        return out

    def fill_bitmask(self, state: int, out: np.ndarray) -> np.ndarray:
        """Write the mask at `state` into an int32 bitmask (the peers' layout, `TokenMask.packed`) from the
        state's packed words, memoized on first fill (`PackedMasks`).  Returns `out`."""
        return self.packed.fill(state, self.token_mask, out)

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
        if self.vocab.walk_lengths[token_id] == 0:
            return DEAD
        scaled = self.table.scaled
        flat, sink = scaled.flat, scaled.sink
        s = state * scaled.stride
        for column in self.vocab.bytes_of(token_id).translate(scaled.translation):
            s = int(flat[s + column])
            if s == sink:
                return DEAD
        return s // scaled.stride

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached rows and masks (each array counted once, shared or not), the kept bool mask and
        the packed bitmasks."""
        arrays: dict[int, int] = {}
        with self._lock:
            entries = list(self._rows.values())
            kept = self._live_mask[1].nbytes if self._live_mask is not None else 0
        for row, compact in entries:
            for array in (row.tokens, row.states, row.flips, compact.listed):
                arrays[id(array)] = array.nbytes
            arrays[id(compact)] = compact.nbytes - compact.listed.nbytes
        return sum(arrays.values()) + kept + self.packed.nbytes

    def __len__(self) -> int:
        return len(self._rows)
