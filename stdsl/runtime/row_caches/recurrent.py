"""Recurrent states of a running batch (mlx-lm's `ArraysCache`: Gated DeltaNet, Mamba, short convolutions), one slot
per row, fed ragged spans without letting padding in.

A pass right-pads the rows' feeds to one width. During it `lengths` holds each slot's real token count, which
the models that batch right-padded rows read (mlx-lm's `cache.lengths`, `make_mask`): padded positions leave the
state as it was, and a row that feeds nothing keeps its state. Whether a model honours this is measured when its
caches are built (`load_probe.py`), not assumed; a model that scans padding into its state is fed uniform passes
instead (`uniform_feeds.py`), where a slot that feeds nothing gets its state back after the pass (`keep_idle`). A
state summarises its whole prefix and cannot be cut, so a row's `RecurrentState` holds exactly its length; the
prompt cache reuses it only for that exact sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from stdsl.runtime.platform.mlx_lm_models import cache as mlx_cache
from stdsl.runtime.row_caches.slots import SlotLayout


@dataclass(frozen=True, eq=False)
class RecurrentState:
    """One row's recurrent arrays (each (1, ...), None where the model has not written one) after exactly `length`
    positions."""

    arrays: tuple[mx.array | None, ...]
    length: int

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays if a is not None)


class RowStatesCache(SlotLayout, mlx_cache.ArraysCache):
    """One recurrent layer's `size` state arrays for B rows (batch first, by physical slot), with mlx-lm's
    `ArraysCache` protocol: indexing, `lengths` and `make_mask` during a pass, `advance`. It is an `ArraysCache`,
    so a model that writes its state only into one (mlx-lm's Mamba checks) writes it here."""

    def __init__(self, size: int, lengths: Sequence[int] = ()) -> None:
        SlotLayout.__init__(self, lengths)
        # mlx-lm's ArraysCache is untyped: its __init__ leaves mypy believing these hold only None
        self.cache: list[mx.array | None] = [None] * size  # type: ignore[assignment]
        self.lengths: mx.array | None = None  # type: ignore[assignment]
        self.left_padding: mx.array | None = None
        self.keep_idle = False
        """Whether a slot that feeds nothing in a pass gets back the state it had before it (for models that scan
        padding into their states: `uniform_feeds.py`)."""
        self._before: list[mx.array | None] | None = None

    # ------------------------------------------------------------------ mlx-lm protocol

    def __getitem__(self, index: int) -> mx.array | None:
        return self.cache[index]

    def __setitem__(self, index: int, value: mx.array) -> None:
        self.cache[index] = value

    def prepare(self, feeds: Sequence[int], width: int) -> None:  # type: ignore[override]
        super().prepare(feeds, width)
        self.lengths = mx.array(self._feeds, dtype=mx.int32)
        self._before = list(self.cache) if self.keep_idle and 0 in self._feeds else None

    def commit(self) -> None:
        if self._before is not None:
            idle = mx.array([feed == 0 for feed in self._feeds])
            self.cache = [_kept(idle, before, after) for before, after in zip(self._before, self.cache)]
            self._before = None
        super().commit()
        self.lengths = None

    def make_mask(self, N: int, **_: Any) -> mx.array | None:  # noqa: N803 (mlx-lm's name)
        """(B, N) bool: which input positions are a row's real tokens (padding leaves the state alone); None when
        every slot feeds all N (no padding: the model's unmasked path, which skips a select per position)."""
        if self.lengths is None or all(feed == N for feed in self._feeds):
            return None
        return mx.arange(N)[None] < self.lengths[:, None]

    def advance(self, count: int) -> None:
        """What mlx-lm's models call after consuming `count` positions (the remaining real tokens shrink)."""
        if self.lengths is not None:
            self.lengths = self.lengths - count

    def empty(self) -> bool:
        return self.cache[0] is None

    @property
    def batch_size(self) -> int:
        return len(self._lengths)

    # ------------------------------------------------------------------ rows

    @property
    def nbytes(self) -> int:
        """Bytes held by this layer's arrays."""
        return sum(int(a.nbytes) for a in self.cache if a is not None)

    def arrays(self) -> list[mx.array]:
        """The arrays a pass writes (to evaluate with its logits)."""
        return [a for a in self.cache if a is not None]

    def cut(self, index: int, count: int) -> None:
        """A state cannot forget its last positions: only cutting nothing is allowed."""
        if count:
            raise ValueError("a recurrent state cannot be cut to a shorter prefix")

    def row(self, index: int, length: int | None = None) -> RecurrentState:
        """Row `index`'s state; `length`, if given, must be the row's length (a state cannot be cut)."""
        slot = self.slots[index]
        if length is not None and length != self._lengths[slot]:
            raise ValueError(f"a recurrent state holds {self._lengths[slot]} positions and cannot be cut to {length}")
        return RecurrentState(tuple(None if a is None else a[slot : slot + 1] for a in self.cache), self._lengths[slot])

    def append_rows(self, rows: Sequence[RecurrentState | None], lengths: Sequence[int]) -> None:
        """Add rows, each given by its state at exactly its length (None: an empty row); free slots are filled
        first, in place."""
        rows, lengths = list(rows), list(lengths)
        for row, length in zip(rows, lengths):
            if (row.length if row is not None else 0) != length:
                raise ValueError(f"a recurrent state of {row.length if row else 0} positions cannot start a row "
                                 f"at {length}")
        while rows and self.free_slots:
            slot = self.free_slots[0]
            row = rows.pop(0)
            for i, array in enumerate(self.cache):
                shape = _shape(array, row, i)
                if array is not None and shape is not None:
                    array[slot : slot + 1] = _row_array(row, i, shape, array.dtype)
                elif shape is not None:
                    self.cache[i] = self._grown(i, row)
            self._take_slot(slot, lengths.pop(0))
        if rows:
            self._append(rows, lengths)

    def _append(self, rows: list[RecurrentState | None], lengths: list[int]) -> None:
        """Add rows as new slots at the end of the arrays (one concatenation per array)."""
        if self.free_slots:
            self.compact()
        have = len(self._lengths)
        for i, array in enumerate(self.cache):
            known = next((a for a in [array, *(r.arrays[i] for r in rows if r is not None)] if a is not None), None)
            if known is None:
                continue
            shape, dtype = tuple(known.shape[1:]), known.dtype
            blocks = [array if array is not None else mx.zeros((have, *shape), dtype)]
            blocks += [_row_array(row, i, shape, dtype) for row in rows]
            self.cache[i] = mx.concatenate(blocks, axis=0) if blocks[0].shape[0] else mx.concatenate(blocks[1:])
        self._add_slots(lengths)

    def _grown(self, index: int, row: RecurrentState | None) -> mx.array:
        """Array `index` for every slot, zeros but `row`'s own in the slot it is joining (the first free one)."""
        known = row.arrays[index] if row is not None else None
        if known is None:
            raise ValueError("a state array can only be grown from a joining row that holds it")
        out = mx.zeros((len(self._lengths), *known.shape[1:]), known.dtype)
        out[self.free_slots[0] : self.free_slots[0] + 1] = known
        return out

    def _gather(self, chosen: mx.array) -> None:
        self.cache = [None if a is None else a[chosen] for a in self.cache]

    def _clear(self) -> None:
        self.cache = [None] * len(self.cache)


def _kept(idle: mx.array, before: mx.array | None, after: mx.array | None) -> mx.array | None:
    """State array `after` a pass, with the `idle` slots' rows as they were `before` it (zeros where it had none)."""
    if after is None or after is before:
        return after
    if before is not None and before.shape != after.shape:
        raise ValueError(f"a recurrent state changed shape in a pass ({before.shape} to {after.shape}), so an idle "
                         "row's cannot be put back")
    was = before if before is not None else mx.zeros_like(after)
    return mx.where(idle.reshape(-1, *[1] * (after.ndim - 1)), was, after)


def _shape(array: mx.array | None, row: RecurrentState | None, index: int) -> tuple[int, ...] | None:
    """The per-row shape of state array `index`, from the batch's array or the joining row's (None: neither)."""
    if array is not None:
        return tuple(array.shape[1:])
    own = row.arrays[index] if row is not None else None
    return tuple(own.shape[1:]) if own is not None else None


def _row_array(row: RecurrentState | None, index: int, shape: tuple[int, ...], dtype: Any) -> mx.array:
    """A joining row's state array `index`, (1, *shape): its own, or zeros (the state a model starts from)."""
    own = row.arrays[index] if row is not None else None
    return own if own is not None else mx.zeros((1, *shape), dtype)
