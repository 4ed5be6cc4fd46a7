"""Daemon threads for MLX work that never end before the process does.

MLX keeps a compile cache per thread whose entries hold Python functions. The cache is destroyed
by the thread's C++ thread-local destructors when the thread ends, and that needs the GIL. A thread
that ends while the interpreter finalizes is ended by CPython inside that destructor, and the C++
runtime aborts the process ("terminate called without an active exception", exit status 134) after
all the work is done; an exit timed just after a thread ended (an engine's idle exit) hit it. So no
thread that ran MLX work ever ends: a `Worker` runs its target on a pooled daemon thread that then
waits for the next target, and the process ends the waiting threads at exit, where no thread-local
destructor runs. The runner (`stdsl.runtime.runner`) is such a target, and it never returns.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

_IDLE: list[_PooledThread] = []
_IDLE_LOCK = threading.Lock()


class _PooledThread:
    """A daemon thread that runs one worker's target after another and never returns."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Worker] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="stdsl-worker", daemon=True)
        self.thread.start()

    def run(self, worker: Worker) -> None:
        """Run `worker`'s target on this thread next."""
        self._jobs.put(worker)

    def _serve(self) -> None:
        while True:
            worker = self._jobs.get()
            self.thread.name = worker.name
            try:
                worker._run()
            except BaseException as error:  # reported as an uncaught thread error would be; the thread lives on
                threading.excepthook(threading.ExceptHookArgs((type(error), error, error.__traceback__, self.thread)))
            self.thread.name = "stdsl-worker"
            with _IDLE_LOCK:
                _IDLE.append(self)


class Worker:
    """A target run on a pooled daemon thread; `wait` returns once `target` has returned."""

    def __init__(self, target: Callable[[], object], name: str) -> None:
        self.done = threading.Event()
        self.name = name
        self._target = target
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with _IDLE_LOCK:
            pooled = _IDLE.pop() if _IDLE else None
        pooled = pooled or _PooledThread()
        self._thread = pooled.thread
        pooled.run(self)

    def is_alive(self) -> bool:
        """Whether `target` is still running (or about to)."""
        return self._thread is not None and not self.done.is_set()

    def is_current(self) -> bool:
        """Whether the caller runs this worker's target."""
        return self._thread is threading.current_thread() and not self.done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until `target` has returned; False on timeout."""
        return self.done.wait(timeout)

    def _run(self) -> None:
        try:
            self._target()
        finally:
            self.done.set()
