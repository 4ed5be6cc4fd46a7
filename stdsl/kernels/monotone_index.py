"""A non-decreasing array of indices stored in 16 bits per entry, whatever its largest value.

The trie's parent and end-node arrays are non-decreasing (nodes are ordered by parent), so their
high 16 bits only step up: `MonotoneIndex` keeps the low 16 bits and, per value of the high bits,
where that run starts.  Gathers and binary searches run run by run on the uint16 parts, so a level
indexing 94,767 nodes costs 2 bytes per entry instead of 4, with no pass to widen it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stdsl.errors import StdslError

LOW_BITS = 16
RUN_KEYS = np.arange(1, 257, dtype=np.int64) << LOW_BITS


@dataclass(frozen=True)
class MonotoneIndex:
    """Entries `(k << 16) + low[i]` for i in `starts[k]:starts[k+1]`; `starts` has one run per high part."""

    low: np.ndarray
    starts: np.ndarray

    @staticmethod
    def of(values: np.ndarray) -> MonotoneIndex:
        """The compact form of a non-decreasing array of non-negative integers."""
        values = np.asarray(values, dtype=np.int64).reshape(-1)
        if values.size and (int(values[0]) < 0 or bool(np.any(np.diff(values) < 0))):
            raise StdslError("MonotoneIndex: the values must be non-negative and non-decreasing")
        runs = (int(values[-1]) >> LOW_BITS) + 1 if values.size else 1
        starts = np.searchsorted(values >> LOW_BITS, np.arange(runs + 1), side="left").astype(np.int64)
        return MonotoneIndex((values & 0xFFFF).astype(np.uint16), starts)

    @property
    def size(self) -> int:
        """Number of entries."""
        return int(self.low.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by the low parts and the run starts."""
        return int(self.low.nbytes + self.starts.nbytes)

    def values(self) -> np.ndarray:
        """The full entries as int32 (a fresh array)."""
        out = self.low.astype(np.int32)
        for k in range(1, self.starts.shape[0] - 1):
            out[self.starts[k] : self.starts[k + 1]] += k << LOW_BITS
        return out

    def take(self, source: np.ndarray) -> np.ndarray:
        """`source[entries]`, gathered run by run."""
        if self.starts.shape[0] == 2:
            return np.take(source, self.low)
        out = np.empty(self.size, dtype=source.dtype)
        for k in range(self.starts.shape[0] - 1):
            a, b = int(self.starts[k]), int(self.starts[k + 1])
            if b > a:
                np.take(source[k << LOW_BITS :], self.low[a:b], out=out[a:b], mode="clip")
        return out

    def ranges(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first position, count) of each of the sorted non-negative `keys` among the entries
        (np.searchsorted left, and right minus left), searched run by run."""
        runs = self.starts.shape[0] - 1
        if not keys.shape[0] or (runs == 1 and int(keys[-1]) < 1 << LOW_BITS):
            part = keys.astype(np.uint16)
            left = np.searchsorted(self.low, part, side="left")
            return left, np.searchsorted(self.low, part, side="right") - left
        high = int(keys[0]) >> LOW_BITS
        if high < runs and int(keys[-1]) >> LOW_BITS == high:
            a, b = int(self.starts[high]), int(self.starts[high + 1])
            part = (keys - (high << LOW_BITS)).astype(np.uint16) if high else keys.astype(np.uint16)
            run = self.low[a:b]
            left = np.searchsorted(run, part, side="left")
            return left + a, np.searchsorted(run, part, side="right") - left
        ends = RUN_KEYS[:runs] if runs <= RUN_KEYS.shape[0] else np.arange(1, runs + 1, dtype=np.int64) << LOW_BITS
        bounds = np.searchsorted(keys, ends, side="left").tolist()
        firsts: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        lo = 0
        for k, hi in enumerate(bounds):
            if hi > lo:
                a, b = int(self.starts[k]), int(self.starts[k + 1])
                part = (keys[lo:hi] - (k << LOW_BITS)).astype(np.uint16)
                run = self.low[a:b]
                left = np.searchsorted(run, part, side="left")
                firsts.append(left + a)
                counts.append(np.searchsorted(run, part, side="right") - left)
            lo = hi
        if lo < keys.shape[0]:
            firsts.append(np.full(keys.shape[0] - lo, self.size, dtype=np.int64))
            counts.append(np.zeros(keys.shape[0] - lo, dtype=np.int64))
        return np.concatenate(firsts), np.concatenate(counts)
