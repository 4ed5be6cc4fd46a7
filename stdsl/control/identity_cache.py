"""Values built once per combination of live objects (automaton and vocabulary, tokenizer), kept for the last few."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """Values keyed by the identity of some objects (plus plain hashable extras), oldest dropped past `size`.

    The objects are kept beside the value, so a new object that reuses a dead one's id is never
    served the dead one's value. Safe to share between threads (the engine's and its callers').
    """

    def __init__(self, size: int | None = None) -> None:
        self.size = size
        self._entries: dict[tuple[Hashable, ...], tuple[tuple[Any, ...], V]] = {}
        self._lock = threading.RLock()

    def get(self, owners: tuple[Any, ...], build: Callable[[], V], extra: tuple[Hashable, ...] = ()) -> V:
        """The value for `owners` (and `extra`), built by `build()` on first use."""
        key = tuple(id(owner) for owner in owners) + extra
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and all(kept is owner for kept, owner in zip(hit[0], owners)):
                return hit[1]
            self._entries.pop(key, None)
            if self.size is not None and len(self._entries) >= self.size:
                self._entries.pop(next(iter(self._entries)))
            value = build()
            self._entries[key] = (owners, value)
            return value

    def __len__(self) -> int:
        return len(self._entries)
