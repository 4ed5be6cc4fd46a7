"""Packed bitmasks per state, memoized so that a warm fill is one dictionary hit and one or two numpy writes.

The peers' kernels take a mask as int32 words, 32 tokens a word.  Building those words from a
`TokenMask` scatters its ids; for a state met again `PackedMasks` keeps the finished words, either
whole (a contiguous copy) or, where few words differ from all-0 or all-1, as that fill and the
differing words (a fill of the caller's buffer, which is in cache, and a small scatter: the peers'
own way).  Keys (DFA states, pushdown configurations) whose mask is one `TokenMask` object share one
packed form, and the memo is an LRU bounded in bytes with the rule of `PushdownRows`' mask memo: the
least recently used keys go first, the newest always stays, and a packed form goes once no key uses it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stdsl.errors import StdslError
from stdsl.kernels.token_mask import TokenMask, bitmask_words

DEFAULT_MAX_PACKED_BYTES = 16 << 20
SPARSE_WORD_SHARE = 16
SCALAR_WORDS = 16
INT32 = np.dtype(np.int32)


@dataclass(frozen=True)
class PackedMask:
    """A mask's bitmask words: `values` at `index` and `fill` (0 or -1) in every other word, or, with `fill`
    None, `values` is every word.  `pairs` lists (index, value) as Python ints where there are at most
    `SCALAR_WORDS` of them (a few scalar stores beat one fancy-index store), else it is None."""

    fill: int | None
    index: np.ndarray
    values: np.ndarray
    pairs: tuple[tuple[int, int], ...] | None

    @staticmethod
    def of(mask: TokenMask) -> PackedMask:
        """The packed form of `mask`: sparse when at most 1/`SPARSE_WORD_SHARE` of the words differ from the
        commoner of all-0 and all-1."""
        words = mask.packed()
        fill = -1 if np.count_nonzero(words == -1) * 2 > words.shape[0] else 0
        index = np.flatnonzero(words != fill)
        if index.shape[0] * SPARSE_WORD_SHARE > words.shape[0]:
            return PackedMask(None, index[:0], words, None)
        values = words[index]
        for array in (index, values):
            array.flags.writeable = False
        pairs = tuple(zip(index.tolist(), values.tolist(), strict=True)) if index.shape[0] <= SCALAR_WORDS else None
        return PackedMask(fill, index, values, pairs)

    def write(self, out: np.ndarray) -> None:
        """Write the words into `out` (int32 (words,) contiguous, checked by the caller)."""
        if self.fill is None:
            out[...] = self.values
            return
        out.fill(self.fill)
        if self.pairs is None:
            out[self.index] = self.values
            return
        for word, value in self.pairs:
            out[word] = value

    @property
    def nbytes(self) -> int:
        """Bytes held by the index and the words."""
        return int(self.index.nbytes + self.values.nbytes)


class PackedMasks:
    """int32 bitmask words per key over `size` tokens, packed from the key's `TokenMask` on first use and kept in
    an LRU of at most `max_bytes` bytes (the newest key's packed form always stays).

    A hit takes no lock (a lookup and a move to the LRU's end are each atomic); a miss packs under the lock.
    """

    def __init__(self, size: int, max_bytes: int = DEFAULT_MAX_PACKED_BYTES) -> None:
        if max_bytes < 1:
            raise StdslError(f"PackedMasks: max_bytes must be positive, got {max_bytes}")
        self.size = size
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._shape = (bitmask_words(size),)
        self._checked: np.ndarray | None = None
        self._by_key: OrderedDict[int, PackedMask] = OrderedDict()
        self._mask_of_key: dict[int, int] = {}
        self._by_mask: dict[int, tuple[TokenMask, PackedMask, int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def fill(self, key: int, mask_of: Callable[[int], TokenMask], out: np.ndarray) -> np.ndarray:
        """Write the words of `key`'s mask into `out` (contiguous int32 of `bitmask_words(size)`); on a miss the
        mask is `mask_of(key)`, packed once per distinct `TokenMask`.  Returns `out`."""
        if out is not self._checked:
            self._check(out)
        packed = self._by_key.get(key)
        if packed is None:
            with self._lock:
                packed = self._add(key, mask_of)
        else:
            self.hits += 1
            try:
                self._by_key.move_to_end(key)
            except KeyError:  # evicted by another thread since the lookup: the packed form is still right
                pass
        packed.write(out)
        return out

    def _check(self, out: np.ndarray) -> None:
        """Refuse a bitmask of the wrong type, shape or layout; the last one accepted is not checked again (an
        array keeps its type and shape unless they are reassigned in place)."""
        if out.dtype != INT32 or out.shape != self._shape or not out.flags.c_contiguous or not out.flags.writeable:
            raise StdslError(
                f"PackedMasks: the bitmask must be writable contiguous int32 of shape {self._shape}, got "
                f"{out.dtype} {out.shape}"
            )
        self._checked = out

    def _add(self, key: int, mask_of: Callable[[int], TokenMask]) -> PackedMask:
        """`key`'s packed form, recorded as used by `key` (packed now unless another key's mask is the same object,
        or another thread added `key` meanwhile)."""
        found = self._by_key.get(key)
        if found is not None:
            return found
        mask = mask_of(key)
        if mask.size != self.size:
            raise StdslError(f"PackedMasks: a mask over {mask.size} tokens in a memo over {self.size}")
        self.misses += 1
        held = self._by_mask.get(id(mask))  # the memo holds `mask`, so its id names no other object meanwhile
        if held is None:
            packed = PackedMask.of(mask)
            held = (mask, packed, 0)
            self._bytes += packed.nbytes
        self._by_mask[id(mask)] = (held[0], held[1], held[2] + 1)
        self._by_key[key] = held[1]
        self._mask_of_key[key] = id(mask)
        self._evict()
        return held[1]

    def _evict(self) -> None:
        """Drop the least recently used keys until the packed forms fit `max_bytes` (the newest key always stays)."""
        while self._bytes > self.max_bytes and len(self._by_key) > 1:
            key, _ = self._by_key.popitem(last=False)
            mask_id = self._mask_of_key.pop(key)
            mask, packed, users = self._by_mask[mask_id]
            if users > 1:
                self._by_mask[mask_id] = (mask, packed, users - 1)
            else:
                del self._by_mask[mask_id]
                self._bytes -= packed.nbytes

    @property
    def nbytes(self) -> int:
        """Bytes of packed forms held (each shared one once)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._by_key)
