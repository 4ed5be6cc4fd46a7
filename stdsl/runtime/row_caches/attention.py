"""Attention keys and values of a running batch: one slot per row, each row at its own length, ragged feeds.

mlx-lm's `BatchKVCache` aligns rows on the right (left padding) and appends the same number of
positions to every row, so a step where rows feed different numbers of tokens (a sampled token
plus a forced span of any length) would leave holes inside every shorter row. Here each row
writes its new keys at its own length instead (one scatter per layer), the attention mask lets
query t of row i see keys 0 .. len_i + t, and RoPE positions start at len_i, so a row's cache is
exactly what a single-sequence cache would hold and rows join, leave or are copied out by slicing.

A sliding-window layer (mlx-lm's `RotatingKVCache`) masks keys older than its window: query p sees keys
p - window + 1 .. p, which is what a rotating cache holds, so its rows stay exact under ragged feeds. A row keeps
every position while it may be cut or stored (a prefill, a certified prefix); in the running batch (`bounded`) a row
forgets its oldest positions once it holds `window + GROWTH` of them, keeping the last `window` (all a pass needs),
so a long row costs a window's memory, not its history's. Row i's physical position 0 is then logical position
`starts[i]`; a row that forgot positions can no longer be read whole (`whole`).

A chunked-attention layer (mlx-lm's `ChunkedKVCache`, Llama 4) masks keys outside the query's chunk: query p sees
keys p - p mod chunk .. p, each row from its own length (mlx-lm builds one such mask for the whole batch). It is
also a window of `chunk` positions, which holds every key its queries see, so a running row forgets older ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx

from stdsl.runtime.row_caches.slots import SlotLayout

GROWTH = 256

LayerKV = tuple[mx.array, mx.array]
"""One row's keys and values of an attention layer, (1, H, L, D) each: cut to a prefix by slicing axis 2."""


class RowSlotsCache(SlotLayout):
    """One attention layer's keys and values for B rows, with per-row lengths (mlx-lm's cache protocol);
    `window`: a sliding window's size in positions (None: every earlier position is seen); `chunk`: the size of the
    chunks a chunked-attention layer attends within (None: not chunked)."""

    def __init__(self, lengths: Sequence[int] = (), window: int | None = None, bounded: bool = False,
                 chunk: int | None = None) -> None:
        super().__init__(lengths)
        self.chunk = chunk
        self.keys: mx.array | None = None
        self.values: mx.array | None = None
        self.window = window
        self.bounded = bounded and window is not None
        """Whether rows forget positions older than the window (the running batch's caches)."""
        self._starts: list[int] = [0] * len(self._lengths)
        self._held: mx.array = self.offset
        self._first: mx.array | None = None
        self._end = 0

    # ------------------------------------------------------------------ forgotten positions

    def prepare(self, feeds: Sequence[int], width: int) -> None:
        super().prepare(feeds, width)
        if self.bounded:
            self._forget_old()
        if any(self._starts):
            self._held = mx.array([n - s for n, s in zip(self._lengths, self._starts)], dtype=mx.int32)
            self._first = mx.array(self._starts, dtype=mx.int32)
        else:
            self._held, self._first = self.offset, None

    def _forget_old(self) -> None:
        """Drop each row's positions older than its last `window` once some row holds `window + GROWTH` (one gather
        per layer every GROWTH positions a row advances)."""
        assert self.window is not None
        held = [n - s for n, s in zip(self._lengths, self._starts)]
        if self.keys is None or self.values is None or max(held, default=0) <= self.window + GROWTH:
            return
        starts = [max(s, n - self.window) for n, s in zip(self._lengths, self._starts)]
        shift = mx.array([new - old for new, old in zip(starts, self._starts)], dtype=mx.int32)
        capacity = self.keys.shape[2]
        width = _capacity(max(n - s for n, s in zip(self._lengths, starts)))
        at = mx.minimum(mx.arange(width, dtype=mx.int32)[None] + shift[:, None], capacity - 1)[:, None, :, None]
        self.keys = mx.take_along_axis(self.keys, at, axis=2)
        self.values = mx.take_along_axis(self.values, at, axis=2)
        self._starts = starts

    def whole(self, index: int) -> bool:
        """Whether row `index` still holds every position from the first (it can be read, cut and stored)."""
        return self._starts[self.slots[index]] == 0

    def keep(self, indices: Sequence[int]) -> None:
        super().keep(indices)
        held = set(self.slots)
        self._starts = [s if slot in held else 0 for slot, s in enumerate(self._starts)] if self.slots else []

    def _take_slot(self, slot: int, length: int) -> None:
        self._starts[slot] = 0
        super()._take_slot(slot, length)

    def _add_slots(self, lengths: Sequence[int]) -> None:
        self._starts += [0] * len(lengths)
        super()._add_slots(lengths)

    # ------------------------------------------------------------------ mlx-lm protocol

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        """Write each row's new keys at its own length; return keys up to the longest row's end."""
        batch, heads, width, _ = keys.shape
        end = max((n - s for n, s in zip(self._lengths, self._starts)), default=0) + width
        self._reserve(keys, values, end)
        assert self.keys is not None and self.values is not None
        at = (self._held[:, None] + mx.arange(width, dtype=mx.int32)[None])[:, None, :, None]
        self.keys = mx.put_along_axis(self.keys, mx.broadcast_to(at, keys.shape), keys, axis=2)
        self.values = mx.put_along_axis(self.values, mx.broadcast_to(at, values.shape), values, axis=2)
        self._end = end
        return self.keys[..., :end, :], self.values[..., :end, :]

    def keys_and_values(self) -> LayerKV:
        """Every row's keys and values up to the longest row's end, as the last `update_and_fetch` returned them
        (models that reuse another layer's keys read them so)."""
        assert self.keys is not None and self.values is not None
        return self.keys[..., : self._end, :], self.values[..., : self._end, :]

    def make_mask(self, width: int, return_array: bool = False, window_size: int | None = None,
                  **_: Any) -> mx.array:
        """(B, 1, width, end) bool: query t of row i sees keys 0 .. len_i + t, or only the last `window_size` (the
        model's) or `window` (this layer's) of them, or only those in its `chunk` (padding sees garbage, never NaN)."""
        end = max((n - s for n, s in zip(self._lengths, self._starts)), default=0) + width
        limit = self.offset[:, None] + mx.arange(width, dtype=mx.int32)[None]
        keys = mx.arange(end, dtype=mx.int32)[None, None, :]
        if self._first is not None:
            keys = keys + self._first[:, None, None]
        seen = keys <= limit[:, :, None]
        window = window_size or self.window
        if window:
            seen = seen & (keys > limit[:, :, None] - window)
        if self.chunk:
            seen = seen & (keys // self.chunk == (limit // self.chunk)[:, :, None])
        return seen[:, None]

    def maybe_trim_front(self) -> None:
        """What mlx-lm's Llama 4 asks of a chunked-attention cache before a pass: nothing here (the mask, not the
        cache, keeps keys outside a query's chunk out)."""

    @property
    def start_position(self) -> int:
        """The first position a chunked-attention cache holds, as mlx-lm's Llama 4 reads it: every row holds all."""
        return 0

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
    def nbytes(self) -> int:
        """Bytes held by this layer's arrays."""
        if self.keys is None or self.values is None:
            return 0
        return int(self.keys.nbytes + self.values.nbytes)

    def row(self, index: int, length: int | None = None) -> LayerKV:
        """Row `index`'s keys and values over its first `length` positions (default: all of them), (1, H, L, D)."""
        assert self.keys is not None and self.values is not None
        slot = self.slots[index]
        if self._starts[slot]:
            raise ValueError(f"a sliding-window row has forgotten its first {self._starts[slot]} positions")
        n = self._lengths[slot] if length is None else length
        return self.keys[slot : slot + 1, :, :n, :], self.values[slot : slot + 1, :, :n, :]

    def arrays(self) -> list[mx.array]:
        """The arrays a pass writes (to evaluate with its logits)."""
        return [a for a in (self.keys, self.values) if a is not None]

    def cut(self, index: int, count: int) -> None:
        if count and self._starts[self.slots[index]]:
            raise ValueError("a sliding-window row that forgot its oldest positions cannot be cut")
        super().cut(index, count)

    def _gather(self, chosen: mx.array) -> None:
        self._starts = [self._starts[slot] for slot in self.slots]  # `chosen` is the held slots (`compact`)
        if self.keys is not None and self.values is not None:
            self.keys, self.values = self.keys[chosen], self.values[chosen]

    def _clear(self) -> None:
        self.keys = self.values = None
        self._starts = []

    def append_rows(self, rows: Sequence[LayerKV | None], lengths: Sequence[int]) -> None:
        """Add rows at the end, each given by its (1, H, L, D) keys and values (None: an empty row); free slots
        are filled first, in place."""
        rows, lengths = list(rows), list(lengths)
        while rows and self.free_slots and self.keys is not None:
            self._fill(self.free_slots[0], rows.pop(0), lengths.pop(0))
        if rows:
            self._append(rows, lengths)

    def _fill(self, slot: int, row: LayerKV | None, length: int) -> None:
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
        self._take_slot(slot, length)

    def _append(self, rows: Sequence[LayerKV | None], lengths: Sequence[int]) -> None:
        """Add rows as new slots at the end of the arrays (one concatenation)."""
        if self.free_slots:
            self.compact()
        filled = [r for r in rows if r is not None]
        template = filled[0] if filled else None
        if template is None and self.keys is None:
            self._add_slots(lengths)
            return
        base_keys = self.keys if self.keys is not None else template[0]  # type: ignore[index]
        base_values = self.values if self.values is not None else template[1]  # type: ignore[index]
        heads, kdim, vdim = base_keys.shape[1], base_keys.shape[3], base_values.shape[3]
        end = max([n - s for n, s in zip(self._lengths, self._starts)] + list(lengths), default=0)
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
        self._add_slots(lengths)


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
