"""Daemon threads for MLX work that never end while the interpreter finalizes.

MLX keeps a compile cache per thread whose entries hold Python functions. The cache is destroyed
by the thread's C++ thread-local destructors, after the thread's Python function has returned, and
that needs the GIL. If the interpreter is finalizing by then, CPython ends the thread inside the
destructor and the C++ runtime aborts the process ("terminate called without an active exception",
exit status 134), after all the work is done. So once the process is exiting (`begin_exit`), a
worker parks instead of returning and the process ends it; `settle` gives a worker that returned
just before the exit time to finish its destructors.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

SETTLE_SECONDS = 0.2
_EXITING = threading.Event()
_LAST_RETURN = [float("-inf")]


def begin_exit() -> None:
    """From now on workers park when their function returns (called by the exit hooks first)."""
    _EXITING.set()


def settle() -> None:
    """Wait briefly if a worker returned moments ago, so its thread-local destructors finish before finalization."""
    since = time.monotonic() - _LAST_RETURN[0]
    if since < SETTLE_SECONDS:
        time.sleep(SETTLE_SECONDS - since)


class Worker:
    """A daemon thread running `target`; `wait` returns once `target` has returned (the thread may park after)."""

    def __init__(self, target: Callable[[], object], name: str) -> None:
        self.done = threading.Event()
        self._target = target
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        """Whether `target` is still running."""
        return self._thread.is_alive() and not self.done.is_set()

    def is_current(self) -> bool:
        """Whether the caller runs on this worker."""
        return self._thread is threading.current_thread()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until `target` has returned; False on timeout."""
        return self.done.wait(timeout)

    def _main(self) -> None:
        try:
            self._target()
        finally:
            _LAST_RETURN[0] = time.monotonic()
            self.done.set()
            if _EXITING.is_set():
                threading.Event().wait()
