"""The KV cache of a running batch: one slot per row, each row at its own length, ragged feeds per step.

mlx-lm's `BatchKVCache` aligns rows on the right (left padding) and appends the same number of
positions to every row, so a step where rows feed different numbers of tokens (a sampled token
plus a forced span of any length) would leave holes inside every shorter row. Here each row
writes its new keys at its own length instead (one scatter per layer), the attention mask lets
query t of row i see keys 0 .. len_i + t, and RoPE positions start at len_i, so a row's cache is
exactly what a single-sequence cache would hold and rows join, leave or are copied out by slicing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx

GROWTH = 256


class RowSlotsCache:
    """One attention layer's keys and values for B rows, with per-row lengths (mlx-lm's cache protocol).

    `prepare(feeds)` must be called before a forward over a (B, T) input whose row i holds
    `feeds[i]` real tokens (right-padded); `commit()` after it advances each row by its count.
    """

    def __init__(self, lengths: Sequence[int] = ()) -> None:
        self.keys: mx.array | None = None
        self.values: mx.array | None = None
        self.lengths: list[int] = list(lengths)
        self._feeds: list[int] = []
        self.offset: mx.array = mx.array(self.lengths, dtype=mx.int32)

    # ------------------------------------------------------------------ mlx-lm protocol

    def prepare(self, feeds: Sequence[int], width: int) -> None:
        """Announce a step: row i feeds `feeds[i]` tokens of a right-padded input `width` wide."""
        if len(feeds) != len(self.lengths):
            raise ValueError(f"{len(feeds)} feeds for a cache of {len(self.lengths)} rows")
        self._feeds = list(feeds)
        self.offset = mx.array(self.lengths, dtype=mx.int32)

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        """Write each row's new keys at its own length; return keys up to the longest row's end."""
        batch, heads, width, _ = keys.shape
        end = max(self.lengths, default=0) + width
        self._reserve(keys, values, end)
        assert self.keys is not None and self.values is not None
        at = (self.offset[:, None] + mx.arange(width, dtype=mx.int32)[None])[:, None, :, None]
        self.keys = mx.put_along_axis(self.keys, mx.broadcast_to(at, keys.shape), keys, axis=2)
        self.values = mx.put_along_axis(self.values, mx.broadcast_to(at, values.shape), values, axis=2)
        return self.keys[..., :end, :], self.values[..., :end, :]

    def make_mask(self, width: int, return_array: bool = False, **_: Any) -> mx.array:
        """(B, 1, width, end) bool: query t of row i sees keys 0 .. len_i + t (padding sees garbage, never NaN)."""
        end = max(self.lengths, default=0) + width
        limit = self.offset[:, None] + mx.arange(width, dtype=mx.int32)[None]
        return (mx.arange(end, dtype=mx.int32)[None, None, :] <= limit[:, :, None])[:, None]

    def commit(self) -> None:
        """Advance every row by the tokens it fed in the step just run."""
        self.lengths = [n + f for n, f in zip(self.lengths, self._feeds)]
        self.offset = mx.array(self.lengths, dtype=mx.int32)

    def _reserve(self, keys: mx.array, values: mx.array, end: int) -> None:
        if self.keys is not None and self.keys.shape[2] >= end and self.keys.shape[0] == keys.shape[0]:
            return
        capacity = ((end + GROWTH - 1) // GROWTH) * GROWTH
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
        n = self.lengths[index] if length is None else length
        return self.keys[index : index + 1, :, :n, :], self.values[index : index + 1, :, :n, :]

    def keep(self, indices: Sequence[int]) -> None:
        """Keep only the rows at `indices`, in that order (rows that left are dropped)."""
        self.lengths = [self.lengths[i] for i in indices]
        self.offset = mx.array(self.lengths, dtype=mx.int32)
        if self.keys is None or self.values is None:
            return
        if not indices:
            self.keys = self.values = None
            return
        chosen = mx.array(list(indices), dtype=mx.int32)
        end = max(self.lengths)
        self.keys = self.keys[chosen, :, :end, :]
        self.values = self.values[chosen, :, :end, :]

    def append_rows(self, rows: Sequence[tuple[mx.array, mx.array] | None], lengths: Sequence[int]) -> None:
        """Add rows at the end, each given by its (1, H, L, D) keys and values (None: an empty row)."""
        filled = [r for r in rows if r is not None]
        template = filled[0] if filled else None
        if template is None and self.keys is None:
            self.lengths += list(lengths)
            self.offset = mx.array(self.lengths, dtype=mx.int32)
            return
        base_keys = self.keys if self.keys is not None else template[0]  # type: ignore[index]
        base_values = self.values if self.values is not None else template[1]  # type: ignore[index]
        heads, kdim, vdim = base_keys.shape[1], base_keys.shape[3], base_values.shape[3]
        end = max(self.lengths + list(lengths), default=0)
        width = max(end, 1)
        blocks_k, blocks_v = [], []
        if self.keys is not None and self.values is not None:
            blocks_k.append(_fit(self.keys, width))
            blocks_v.append(_fit(self.values, width))
        elif self.lengths:  # rows appended before any had keys are empty rows
            blocks_k.append(mx.zeros((len(self.lengths), heads, width, kdim), base_keys.dtype))
            blocks_v.append(mx.zeros((len(self.lengths), heads, width, vdim), base_values.dtype))
        for row, n in zip(rows, lengths):
            if row is None:
                blocks_k.append(mx.zeros((1, heads, width, kdim), base_keys.dtype))
                blocks_v.append(mx.zeros((1, heads, width, vdim), base_values.dtype))
            else:
                blocks_k.append(_fit(row[0][..., :n, :], width))
                blocks_v.append(_fit(row[1][..., :n, :], width))
        self.keys = mx.concatenate(blocks_k, axis=0)
        self.values = mx.concatenate(blocks_v, axis=0)
        self.lengths += list(lengths)
        self.offset = mx.array(self.lengths, dtype=mx.int32)


def _fit(array: mx.array, width: int) -> mx.array:
    """`array` cut or zero-padded along the sequence axis to `width` positions."""
    have = array.shape[2]
    if have >= width:
        return array[..., :width, :]
    return mx.pad(array, [(0, 0), (0, 0), (0, width - have), (0, 0)])
