"""One registry for every memo stdsl keeps between calls: one byte budget, least recently used entries dropped first.

Compiled constraints, vocabularies, shared row tables, spellings, split memos, composed constraints: each is an
entry of a named kind (`kind(name)`), keyed by live objects (by identity; held through weak references where they
allow one, so the entry dies with its object) plus plain hashable values.  A cache that keeps its own entries (an
engine's prompt cache) is `register`ed: its bytes count against the budget and `clear()` empties it too.

    import stdsl
    stdsl.caches.set_budget(256 << 20)   # bytes, all kinds together
    stdsl.caches.stats()                 # {kind: CacheStats(entries, bytes, hits, misses, evictions)}
    stdsl.caches.clear()

Sizes: a value's `nbytes` (numpy arrays and stdsl's tables say what they hold), or the kind's `size` function.
Values whose class computes `nbytes` (a property) and kinds with a `size` function may grow with use: their bytes
are read again at `stats()`, `set_budget()` and, at most once every `REMEASURE_SECONDS`, when something is
stored; the budget and each kind's bounds hold after each of these (between them a table may pass them by what
it grew).  A class whose `nbytes` never changes once built (an automaton) says so with `NBYTES_FIXED = True`.
Those and any other value are measured once, when stored; one with no `nbytes` is estimated as `sys.getsizeof`
of it and of what it holds two levels down.  An entry whose value keeps its key object alive (a planner keeps its
tokenizer) cannot die with it; it goes when evicted.

Thread-safe: one lock guards the entries, and a value is built outside it, once per key (concurrent callers of
one key wait for the first build; other keys build in parallel; a build that asks for its own key gets a value
built afresh, not a deadlock).  Imports nothing from stdsl but its errors, so every layer can use it.
"""

from __future__ import annotations

import operator
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

from stdsl.errors import OptionError

V = TypeVar("V")
Key = tuple[Hashable, ...]

DEFAULT_BUDGET = 1 << 30
"""Bytes all entries and registered caches may hold together before the least recently used entries go."""
REMEASURE_SECONDS = 1.0
"""How often, at most, storing an entry reads again the sizes of the entries that may grow."""


@dataclass
class CacheStats:
    """What one kind holds and has done: entries and bytes held now, lookups served (hits), builds (misses), drops."""

    entries: int = 0
    bytes: int = 0
    hits: int = 0
    misses: int = 0
    evictions: int = 0

    def __iadd__(self, other: CacheStats) -> CacheStats:
        self.entries += other.entries
        self.bytes += other.bytes
        self.hits += other.hits
        self.misses += other.misses
        self.evictions += other.evictions
        return self


class RegisteredCache(Protocol):
    """A cache that keeps its own entries (and its own bound) but reports to the registry and empties on `clear()`."""

    def cache_stats(self) -> CacheStats: ...

    def clear(self) -> None: ...


def estimate_nbytes(value: Any, depth: int = 2) -> int:
    """Bytes `value` holds: its `nbytes` where it has one, else `sys.getsizeof` of it and its contents `depth` deep."""
    nbytes = getattr(value, "nbytes", None)
    if nbytes is not None and not callable(nbytes):
        return int(operator.index(nbytes))
    size = sys.getsizeof(value)
    if depth <= 0 or isinstance(value, (str, bytes, bytearray, int, float)):
        return size
    items: Iterable[Any]
    if isinstance(value, dict):
        items = (item for pair in value.items() for item in pair)
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    elif isinstance(getattr(value, "__dict__", None), dict):
        items = vars(value).values()
    else:
        return size
    return size + sum(estimate_nbytes(item, depth - 1) for item in items)


def _live_size(value: Any, size: Callable[[Any], int] | None) -> Callable[[], int] | None:
    """How to re-read the bytes of an entry that may grow: its kind's `size`, or its class's `nbytes` property
    (None: an array, a value whose class says its `nbytes` is fixed, or another value, measured once when stored)."""
    if size is not None:
        return lambda: int(size(value))
    kind = type(value)
    if isinstance(getattr(kind, "nbytes", None), property) and not getattr(kind, "NBYTES_FIXED", False):
        return lambda: int(operator.index(value.nbytes))
    return None


class _Entry:
    """One stored value: its key and kind, its owners (weakly where possible), its bytes, and how to re-read them."""

    __slots__ = ("key", "kind", "owners", "value", "nbytes", "measure")

    def __init__(self, key: Key, kind: CacheKind[Any], owners: tuple[Any, ...], value: Any, nbytes: int,
                 measure: Callable[[], int] | None) -> None:
        self.key = key
        self.kind = kind
        self.owners = owners
        self.value = value
        self.nbytes = nbytes
        self.measure = measure

    def holds(self, owners: tuple[Any, ...]) -> bool:
        """Whether this entry was stored for exactly these live objects (not dead ones whose ids were reused)."""
        kept = self.owners
        if len(kept) == 1:
            return kept[0]() is owners[0]
        return all(ref() is owner for ref, owner in zip(kept, owners))

    def dead(self) -> bool:
        """Whether an object it is keyed by has died."""
        return any(ref() is None for ref in self.owners)


class _Strong:
    """An owner that takes no weak reference (a list, a tuple), held as it is, called like a weak reference."""

    __slots__ = ("owner",)

    def __init__(self, owner: Any) -> None:
        self.owner = owner

    def __call__(self) -> Any:
        return self.owner


class CacheRegistry:
    """Every entry of every kind, least recently used first, under one byte budget (see the module docstring).

    Sizes are read outside the lock (a table's `nbytes` may take the table's own lock), so no other lock is
    ever taken while this one is held; what is dropped is let go of after it is released, so nothing a value's
    destructor does can wait on it.  Each operation costs O(1) plus the entries it evicts, plus one size read
    per entry that can grow when something is stored.
    """

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = _checked_budget(budget)
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self._growing: dict[Key, _Entry] = {}
        """The entries whose size is read again (by `nbytes` or their kind's `size`)."""
        self._bytes = 0
        self._registered_bytes = 0
        self._next_remeasure = 0.0
        self._building: dict[Key, tuple[threading.Lock, int]] = {}
        """Keys being built now: a lock the builder holds until the value is stored, and the builder's thread."""
        self._kinds: weakref.WeakSet[CacheKind[Any]] = weakref.WeakSet()
        self._bounded_kinds: weakref.WeakSet[CacheKind[Any]] = weakref.WeakSet()
        """The kinds with bounds of their own, which every store checks: iterating all the kinds' weak set on each
        store was most of a store's cost (a cold 128-tool list stores some 650 entries)."""
        self._registered: list[tuple[str, weakref.ref[Any]]] = []
        self._dead: list[Key] = []
        self._next_kind = 0

    def set_budget(self, nbytes: int) -> None:
        """Hold at most `nbytes` bytes from now on (least recently used entries go at once when over)."""
        budget = _checked_budget(nbytes)
        self._remeasure()
        with self._lock:
            self.budget = budget
            dropped = self._fit(None)
        del dropped

    def kind(self, name: str, *, max_entries: int | None = None, max_bytes: int | None = None,
             size: Callable[[Any], int] | None = None) -> CacheKind[Any]:
        """A new kind of entry named `name` in this registry (see `CacheKind`)."""
        return CacheKind(name, max_entries=max_entries, max_bytes=max_bytes, size=size, registry=self)

    def register(self, name: str, cache: RegisteredCache) -> None:
        """Count `cache` (held weakly) under kind `name`: its bytes against the budget, its stats in `stats()`,
        and empty it on `clear()`."""
        with self._lock:
            self._registered = [(n, ref) for n, ref in self._registered if ref() is not None]
            self._registered.append((name, weakref.ref(cache)))

    def stats(self) -> dict[str, CacheStats]:
        """Per kind name: entries, bytes (re-read now, least recently used entries evicted first if grown past the
        budget), hits, misses and evictions so far."""
        registered = self._remeasure()
        out: dict[str, CacheStats] = {}
        with self._lock:
            dropped = self._fit(None)
            for kind in list(self._kinds):
                out.setdefault(kind.name, CacheStats()).__iadd__(kind._counters())
        del dropped
        for name, stats in registered:
            out.setdefault(name, CacheStats()).__iadd__(stats)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held now by every entry and registered cache."""
        return sum(stats.bytes for stats in self.stats().values())

    def clear(self) -> None:
        """Drop every entry of every kind and empty every registered cache (counters of hits and misses stay)."""
        with self._lock:
            dropped = [self._drop(key) for key in list(self._entries)]
            caches = self._live_registered()
        del dropped
        for _, cache in caches:
            cache.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _adopt(self, kind: CacheKind[Any]) -> int:
        """Count a new kind in `stats()`; its id, which prefixes its keys."""
        with self._lock:
            self._next_kind += 1
            self._kinds.add(kind)
            if kind.bounded:
                self._bounded_kinds.add(kind)
            return self._next_kind

    def _get(self, kind: CacheKind[V], owners: tuple[Any, ...], build: Callable[[], V], extra: tuple[Hashable, ...]
             ) -> V:
        key = (kind.id, *map(id, owners), *extra)
        while True:
            with self._lock:
                entry = self._hit(key, owners)
                if entry is not None:
                    return cast(V, entry.value)
                building = self._building.get(key)
                if building is None:
                    gate = threading.Lock()
                    gate.acquire()
                    self._building[key] = (gate, threading.get_ident())
                    kind._misses += 1
                    break
            gate, builder = building
            if builder == threading.get_ident():
                return build()
            with gate:
                pass
        try:
            value = build()
            self._store(kind, key, owners, value)
        finally:
            with self._lock:
                del self._building[key]
            gate.release()
        return value

    def _find(self, kind: CacheKind[V], owners: tuple[Any, ...], extra: tuple[Hashable, ...]) -> tuple[V] | None:
        with self._lock:
            entry = self._hit(_key(kind, owners, extra), owners)
        return None if entry is None else (cast(V, entry.value),)

    def _put(self, kind: CacheKind[V], owners: tuple[Any, ...], value: V, extra: tuple[Hashable, ...]) -> None:
        with self._lock:
            kind._misses += 1
        self._store(kind, _key(kind, owners, extra), owners, value)

    def _hit(self, key: Key, owners: tuple[Any, ...]) -> _Entry | None:
        """The entry of `key` stored for these very owners, now most recently used (call under the lock)."""
        entry = self._entries.get(key)
        if entry is None or not entry.holds(owners):
            return None
        self._entries.move_to_end(key)
        kind = entry.kind
        if kind.bounded:
            kind._order.move_to_end(key)
        kind._hits += 1
        return entry

    def _store(self, kind: CacheKind[Any], key: Key, owners: tuple[Any, ...], value: Any) -> None:
        """Keep `value` under `key` (owners referenced weakly where they can be), then evict past the bounds."""
        kept = tuple(self._weak(owner, key) for owner in owners)
        measure = _live_size(value, kind.size)
        nbytes = measure() if measure is not None else estimate_nbytes(value)
        entry = _Entry(key, kind, kept, value, nbytes, measure)
        if time.monotonic() >= self._next_remeasure:
            self._remeasure()
        with self._lock:
            replaced = self._drop(key) if key in self._entries else None
            self._entries[key] = entry
            if kind.bounded:
                kind._order[key] = None
            kind._entries += 1
            kind._bytes += nbytes
            self._bytes += nbytes
            if measure is not None:
                self._growing[key] = entry
            dropped = self._fit(key)
        del dropped, replaced

    def _drop(self, key: Key) -> _Entry:
        """Take `key`'s entry out, uncounted (call under the lock; let go of it after releasing the lock)."""
        entry = self._entries.pop(key)
        self._growing.pop(key, None)
        kind = entry.kind
        if kind.bounded:
            del kind._order[key]
        kind._entries -= 1
        kind._bytes -= entry.nbytes
        self._bytes -= entry.nbytes
        return entry

    def _evict(self, key: Key) -> _Entry:
        entry = self._drop(key)
        entry.kind._evictions += 1
        return entry

    def _weak(self, owner: Any, key: Key) -> Any:
        """A weak reference to `owner` that retires `key` when it dies (`owner` itself where it allows none)."""
        try:
            return weakref.ref(owner, lambda _: self._owner_died(key))
        except TypeError:
            return _Strong(owner)

    def _owner_died(self, key: Key) -> None:
        """Weak-reference callback: drop the dead entry now if the lock is free, else at the next store or stats."""
        self._dead.append(key)
        if self._lock.acquire(blocking=False):
            try:
                dropped = self._purge()
            finally:
                self._lock.release()
            del dropped

    def _purge(self) -> list[_Entry]:
        """Drop the entries whose owners died (call under the lock; the caller lets go of them after releasing it)."""
        dropped: list[_Entry] = []
        while self._dead:
            key = self._dead.pop()
            entry = self._entries.get(key)
            if entry is not None and entry.dead():
                dropped.append(self._drop(key))
        return dropped

    def _remeasure(self) -> list[tuple[str, CacheStats]]:
        """Re-read the bytes of every entry that can grow, outside the lock; the registered caches' stats."""
        with self._lock:
            self._next_remeasure = time.monotonic() + REMEASURE_SECONDS
            growing = list(self._growing.values())
            caches = self._live_registered()
        sizes = [(entry, entry.measure()) for entry in growing if entry.measure is not None]
        registered = [(name, cache.cache_stats()) for name, cache in caches]
        with self._lock:
            for entry, now in sizes:
                if self._growing.get(entry.key) is entry:
                    entry.kind._bytes += now - entry.nbytes
                    self._bytes += now - entry.nbytes
                    entry.nbytes = now
            self._registered_bytes = sum(stats.bytes for _, stats in registered)
        return registered

    def _live_registered(self) -> list[tuple[str, RegisteredCache]]:
        found = [(name, ref()) for name, ref in self._registered]
        return [(name, cache) for name, cache in found if cache is not None]

    def _fit(self, newest: Key | None) -> list[_Entry]:
        """Evict least recently used entries past their kind's bounds, then past the budget (the registered caches'
        bytes count); `newest` stays.  Call under the lock; returns what went, to let go of after releasing it."""
        dropped = self._purge()
        for kind in list(self._bounded_kinds):
            while kind._over():
                oldest = next((key for key in kind._order if key != newest), None)
                if oldest is None:
                    break
                dropped.append(self._evict(oldest))
        while self._bytes + self._registered_bytes > self.budget:
            oldest = next((key for key in self._entries if key != newest), None)
            if oldest is None:
                break
            dropped.append(self._evict(oldest))
        return dropped


def _key(kind: CacheKind[Any], owners: tuple[Any, ...], extra: tuple[Hashable, ...]) -> Key:
    return (kind.id, *map(id, owners), *extra)


def _checked_budget(nbytes: Any) -> int:
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise OptionError("budget", f"the cache budget must be a number of bytes >= 0, got {nbytes!r}")
    return nbytes


class CacheKind(Generic[V]):
    """One kind of entry in a registry: `get(owners, build, extra)` is the value for those live objects (and
    plain hashable extras), built by `build()` on first use and kept until evicted or an owner dies."""

    def __init__(self, name: str, *, max_entries: int | None = None, max_bytes: int | None = None,
                 size: Callable[[Any], int] | None = None, registry: CacheRegistry | None = None) -> None:
        """A kind named `name` (kinds of one name add up in `stats()`) in `registry` (default: the process's),
        optionally with its own bound on entries or bytes, and `size(value)` where a value's bytes are neither its
        `nbytes` nor well estimated."""
        if not isinstance(name, str) or not name:
            raise OptionError("name", f"a cache kind needs a non-empty name, got {name!r}")
        for option, limit in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
                raise OptionError(option, f"cache kind {name!r}: {option} must be None or an integer >= 1, "
                                          f"got {limit!r}")
        self.registry = registry if registry is not None else _process_registry()
        self.name = name
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.size = size
        self.bounded = max_entries is not None or max_bytes is not None
        self._order: OrderedDict[Key, None] = OrderedDict()
        """This kind's keys, least recently used first (kept only when it has bounds of its own)."""
        self._entries = 0
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self.id = self.registry._adopt(self)

    def get(self, owners: tuple[Any, ...], build: Callable[[], V], extra: tuple[Hashable, ...] = ()) -> V:
        """The value for `owners` (by identity) and `extra` (by value), built by `build()` if not held."""
        return self.registry._get(self, owners, build, extra)

    def find(self, owners: tuple[Any, ...], extra: tuple[Hashable, ...] = ()) -> tuple[V] | None:
        """`(value,)` if one is held for `owners` and `extra` (now most recently used), else None; for callers that
        build elsewhere (an async compile) and `put` the result."""
        return self.registry._find(self, owners, extra)

    def put(self, owners: tuple[Any, ...], value: V, extra: tuple[Hashable, ...] = ()) -> None:
        """Keep `value` for `owners` and `extra` (counted as a miss: a value built after `find` found none)."""
        self.registry._put(self, owners, value, extra)

    def stats(self) -> CacheStats:
        """This kind's entries, bytes (re-read now), hits, misses and evictions."""
        self.registry._remeasure()
        with self.registry._lock:
            return self._counters()

    def __len__(self) -> int:
        return self._entries

    def _counters(self) -> CacheStats:
        return CacheStats(self._entries, self._bytes, self._hits, self._misses, self._evictions)

    def _over(self) -> bool:
        return ((self.max_entries is not None and self._entries > self.max_entries)
                or (self.max_bytes is not None and self._bytes > self.max_bytes))


registry = CacheRegistry()
"""The process's registry: every cache stdsl keeps is an entry here or registered here."""


def _process_registry() -> CacheRegistry:
    return registry


def kind(name: str, *, max_entries: int | None = None, max_bytes: int | None = None,
         size: Callable[[Any], int] | None = None) -> CacheKind[Any]:
    """A new kind of entry in the process's registry (see `CacheRegistry.kind`)."""
    return registry.kind(name, max_entries=max_entries, max_bytes=max_bytes, size=size)


def register(name: str, cache: RegisteredCache) -> None:
    """Count a self-bounded cache under `name` in the process's registry (see `CacheRegistry.register`)."""
    registry.register(name, cache)


def set_budget(nbytes: int) -> None:
    """Bytes every cache of the process may hold together (least recently used entries go first past it)."""
    registry.set_budget(nbytes)


def stats() -> dict[str, CacheStats]:
    """Per kind of cache: entries, bytes, hits, misses, evictions."""
    return registry.stats()


def clear() -> None:
    """Empty every cache of the process."""
    registry.clear()
