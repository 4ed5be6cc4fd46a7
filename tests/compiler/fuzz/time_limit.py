"""The compile time limit the fuzzers run under and how far past it a compile may end.

`max_seconds` must be honoured within 10% plus a small constant: the constant covers the last stretch
between two deadline checks and the work outside the checked loops (reading the input, the cache key).
A compile is timed both on the wall clock and in the thread's CPU time, and the smaller counts: on a busy
machine the wall clock also counts time the process waited for a core, while a loop that never checks
the deadline overshoots both. Time the cyclic garbage collector ran during the compile is not counted: the
collector is the process's (the compiler leaves it on), and one full pass over a long test process's objects
can outlast the compile it interrupts without any loop of the compiler missing a check.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LIMIT_SECONDS = 0.5
TOLERANCE = 0.1
SLACK_SECONDS = 0.25
LARGE_RUN_SECONDS = 3 * 3600
"""How long one large (10^4 inputs) fuzz run may take: past the suite's per-test timeout on a shared machine."""


def _describe(value: Any) -> str:
    """The start of `repr(value)`; an integer too long for `repr` (over 4,300 digits) is only named."""
    try:
        return repr(value)[:300]
    except ValueError:
        return f"a {type(value).__name__} holding an integer too long to print"


@contextmanager
def collector_seconds() -> Iterator[list[float]]:
    """Seconds the cyclic garbage collector ran during the block, in the list's one item once the block ends."""
    spent = [0.0]
    started = [0.0]

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - started[0]

    gc.callbacks.append(watch)
    try:
        yield spent
    finally:
        gc.callbacks.remove(watch)


@contextmanager
def within_limit(what: Any) -> Iterator[None]:
    """Fail when the block (a compile under `max_seconds=LIMIT_SECONDS`) overshot the limit by more than
    the tolerance; `what` is the input (or words naming it), shown in the failure."""
    wall, cpu = time.perf_counter(), time.thread_time()
    with collector_seconds() as collecting:
        try:
            yield
        finally:
            elapsed = min(time.perf_counter() - wall, time.thread_time() - cpu) - collecting[0]
            allowed = LIMIT_SECONDS * (1 + TOLERANCE) + SLACK_SECONDS
            assert elapsed <= allowed, (f"compiling {what if isinstance(what, str) else _describe(what)} took "
                                        f"{elapsed:.3f} s (outside the collector) under max_seconds={LIMIT_SECONDS}")
