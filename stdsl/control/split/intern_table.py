"""One object per equal value (interning), emptied when full, counted in `stdsl.caches` and emptied by its clear().

The boundary cover meets the same lookaheads and lookahead parts across states and grammars; keeping one object
per value saves their memory and makes later dictionary lookups by them cheap.  The table sits on the cover's hot
path, so it is a plain dictionary (each read and write one dictionary operation, safe between threads), registered
with the cache registry rather than made of registry entries.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from stdsl import caches
from stdsl.errors import OptionError

T = TypeVar("T", bound=Hashable)


class InternTable(Generic[T]):
    """At most `max_values` values, one object each; `value_nbytes` is what one is counted as holding."""

    def __init__(self, name: str, max_values: int, value_nbytes: int) -> None:
        if max_values < 1:
            raise OptionError("max_values", f"intern table {name!r}: max_values must be >= 1, got {max_values}")
        self.max_values = max_values
        self.value_nbytes = value_nbytes
        self._values: dict[T, T] = {}
        self._hits = self._misses = self._evictions = 0
        caches.register(name, self)

    def intern(self, value: T) -> T:
        """The one object equal to `value` (`value` itself the first time)."""
        hit = self._values.get(value)
        if hit is not None:
            self._hits += 1
            return hit
        self._misses += 1
        if len(self._values) >= self.max_values:
            self._evictions += len(self._values)
            self._values.clear()
        self._values[value] = value
        return value

    def cache_stats(self) -> caches.CacheStats:
        """Values held, their estimated bytes, and lookups so far."""
        held = len(self._values)
        return caches.CacheStats(held, held * self.value_nbytes, self._hits, self._misses, self._evictions)

    def clear(self) -> None:
        """Forget every value."""
        self._values.clear()

    def __len__(self) -> int:
        return len(self._values)
