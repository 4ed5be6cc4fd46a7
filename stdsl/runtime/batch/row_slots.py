"""The KV cache of a running batch: one slot per row, each row at its own length, ragged feeds per step.

mlx-lm's `BatchKVCache` aligns rows on the right (left padding) and appends the same number of
positions to every row, so a step where rows feed different numbers of tokens (a sampled token
plus a forced span of any length) would leave holes inside every shorter row. Here each row
writes its new keys at its own length instead (one scatter per layer), the attention mask lets
query t of row i see keys 0 .. len_i + t, and RoPE positions start at len_i, so a row's cache is
exactly what a single-sequence cache would hold and rows join, leave or are copied out by slicing.

Rows are logical (the caller's order); each sits in a physical slot of the arrays. A row that leaves
frees its slot without copying the others, and a row that joins is written into a free slot, so
a server whose requests come and go does not copy the whole batch's keys at every arrival and
departure. A free slot still costs its share of each pass, so slots left free for `IDLE_PASSES`
passes (or more free slots than rows) are compacted away in one gather.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import mlx.core as mx

T = TypeVar("T")

GROWTH = 256
IDLE_PASSES = 6
"""Passes a free slot may ride along before the slots are compacted (a free slot costs about 1/B of a pass; a
compaction copies every row once, about one pass at 8 rows of a thousand positions on SmolLM2)."""


class RowSlotsCache:
    """One attention layer's keys and values for B rows, with per-row lengths (mlx-lm's cache protocol).

    `prepare(feeds)` must be called before a forward over the (slots, T) input `physical(feeds)` gives, where
    row i holds `feeds[i]` real tokens (right-padded); `commit()` after it advances each row by its count.
    `slots[i]` is row i's physical slot; the model sees the physical rows (free slots feed nothing).
    """

    def __init__(self, lengths: Sequence[int] = ()) -> None:
        self.keys: mx.array | None = None
        self.values: mx.array | None = None
        self._lengths: list[int] = list(lengths)
        self.slots: list[int] = list(range(len(self._lengths)))
        self._feeds: list[int] = []
        self._idle = 0
        self.offset: mx.array = mx.array(self._lengths, dtype=mx.int32)

    @property
    def lengths(self) -> list[int]:
        """Each row's cached positions, in row order."""
        return [self._lengths[s] for s in self.slots]

    @property
    def free_slots(self) -> list[int]:
        """Physical slots no row holds."""
        held = set(self.slots)
        return [s for s in range(len(self._lengths)) if s not in held]

    # ------------------------------------------------------------------ mlx-lm protocol

    def prepare(self, feeds: Sequence[int], width: int) -> None:
        """Announce a step: row i feeds `feeds[i]` tokens of a right-padded input `width` wide (free slots left
        long enough are compacted first, so read `slots` after this)."""
        if len(feeds) != len(self.slots):
            raise ValueError(f"{len(feeds)} feeds for a cache of {len(self.slots)} rows")
        free = len(self._lengths) - len(self.slots)
        self._idle = self._idle + 1 if free else 0
        if free and (self._idle > IDLE_PASSES or free > len(self.slots)):
            self._compact()
        self._feeds = self._by_slot(feeds, 0)
        self.offset = mx.array(self._lengths, dtype=mx.int32)

    def physical(self, feeds: Sequence[Sequence[int]]) -> list[Sequence[int]]:
        """Row feeds laid out by physical slot (a free slot feeds nothing)."""
        return self._by_slot(feeds, ())

    def _by_slot(self, values: Sequence[T], free: T) -> list[T]:
        """Per-row `values` laid out by physical slot, `free` in the free slots."""
        out = [free] * len(self._lengths)
        for slot, value in zip(self.slots, values):
            out[slot] = value
        return out

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        """Write each row's new keys at its own length; return keys up to the longest row's end."""
        batch, heads, width, _ = keys.shape
        end = max(self._lengths, default=0) + width
        self._reserve(keys, values, end)
        assert self.keys is not None and self.values is not None
        at = (self.offset[:, None] + mx.arange(width, dtype=mx.int32)[None])[:, None, :, None]
        self.keys = mx.put_along_axis(self.keys, mx.broadcast_to(at, keys.shape), keys, axis=2)
        self.values = mx.put_along_axis(self.values, mx.broadcast_to(at, values.shape), values, axis=2)
        return self.keys[..., :end, :], self.values[..., :end, :]

    def make_mask(self, width: int, return_array: bool = False, **_: Any) -> mx.array:
        """(B, 1, width, end) bool: query t of row i sees keys 0 .. len_i + t (padding sees garbage, never NaN)."""
        end = max(self._lengths, default=0) + width
        limit = self.offset[:, None] + mx.arange(width, dtype=mx.int32)[None]
        return (mx.arange(end, dtype=mx.int32)[None, None, :] <= limit[:, :, None])[:, None]

    def commit(self) -> None:
        """Advance every row by the tokens it fed in the step just run."""
        self._lengths = [n + f for n, f in zip(self._lengths, self._feeds)]
        self.offset = mx.array(self._lengths, dtype=mx.int32)

    def _reserve(self, keys: mx.array, values: mx.array, end: int) -> None:
        if self.keys is not None and self.keys.shape[2] >= end and self.keys.shape[0] == keys.shape[0]:
            return
        capacity = _capacity(end)
        batch, heads, _, kdim = keys.shape
        vdim = values.shape[3]
        new_keys = mx.zeros((batch, heads, capacity, kdim), keys.dtype)
        new_values = mx.zeros((batch, heads, capacity, vdim), values.dtype)
        if self.keys is not None and self.values is not None:
            kept = min(self.keys.shape[2], capacity)
            new_keys[..., :kept, :] = self.keys[..., :kept, :]
            new_values[..., :kept, :] = self.values[..., :kept, :]
        self.keys, self.values = new_keys, new_values

    # ------------------------------------------------------------------ rows

    @property
    def state(self) -> tuple[mx.array | None, mx.array | None]:
        return self.keys, self.values

    @property
    def nbytes(self) -> int:
        """Bytes held by this layer's arrays."""
        if self.keys is None or self.values is None:
            return 0
        return int(self.keys.nbytes + self.values.nbytes)

    def row(self, index: int, length: int | None = None) -> tuple[mx.array, mx.array]:
        """Row `index`'s keys and values over its first `length` positions (default: all of them), (1, H, L, D)."""
        assert self.keys is not None and self.values is not None
        slot = self.slots[index]
        n = self._lengths[slot] if length is None else length
        return self.keys[slot : slot + 1, :, :n, :], self.values[slot : slot + 1, :, :n, :]

    def keep(self, indices: Sequence[int]) -> None:
        """Keep only the rows at `indices`, in that order; the slots of the rows that left are freed (no copy)."""
        self.slots = [self.slots[i] for i in indices]
        if not self.slots:
            self.keys = self.values = None
            self._lengths, self._idle = [], 0
        else:
            held = set(self.slots)
            self._lengths = [n if s in held else 0 for s, n in enumerate(self._lengths)]
        self.offset = mx.array(self._lengths, dtype=mx.int32)

    def _compact(self) -> None:
        """Gather the held slots into a batch of exactly the rows, in row order."""
        if self.keys is not None and self.values is not None:
            chosen = mx.array(self.slots, dtype=mx.int32)
            self.keys, self.values = self.keys[chosen], self.values[chosen]
        self._lengths = self.lengths
        self.slots = list(range(len(self.slots)))
        self._idle = 0

    def append_rows(self, rows: Sequence[tuple[mx.array, mx.array] | None], lengths: Sequence[int]) -> None:
        """Add rows at the end, each given by its (1, H, L, D) keys and values (None: an empty row); free slots
        are filled first, in place."""
        rows, lengths = list(rows), list(lengths)
        while rows and self.free_slots and self.keys is not None:
            self._fill(self.free_slots[0], rows.pop(0), lengths.pop(0))
        if rows:
            self._append(rows, lengths)

    def _fill(self, slot: int, row: tuple[mx.array, mx.array] | None, length: int) -> None:
        """Write one row into free slot `slot`."""
        assert self.keys is not None and self.values is not None
        if row is not None and length:
            grow = _capacity(length) - self.keys.shape[2]
            if grow > 0:
                self.keys = mx.pad(self.keys, [(0, 0), (0, 0), (0, grow), (0, 0)])
                self.values = mx.pad(self.values, [(0, 0), (0, 0), (0, grow), (0, 0)])
            self.keys[slot : slot + 1, :, :length, :] = row[0][..., :length, :]
            self.values[slot : slot + 1, :, :length, :] = row[1][..., :length, :]
        else:
            length = 0
        self._lengths[slot] = length
        self.slots.append(slot)
        self.offset = mx.array(self._lengths, dtype=mx.int32)

    def _append(self, rows: Sequence[tuple[mx.array, mx.array] | None], lengths: Sequence[int]) -> None:
        """Add rows as new slots at the end of the arrays (one concatenation)."""
        if self.free_slots:
            self._compact()
        filled = [r for r in rows if r is not None]
        template = filled[0] if filled else None
        first = len(self._lengths)
        if template is None and self.keys is None:
            self._lengths += list(lengths)
            self.slots += list(range(first, len(self._lengths)))
            self.offset = mx.array(self._lengths, dtype=mx.int32)
            return
        base_keys = self.keys if self.keys is not None else template[0]  # type: ignore[index]
        base_values = self.values if self.values is not None else template[1]  # type: ignore[index]
        heads, kdim, vdim = base_keys.shape[1], base_keys.shape[3], base_values.shape[3]
        end = max(self._lengths + list(lengths), default=0)
        width = _capacity(max(end, 1))
        blocks_k, blocks_v = [], []
        if self.keys is not None and self.values is not None:
            blocks_k.append(_fit(self.keys, width))
            blocks_v.append(_fit(self.values, width))
        elif self._lengths:  # rows appended before any had keys are empty rows
            blocks_k.append(mx.zeros((len(self._lengths), heads, width, kdim), base_keys.dtype))
            blocks_v.append(mx.zeros((len(self._lengths), heads, width, vdim), base_values.dtype))
        for row, n in zip(rows, lengths):
            if row is None:
                blocks_k.append(mx.zeros((1, heads, width, kdim), base_keys.dtype))
                blocks_v.append(mx.zeros((1, heads, width, vdim), base_values.dtype))
            else:
                blocks_k.append(_fit(row[0][..., :n, :], width))
                blocks_v.append(_fit(row[1][..., :n, :], width))
        self.keys = mx.concatenate(blocks_k, axis=0)
        self.values = mx.concatenate(blocks_v, axis=0)
        self._lengths += list(lengths)
        self.slots += list(range(first, len(self._lengths)))
        self.offset = mx.array(self._lengths, dtype=mx.int32)


def _capacity(end: int) -> int:
    """Positions to allocate for keys up to `end`: rounded up to a multiple of `GROWTH`, so the next steps write
    in place instead of reallocating (and copying) every row."""
    return ((end + GROWTH - 1) // GROWTH) * GROWTH


def _fit(array: mx.array, width: int) -> mx.array:
    """`array` cut or zero-padded along the sequence axis to `width` positions."""
    have = array.shape[2]
    if have >= width:
        return array[..., :width, :]
    return mx.pad(array, [(0, 0), (0, 0), (0, width - have), (0, 0)])
