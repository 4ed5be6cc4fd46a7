"""A time limit on compilation: the long loops check it, so a huge constraint is refused instead of hanging."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from stdsl.errors import CompileTimeError

_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("stdsl_compile_deadline", default=None)


@contextmanager
def compile_deadline(seconds: float | None) -> Iterator[None]:
    """Within the block, `check_deadline` raises CompileTimeError once `seconds` have passed (None: no limit)."""
    if seconds is None:
        yield
        return
    if seconds <= 0:
        raise ValueError(f"a compile time limit must be positive, got {seconds}")
    token = _DEADLINE.set((time.perf_counter() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_deadline(stage: str, releasing: float = 0.0) -> None:
    """Raise CompileTimeError if the current compile time limit has passed; `stage` says where it stopped.

    `releasing` is about how long freeing what the stage has built will take once it is refused: the limit is
    reached that much earlier, so that the refusal returns within it."""
    limit = _DEADLINE.get()
    if limit is not None and time.perf_counter() + releasing > limit[0]:
        raise CompileTimeError(f"compiling took longer than the {limit[1]:g} s limit (stopped in {stage}); "
                               "simplify the constraint or raise max_seconds")


RELEASE_CHUNK = 8192
"""Entries `released` and `released_keys` drop between two deadline checks (a few milliseconds of freeing)."""


def released(items: list[Any], stage: str) -> None:
    """Empty `items` from its end, `RELEASE_CHUNK` entries at a time with a deadline check between: a large
    construction's small objects, freed all at once when its last reference goes, took 0.04-0.08 s of CPU without
    a check (a subset construction's state sets, an NFA's move lists)."""
    while items:
        check_deadline(stage)
        del items[-RELEASE_CHUNK:]


def released_keys(table: dict[Any, Any], stage: str) -> None:
    """Empty `table`, `RELEASE_CHUNK` entries at a time with a deadline check between (as `released`)."""
    while table:
        check_deadline(stage)
        for _ in range(min(RELEASE_CHUNK, len(table))):
            table.popitem()
