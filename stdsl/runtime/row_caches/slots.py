"""Which physical slot of a layer's arrays holds which row, and how many positions each row has seen.

Rows are logical (the caller's order); each sits in a physical slot. A row that leaves frees its slot
without copying the others, and a row that joins is written into a free slot, so a server whose requests
come and go does not copy the whole batch at every arrival and departure. A free slot still costs its share
of each pass, so slots left free for `IDLE_PASSES` passes (or more free slots than rows) are compacted away
in one gather. Every layer kind keeps the same layout by the same rule, so all layers of a model agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import mlx.core as mx

T = TypeVar("T")

IDLE_PASSES = 6
"""Passes a free slot may ride along before the slots are compacted (a free slot costs about 1/B of a pass; a
compaction copies every row once, about one pass at 8 rows of a thousand positions on SmolLM2)."""


class SlotLayout:
    """Rows in physical slots with per-slot lengths; a layer kind gathers its arrays in `_gather` on compaction.

    `prepare(feeds, width)` must be called before a forward over the (slots, T) input `physical(feeds)` gives,
    where row i holds `feeds[i]` real tokens (right-padded); `commit()` after it advances each row by its count.
    """

    def __init__(self, lengths: Sequence[int] = ()) -> None:
        self._lengths: list[int] = list(lengths)
        self.slots: list[int] = list(range(len(self._lengths)))
        self._feeds: list[int] = []
        self._idle = 0
        self.offset: mx.array = mx.array(self._lengths, dtype=mx.int32)

    @property
    def row_lengths(self) -> list[int]:
        """Each row's cached positions, in row order."""
        return [self._lengths[s] for s in self.slots]

    @property
    def free_slots(self) -> list[int]:
        """Physical slots no row holds."""
        held = set(self.slots)
        return [s for s in range(len(self._lengths)) if s not in held]

    def prepare(self, feeds: Sequence[int], width: int) -> None:
        """Announce a step: row i feeds `feeds[i]` tokens of a right-padded input `width` wide (free slots left
        long enough are compacted first, so read `slots` after this)."""
        if len(feeds) != len(self.slots):
            raise ValueError(f"{len(feeds)} feeds for a cache of {len(self.slots)} rows")
        free = len(self._lengths) - len(self.slots)
        self._idle = self._idle + 1 if free else 0
        if free and (self._idle > IDLE_PASSES or free > len(self.slots)):
            self.compact()
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

    def commit(self) -> None:
        """Advance every row by the tokens it fed in the step just run."""
        self._lengths = [n + f for n, f in zip(self._lengths, self._feeds)]
        self.offset = mx.array(self._lengths, dtype=mx.int32)

    def keep(self, indices: Sequence[int]) -> None:
        """Keep only the rows at `indices`, in that order; the slots of the rows that left are freed (no copy)."""
        self.slots = [self.slots[i] for i in indices]
        if not self.slots:
            self._clear()
            self._lengths, self._idle = [], 0
        else:
            held = set(self.slots)
            self._lengths = [n if s in held else 0 for s, n in enumerate(self._lengths)]
        self.offset = mx.array(self._lengths, dtype=mx.int32)

    def cut(self, index: int, count: int) -> None:
        """Forget row `index`'s last `count` positions (a later pass writes over them)."""
        slot = self.slots[index]
        if not 0 <= count <= self._lengths[slot]:
            raise ValueError(f"cannot cut {count} of a row's {self._lengths[slot]} positions")
        self._lengths[slot] -= count
        self.offset = mx.array(self._lengths, dtype=mx.int32)

    def compact(self) -> None:
        """Gather the held slots into a batch of exactly the rows, in row order."""
        self._gather(mx.array(self.slots, dtype=mx.int32))
        self._lengths = self.row_lengths
        self.slots = list(range(len(self.slots)))
        self._idle = 0

    def _take_slot(self, slot: int, length: int) -> None:
        """Record that a joining row now holds free slot `slot` at `length` positions."""
        self._lengths[slot] = length
        self.slots.append(slot)
        self.offset = mx.array(self._lengths, dtype=mx.int32)

    def _add_slots(self, lengths: Sequence[int]) -> None:
        """Record new slots at the end of the arrays, one per joining row."""
        first = len(self._lengths)
        self._lengths += list(lengths)
        self.slots += list(range(first, len(self._lengths)))
        self.offset = mx.array(self._lengths, dtype=mx.int32)

    def _gather(self, chosen: mx.array) -> None:
        """Keep only the physical slots `chosen` of the arrays, in that order."""
        raise NotImplementedError

    def _clear(self) -> None:
        """Drop the arrays (no row is left)."""
        raise NotImplementedError
