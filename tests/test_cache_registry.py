"""The cache registry: least recently used under one byte budget (against a model of LRU), per-kind bounds and stats,
clear(), entries that die with their key objects, and concurrent use from threads."""

from __future__ import annotations

import gc
import threading
import time
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.caches import CacheRegistry, CacheStats, estimate_nbytes
from stdsl.errors import OptionError


class _Owner:
    """A live object entries can be keyed by."""


class _Sized:
    """A value that says its bytes (a property: it can grow)."""

    def __init__(self, nbytes: int) -> None:
        self.held = nbytes

    @property
    def nbytes(self) -> int:
        return self.held


class _Registered:
    """A self-bounded cache that reports to the registry."""

    def __init__(self, nbytes: int) -> None:
        self.held = nbytes
        self.cleared = 0

    def cache_stats(self) -> CacheStats:
        return CacheStats(entries=1 if self.held else 0, bytes=self.held)

    def clear(self) -> None:
        self.held = 0
        self.cleared += 1


@settings(max_examples=200, deadline=None)
@given(budget=st.integers(0, 120),
       ops=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 40)), min_size=1, max_size=60))
def test_lru_under_a_byte_budget_matches_a_model_of_lru(budget: int, ops: list[tuple[int, int]]) -> None:
    """Each get of key k with size s: a hit moves k to the newest end; a miss stores it and drops the oldest
    entries (never the newest) while the bytes held pass the budget."""
    registry = CacheRegistry(budget)
    kind = registry.kind("values")
    model: OrderedDict[int, int] = OrderedDict()
    builds: list[int] = []
    for key, size in ops:
        def build(key: int = key, size: int = size) -> _Sized:
            builds.append(key)
            return _Sized(size)
        expected_hit = key in model
        built_before = len(builds)
        got = kind.get((), build, (key,))
        if expected_hit:
            model.move_to_end(key)
            assert len(builds) == built_before and got.nbytes == model[key]
        else:
            assert builds[built_before:] == [key]
            model[key] = size
            while sum(model.values()) > budget and len(model) > 1:
                model.popitem(last=False)
        held = kind.stats()
        assert held.entries == len(model)
        assert held.bytes == sum(model.values())
    stats = kind.stats()
    assert stats.misses == len(builds)
    assert stats.hits == len(ops) - len(builds)
    assert stats.evictions == len(builds) - len(model)


def test_hits_return_the_stored_value_without_building() -> None:
    registry = CacheRegistry()
    kind = registry.kind("values")
    owner = _Owner()
    first = kind.get((owner,), lambda: [1, 2, 3])
    assert kind.get((owner,), lambda: pytest.fail("built twice")) is first
    assert kind.get((owner,), lambda: "other extra", ("x",)) == "other extra"
    assert kind.stats() == CacheStats(entries=2, bytes=kind.stats().bytes, hits=1, misses=2, evictions=0)


def test_per_kind_bounds_evict_within_the_kind_only() -> None:
    registry = CacheRegistry()
    few = registry.kind("few", max_entries=2)
    small = registry.kind("small", max_bytes=100)
    other = registry.kind("other")
    other.get((), lambda: _Sized(10), ("kept",))
    for i in range(4):
        few.get((), lambda: _Sized(1), (i,))
        small.get((), lambda: _Sized(60), (i,))
    assert (few.stats().entries, few.stats().evictions) == (2, 2)
    assert (small.stats().entries, small.stats().bytes, small.stats().evictions) == (1, 60, 3)
    assert other.stats().entries == 1
    assert few.get((), lambda: _Sized(1), (0,)) is not None and few.stats().misses == 5


def test_values_that_grow_are_measured_again_when_anything_is_stored() -> None:
    registry = CacheRegistry(budget=100)
    kind = registry.kind("growing")
    grows = kind.get((), lambda: _Sized(10), ("a",))
    grows.held = 95
    assert kind.stats().bytes == 95
    kind.get((), lambda: _Sized(10), ("b",))
    assert kind.stats().entries == 1 and kind.stats().evictions == 1
    assert kind.get((), lambda: _Sized(1), ("a",)).nbytes == 1


def test_a_size_function_and_the_estimate() -> None:
    registry = CacheRegistry()
    by_length = registry.kind("lists", size=lambda value: 8 * len(value))
    value = by_length.get((), lambda: [0] * 5)
    assert by_length.stats().bytes == 40
    value.extend([0] * 5)
    assert by_length.stats().bytes == 80
    array = np.zeros(1000, dtype=np.int64)
    assert estimate_nbytes(array) == 8000
    assert estimate_nbytes({"k": array}) > 8000
    assert estimate_nbytes(("a" * 100,)) > 100


def test_stats_add_up_kinds_of_one_name_and_registered_caches() -> None:
    registry = CacheRegistry()
    one, two = registry.kind("tables"), registry.kind("tables")
    one.get((), lambda: _Sized(5))
    two.get((), lambda: _Sized(7))
    prompts = _Registered(1000)
    registry.register("prompt caches", prompts)
    stats = registry.stats()
    assert stats["tables"].entries == 2 and stats["tables"].bytes == 12
    assert stats["prompt caches"].bytes == 1000
    assert registry.nbytes == 1012


def test_registered_bytes_count_against_the_budget() -> None:
    registry = CacheRegistry(budget=1100)
    prompts = _Registered(1000)
    registry.register("prompt caches", prompts)
    kind = registry.kind("tables")
    kind.get((), lambda: _Sized(60), (1,))
    kind.get((), lambda: _Sized(60), (2,))
    assert kind.stats().entries == 1 and kind.stats().evictions == 1


def test_clear_empties_every_kind_and_every_registered_cache() -> None:
    registry = CacheRegistry()
    kinds = [registry.kind(name) for name in ("a", "b", "c")]
    owner = _Owner()
    for kind in kinds:
        kind.get((owner,), lambda: np.zeros(100))
    prompts = _Registered(500)
    registry.register("prompt caches", prompts)
    registry.clear()
    assert prompts.cleared == 1
    assert all(stats.entries == 0 and stats.bytes == 0 for stats in registry.stats().values())
    assert len(registry) == 0 and registry.nbytes == 0
    assert kinds[0].get((owner,), lambda: "rebuilt") == "rebuilt"


def test_set_budget_evicts_at_once_and_refuses_a_bad_value() -> None:
    registry = CacheRegistry()
    kind = registry.kind("values")
    for i in range(5):
        kind.get((), lambda: _Sized(10), (i,))
    registry.set_budget(25)
    assert kind.stats().entries == 2
    assert kind.get((), lambda: _Sized(0), (4,)).nbytes == 10
    for bad in (-1, 1.5, "10", True):
        with pytest.raises(OptionError, match="budget"):
            registry.set_budget(bad)  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="max_entries"):
        registry.kind("x", max_entries=0)


def test_an_entry_dies_with_its_key_object() -> None:
    registry = CacheRegistry()
    kind = registry.kind("per owner")
    owner, other = _Owner(), _Owner()
    kind.get((owner, other), lambda: np.zeros(1000))
    kind.get((other,), lambda: np.zeros(10))
    del owner
    gc.collect()
    stats = kind.stats()
    assert stats.entries == 1 and stats.bytes == 80 and stats.evictions == 0


def test_a_reused_id_is_never_served_the_dead_objects_value() -> None:
    registry = CacheRegistry()
    kind = registry.kind("per owner")
    for i in range(50):
        owner = _Owner()
        assert kind.get((owner,), lambda i=i: i) == i
        del owner
    gc.collect()
    assert kind.stats().entries == 0


def test_owners_without_weak_references_are_held_until_evicted() -> None:
    registry = CacheRegistry()
    kind = registry.kind("by list", max_entries=1)
    first, second = [1], [2]
    assert kind.get((first,), lambda: "one") == "one"
    assert kind.get((first,), lambda: "again") == "one"
    kind.get((second,), lambda: "two")
    assert kind.get((first,), lambda: "rebuilt") == "rebuilt"


def test_a_failed_build_stores_nothing_and_the_next_call_builds() -> None:
    registry = CacheRegistry()
    kind = registry.kind("values")

    def fail() -> int:
        raise ValueError("no")

    with pytest.raises(ValueError):
        kind.get((), fail)
    assert kind.get((), lambda: 3) == 3 and kind.stats().entries == 1


def test_threads_on_the_same_and_different_keys_under_eviction_never_raise() -> None:
    registry = CacheRegistry(budget=4 * 40)
    kind = registry.kind("shared")
    owners = [_Owner() for _ in range(6)]
    builds: dict[int, int] = {}
    count_lock = threading.Lock()
    errors: list[BaseException] = []

    def build(i: int) -> np.ndarray:
        with count_lock:
            builds[i] = builds.get(i, 0) + 1
        time.sleep(0.005)
        return np.full(5, i, dtype=np.int64)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(200):
                i = int(rng.integers(len(owners)))
                value = kind.get((owners[i],), lambda i=i: build(i))
                assert int(value[0]) == i
                if rng.random() < 0.02:
                    registry.stats()
        except BaseException as error:  # noqa: BLE001 - collected to fail the test in the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    stats = kind.stats()
    assert stats.hits + stats.misses == 8 * 200
    assert stats.misses == sum(builds.values())
    assert stats.entries == 4 and stats.bytes == 4 * 40
    assert stats.evictions == stats.misses - stats.entries


def test_concurrent_callers_of_one_key_share_one_slow_build() -> None:
    registry = CacheRegistry()
    kind = registry.kind("slow")
    started = threading.Barrier(6)
    builds: list[int] = []
    results: list[object] = []

    def build() -> object:
        builds.append(1)
        time.sleep(0.1)
        return object()

    def work() -> None:
        started.wait()
        results.append(kind.get((), build, ("one key",)))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and len(results) == 6 and all(r is results[0] for r in results)


def test_builds_may_use_the_registry_for_other_keys() -> None:
    registry = CacheRegistry()
    inner, outer = registry.kind("inner"), registry.kind("outer")
    value = outer.get((), lambda: inner.get((), lambda: 2) + 1)
    assert value == 3 and inner.stats().entries == outer.stats().entries == 1


def test_a_build_that_asks_for_its_own_key_gets_a_fresh_value_not_a_deadlock() -> None:
    registry = CacheRegistry()
    kind = registry.kind("recursive")
    depth: list[int] = []

    def build() -> int:
        depth.append(1)
        return 1 if len(depth) > 1 else kind.get((), build) + 1

    assert kind.get((), build) == 2 and kind.get((), build) == 2 and kind.stats().entries == 1


def test_find_and_put_for_values_built_elsewhere() -> None:
    registry = CacheRegistry()
    kind = registry.kind("compiled elsewhere", max_bytes=100)
    assert kind.find((), ("a",)) is None
    kind.put((), _Sized(60), ("a",))
    found = kind.find((), ("a",))
    assert found is not None and found[0].nbytes == 60
    kind.put((), _Sized(60), ("b",))
    assert kind.find((), ("a",)) is None
    assert kind.stats() == CacheStats(entries=1, bytes=60, hits=1, misses=2, evictions=1)


def test_one_value_per_combination_of_owners_in_order_and_extra() -> None:
    registry = CacheRegistry()
    kind = registry.kind("pairs")
    a, b = _Owner(), _Owner()
    builds: list[int] = []

    def build(n: int) -> int:
        builds.append(n)
        return n

    assert kind.get((a, b), lambda: build(1)) == 1
    assert kind.get((a, b), lambda: build(2)) == 1
    assert kind.get((a, b), lambda: build(3), (True,)) == 3
    assert kind.get((b, a), lambda: build(4)) == 4
    assert builds == [1, 3, 4]


def test_arrays_and_plain_values_are_measured_once() -> None:
    registry = CacheRegistry()
    kind = registry.kind("fixed")

    class Fixed:
        def __init__(self) -> None:
            self.nbytes = 10

    fixed = kind.get((), Fixed)
    array = kind.get((), lambda: np.zeros(4, dtype=np.int64), ("array",))
    fixed.nbytes = 1000
    assert kind.stats().bytes == 10 + array.nbytes


def test_values_whose_class_says_nbytes_is_fixed_are_measured_once_and_the_budget_stays_exact(monkeypatch) -> None:
    """An automaton's bytes never change: it is measured when stored, not again on each later store or `stats()`;
    a growing value beside it still is, and the budget counts both exactly."""
    from stdsl import caches

    monkeypatch.setattr(caches, "REMEASURE_SECONDS", 0.0)
    reads = {"fixed": 0, "growing": 0}

    class Fixed(_Sized):
        NBYTES_FIXED = True

        @property
        def nbytes(self) -> int:
            reads["fixed"] += 1
            return self.held

    class Growing(_Sized):
        @property
        def nbytes(self) -> int:
            reads["growing"] += 1
            return self.held

    registry = CacheRegistry(budget=100)
    kind = registry.kind("mixed")
    fixed = kind.get((), lambda: Fixed(30), ("fixed",))
    growing = kind.get((), lambda: Growing(20), ("growing",))
    for i in range(5):
        kind.get((), lambda: np.zeros(1, dtype=np.int8), ("array", i))
    assert registry.stats()["mixed"].bytes == 30 + 20 + 5
    assert reads["fixed"] == 1 and reads["growing"] >= 6
    growing.held = 60
    assert registry.stats()["mixed"].bytes == 30 + 60 + 5
    kind.get((), lambda: np.zeros(10, dtype=np.int8), ("array", "big"))
    assert registry.stats()["mixed"].bytes <= 100 and reads["fixed"] == 1
    assert fixed.nbytes == 30


def test_compiled_dfas_say_their_bytes_are_fixed() -> None:
    import stdsl

    compiled = stdsl.compile({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    assert type(compiled).NBYTES_FIXED and type(compiled.automaton).NBYTES_FIXED
    assert compiled.nbytes == compiled.automaton.nbytes > 0
