"""The cyclic garbage collector paused while a compile allocates its many small objects, resumed after.

A 128-tool `%json` grammar's cold compile makes about a hundred thousand objects that live until it returns (IR
nodes, NFA move lists, subsets); each time allocations pass the collector's threshold it walks the young ones, and
every tenth time the older generation too: about 10 ms of CPU, five percent of the compile (issue 36).  Paused, the
objects that die young are freed by reference counting as before and the survivors are walked once, by the first
collection after the compile; garbage in reference cycles, if the compile makes any, waits until then.

Thread-safe: compiles running together share one pause (a count); the collector is enabled again when the last one
ends, and only if it was enabled when the first began (a caller that disabled it keeps it disabled).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_paused = 0
"""How many compiles hold the pause now."""
_resume = False
"""Whether the collector was enabled when the pause began (it is enabled again when the pause ends)."""


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic garbage collector disabled; as it was before once no other block holds it."""
    global _paused, _resume
    with _LOCK:
        if _paused == 0:
            _resume = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _LOCK:
            _paused -= 1
            if _paused == 0 and _resume:
                gc.enable()
