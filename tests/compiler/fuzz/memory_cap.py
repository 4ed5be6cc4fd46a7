"""An address-space cap for the large fuzz runs, so one input whose compile would take the machine's memory
fails as a MemoryError that hypothesis reports with the input, instead of waking the OOM killer (which
took a whole large run, and other people's work on the shared machine, with it)."""

from __future__ import annotations

import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CAP_BYTES = 4 * 2**30
"""How much more address space than the process holds on entry one compile may take."""


def _address_space_bytes() -> int | None:
    """The process's virtual size, where Linux tells it (None elsewhere: no cap is set there)."""
    statm = Path("/proc/self/statm")
    if not statm.exists():
        return None
    return int(statm.read_text().split()[0]) * resource.getpagesize()


@contextmanager
def memory_cap(extra_bytes: int = CAP_BYTES) -> Iterator[None]:
    """Within the block, allocations past `extra_bytes` more than the process holds now raise MemoryError;
    the previous limit comes back afterwards (an unprivileged process may raise a soft limit to its hard one)."""
    held = _address_space_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if held is None:
        yield
        return
    cap = held + extra_bytes
    for limit in (soft, hard):
        if limit != resource.RLIM_INFINITY:
            cap = min(cap, limit)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
