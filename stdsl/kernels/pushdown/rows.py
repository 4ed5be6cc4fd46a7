"""Rows on demand for a pushdown: every token's run from one configuration, by the level pass.

`pushdown_row` walks the trie level by level as for a DFA (Theorem 18(i)) from one concrete
configuration: a node's configuration is an interned id of the `PushdownMachine`, and each level
steps only its distinct (configuration, byte) pairs, memoized across calls; it is the exact
reference.  `PushdownRows`, what decoding uses, composes the same rows from symbolic rows
(`context_rows`), walked once per state and top of stack (Theorem 22), and memoizes each
configuration's mask as a `TokenMask` in an LRU bounded in bytes, and its packed bitmask words in
another (`PackedMasks`), so a configuration met again costs what a DFA state's cached mask costs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from stdsl.compiler.pushdown.machine import DEAD, PushdownMachine
from stdsl.errors import StdslError
from stdsl.kernels.packed_masks import DEFAULT_MAX_PACKED_BYTES, PackedMasks
from stdsl.kernels.pushdown.context_rows import DEFAULT_MAX_BYTES, ContextRows, ContextRowStats
from stdsl.kernels.token_mask import TokenMask
from stdsl.kernels.vocabulary import Vocabulary

DEFAULT_MAX_MASK_BYTES = 16 << 20


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


def row_token_mask(row: np.ndarray, eos_ids: np.ndarray, accepting: bool) -> TokenMask:
    """The mask of a row of next configurations: its live tokens, eos iff `accepting`, listed as the fewer of the
    allowed or the refused ids."""
    live = row >= 0
    live[eos_ids] = accepting
    if np.count_nonzero(live) * 2 <= live.shape[0]:
        return TokenMask.of(live.shape[0], np.flatnonzero(live).astype(np.int32), True)
    return TokenMask.of(live.shape[0], np.flatnonzero(~live).astype(np.int32), False)


class PushdownRows:
    """Rows of next configurations per configuration, composed from symbolic rows (Theorem 22), and masks per
    configuration memoized.

    The symbolic rows (`ContextRows`, bounded by `max_bytes`) are shared by every configuration
    with the same state and top of stack, so the trie is walked once per such context; the
    concrete LRU of `max_rows` only serves the repeated asks of one step (the mask, then the
    singleton check after the advance).  Each row equals `pushdown_row` at its configuration.
    Masks (`token_mask`) are kept per configuration in an LRU bounded by `max_mask_bytes`; equal
    masks (a string's body at any depth) are one `TokenMask`, so its bitmask words (`packed`, bounded by
    `max_packed_bytes`) are built once.
    """

    def __init__(self, machine: PushdownMachine, vocab: Vocabulary, max_rows: int = 4,
                 max_bytes: int = DEFAULT_MAX_BYTES, max_mask_bytes: int = DEFAULT_MAX_MASK_BYTES,
                 max_packed_bytes: int = DEFAULT_MAX_PACKED_BYTES) -> None:
        if max_rows < 1:
            raise StdslError(f"PushdownRows: max_rows must be at least 1, got {max_rows}")
        if max_mask_bytes < 1:
            raise StdslError(f"PushdownRows: max_mask_bytes must be positive, got {max_mask_bytes}")
        self.machine = machine
        self.vocab = vocab
        self.max_rows = max_rows
        self.max_mask_bytes = max_mask_bytes
        self.symbolic = ContextRows(machine, vocab, max_bytes)
        self.mask_hits = 0
        self.mask_misses = 0
        self._rows: OrderedDict[int, np.ndarray] = OrderedDict()
        self._masks: OrderedDict[int, TokenMask] = OrderedDict()
        self._interned: dict[tuple[bool, int], list[TokenMask]] = {}
        self._users: dict[int, int] = {}
        self._mask_sizes: dict[int, int] = {}
        self._mask_bytes = 0
        self._lock = threading.RLock()
        self.packed = PackedMasks(vocab.size, max_packed_bytes)

    def next_states(self, config: int) -> np.ndarray:
        """Next configuration per token from `config` (read-only; DEAD where the token is refused)."""
        with self._lock:
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

    def token_mask(self, config: int) -> TokenMask:
        """Admissible tokens at `config` in compact form (live runs, plus eos iff the configuration accepts): from
        the memo, or built now from the composed row."""
        with self._lock:
            found = self._masks.get(config)
            if found is not None:
                self._masks.move_to_end(config)
                self.mask_hits += 1
                return found
            self.mask_misses += 1
            mask = self._intern(row_token_mask(self.next_states(config), self.vocab.eos_ids,
                                               self.machine.config_accepts(config)))
            self._masks[config] = mask
            self._use(mask, 1)
            self._evict()
            return mask

    def mask(self, config: int) -> np.ndarray:
        """Admissible tokens at `config` (a fresh bool (V,)): live runs, plus eos iff the configuration accepts."""
        return self.token_mask(config).dense()

    def fill_bitmask(self, config: int, out: np.ndarray) -> np.ndarray:
        """Write the mask at `config` into an int32 bitmask (the peers' layout, `TokenMask.packed`) from the
        configuration's packed words, memoized on first fill (`PackedMasks`).  Returns `out`."""
        return self.packed.fill(config, self.token_mask, out)

    def _intern(self, mask: TokenMask) -> TokenMask:
        """The memoized mask equal to `mask`, or `mask` itself once recorded as new."""
        bucket = self._interned.setdefault((mask.listed_allowed, hash(mask.listed.tobytes())), [])
        for kept in bucket:
            if np.array_equal(kept.listed, mask.listed):
                return kept
        bucket.append(mask)
        return mask

    def _use(self, mask: TokenMask, change: int) -> None:
        """Count one more (or one fewer) configuration using `mask`; an unused mask is forgotten."""
        key = id(mask)
        users = self._users.get(key, 0) + change
        if users > 0:
            if key not in self._mask_sizes:
                self._mask_sizes[key] = mask.nbytes
                self._mask_bytes += mask.nbytes
            self._users[key] = users
            return
        del self._users[key]
        self._mask_bytes -= self._mask_sizes.pop(key)
        bucket = self._interned[(mask.listed_allowed, hash(mask.listed.tobytes()))]
        bucket[:] = [kept for kept in bucket if kept is not mask]

    def _evict(self) -> None:
        """Drop the least recently used masks until the memo fits `max_mask_bytes` (the newest one always stays)."""
        while self._mask_bytes > self.max_mask_bytes and len(self._masks) > 1:
            self._use(self._masks.popitem(last=False)[1], -1)

    @property
    def stats(self) -> ContextRowStats:
        """Lookups of the symbolic rows so far (hit rate, walks, concrete steps, evictions)."""
        return self.symbolic.stats

    @property
    def mask_nbytes(self) -> int:
        """Bytes held by the memoized masks (each distinct mask once; the packed words are `packed.nbytes`)."""
        return self._mask_bytes

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached concrete rows, the memoized masks and packed words, and the symbolic rows."""
        with self._lock:
            rows = list(self._rows.values())
        return sum(r.nbytes for r in rows) + self._mask_bytes + self.packed.nbytes + self.symbolic.nbytes

    def __len__(self) -> int:
        return len(self._rows)
