"""Work on a second CPU core: a second stream for the calling thread, and a function run beside another on a worker
thread with a stream of its own.

MLX's CPU backend runs each stream's tasks on a thread of its own, so one graph (a pass's feeds, its vocabulary
projection) runs on one core however many are free. Ops made under `with mx.stream(side_stream())` run on a second
thread beside the default stream's. But a thread evaluating a graph stops queueing its tasks while about ten are
in flight, so two long graphs evaluated by one thread barely overlap: `beside` evaluates the second on a worker
thread (`workers.py`) under that thread's side stream. A stream belongs to the thread that made it, so each thread
keeps its own, and arrays a worker returns must be evaluated there.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import TypeVar

import mlx.core as mx

from stdsl.runtime.platform.workers import Worker

_LOCAL = threading.local()
First = TypeVar("First")
Second = TypeVar("Second")


THREAD_SAFE_MLX = (0, 31, 2)
"""The first MLX whose streams may each be used by their own thread (its `ml-explore/mlx#2133` closed there)."""


def _release(version: str) -> tuple[int, ...]:
    """An MLX version's leading numbers (`0.32.4.dev1` -> (0, 32, 4))."""
    numbers = []
    for part in version.split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def side_stream() -> mx.Stream | None:
    """The calling thread's second CPU stream (made on first use); None where the default device is not the CPU (a
    GPU already spreads one graph over its cores) or MLX predates streams used by threads of their own."""
    if mx.default_device() != mx.cpu or _release(getattr(mx, "__version__", "0")) < THREAD_SAFE_MLX:
        return None
    stream: mx.Stream | None = getattr(_LOCAL, "stream", None)
    if stream is None:
        stream = _LOCAL.stream = mx.new_stream(mx.cpu)
    return stream


def beside(first: Callable[[], First], second: Callable[[], Second]) -> tuple[First, Second]:
    """`first()` here and `second()` meanwhile on a worker thread under its side stream; both results, or the first
    error either raised once both are done. Arrays `second` reads must be evaluated before, and those it returns by
    `second` itself: an op runs on the stream it was made on, which only its own thread can use."""
    got: list[Second] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with mx.stream(side_stream() or mx.default_stream(mx.default_device())):
                got.append(second())
        except BaseException as error:  # handed to the caller, which raises it after `first` is done
            failed.append(error)

    worker = Worker(run, "stdsl-beside")
    worker.start()
    try:
        result = first()
    finally:
        worker.wait()
    if failed:
        raise failed[0]
    return result, got[0]
