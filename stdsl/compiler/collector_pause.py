"""The cyclic garbage collector runs rarely while a compile runs, and as before once the last compile is done.

A compile allocates millions of short-lived containers (IR nodes, subset tuples, transition rows) of which very
few form cycles: reference counting frees them, yet each young-generation pass of the collector walks every one
still alive, and the full passes walk the whole heap.  Measured on MaskBench's largest schemas that is a tenth to a
third of the compile (`benchmarks/compile_collector.py`).  The thresholds are raised rather than the collector
switched off, so the cycles a long compile does make are still collected and its memory stays bounded.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

COMPILE_THRESHOLDS = (100_000, 50, 100)
"""The collector's thresholds (young allocations, then passes of each generation) while any compile runs: each at
least its value outside (Python's defaults are 700, 10, 10)."""

_LOCK = threading.Lock()
_RUNNING = 0
_OUTSIDE: tuple[int, ...] = ()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Within the block the collector's thresholds are at least `COMPILE_THRESHOLDS`; they are restored when the
    last of the blocks open in this process (any thread, nested or not) closes."""
    global _RUNNING, _OUTSIDE
    with _LOCK:
        if _RUNNING == 0:
            _OUTSIDE = gc.get_threshold()
            gc.set_threshold(*(max(now, during) for now, during in zip(_OUTSIDE, COMPILE_THRESHOLDS)))
        _RUNNING += 1
    try:
        yield
    finally:
        with _LOCK:
            _RUNNING -= 1
            if _RUNNING == 0:
                gc.set_threshold(*_OUTSIDE)
