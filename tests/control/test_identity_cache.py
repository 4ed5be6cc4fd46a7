"""IdentityCache builds once per live combination of objects and drops the oldest past its size."""

from __future__ import annotations

from stdsl.control.identity_cache import IdentityCache


class _Owner:
    pass


def test_built_once_per_combination_and_extra() -> None:
    cache: IdentityCache[int] = IdentityCache()
    builds: list[int] = []
    a, b = _Owner(), _Owner()

    def build(n: int) -> int:
        builds.append(n)
        return n

    assert cache.get((a, b), lambda: build(1)) == 1
    assert cache.get((a, b), lambda: build(2)) == 1
    assert cache.get((a, b), lambda: build(3), (True,)) == 3
    assert cache.get((b, a), lambda: build(4)) == 4
    assert builds == [1, 3, 4]


def test_oldest_dropped_past_the_size() -> None:
    cache: IdentityCache[str] = IdentityCache(2)
    owners = [_Owner() for _ in range(3)]
    for i, owner in enumerate(owners):
        cache.get((owner,), lambda i=i: f"v{i}")
    assert len(cache) == 2
    assert cache.get((owners[0],), lambda: "rebuilt") == "rebuilt"
    assert cache.get((owners[2],), lambda: "rebuilt") == "v2"
