"""How `stcon serve` stops: the first SIGTERM or SIGINT drains within a bound and exits 0; a second exits at once.

On the first signal uvicorn stops accepting connections and `on_signal` starts draining the engine on a
thread (`Engine.close(drain_seconds)`: rows in flight finish within the bound, the rest are cancelled),
then `on_drained` runs on the event loop (the compile pool stops, compiles still pending are refused), so
every request is answered; uvicorn waits for them a little longer (`ANSWER_SECONDS`) and cancels any left,
then the app's shutdown stops what remains, so the process exits with status 0 and leaves no process behind.
uvicorn would re-raise the signal once it is done (the exit status would then say "killed by SIGTERM"), so
the signal is handled here instead.  A second signal kills the compile workers
and ends the process at once with status 128 + the signal number, as a shell reports an interrupted command.
Whatever a thread is still doing (a render stuck in Python code keeps the interpreter from exiting), the first
signal also starts a watchdog that, `EXIT_MARGIN_SECONDS` after uvicorn's own bound, runs `on_force`, flushes
the logs and ends the process with status 0: it is gone within `drain_seconds + 2` s of the signal.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn

DRAIN_SECONDS = 10
ANSWER_SECONDS = 1
EXIT_MARGIN_SECONDS = 0.5


Callback = Callable[[], Any]


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose first exit signal runs `on_signal` on a thread, then `on_drained` on the loop, while
    it drains the requests (`timeout_graceful_shutdown`), and ends the process `exit_seconds` later if it is still
    running; its second ends the process at once.  Either end runs `on_force` first (which stops what must not
    outlive the process)."""

    def __init__(self, config: uvicorn.Config, on_signal: Callback, on_drained: Callback, on_force: Callback,
                 exit_seconds: float) -> None:
        super().__init__(config)
        self.on_signal, self.on_drained, self.on_force = on_signal, on_drained, on_force
        self.exit_seconds = exit_seconds

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            self.force_exit = True
            try:
                self.on_force()
            finally:
                os._exit(128 + sig)
        self.should_exit = True
        loop = asyncio.get_event_loop()

        def drain() -> None:
            try:
                self.on_signal()
            finally:
                loop.call_soon_threadsafe(self.on_drained)

        threading.Thread(target=drain, name="stdsl-drain", daemon=True).start()
        threading.Thread(target=self.exit_when_due, name="stdsl-exit", daemon=True).start()

    def exit_when_due(self) -> None:
        """End the process with status 0 once `exit_seconds` have passed, after `on_force` and flushing the logs,
        even if a thread is stuck in Python code (a normal exit would wait for it)."""
        time.sleep(self.exit_seconds)
        try:
            self.on_force()
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(0)


def nothing() -> None:
    """A callback with nothing to do."""


def run_until_signalled(app: Any, *, host: str, port: int, drain_seconds: int = DRAIN_SECONDS,
                        on_signal: Callback = nothing, on_drained: Callback = nothing,
                        on_force: Callback = nothing) -> None:
    """Serve `app` until SIGTERM or SIGINT, then let the requests in flight finish for at most `drain_seconds`
    (0: cancel them at once; `on_signal` should end the rows by then) and return; the process ends with status 0
    within `drain_seconds + ANSWER_SECONDS + EXIT_MARGIN_SECONDS` whatever its threads are doing."""
    if drain_seconds < 0:
        raise ValueError(f"drain_seconds must be at least 0, got {drain_seconds}")
    config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                            timeout_graceful_shutdown=drain_seconds + ANSWER_SECONDS)
    DrainingServer(config, on_signal, on_drained, on_force,
                   exit_seconds=drain_seconds + ANSWER_SECONDS + EXIT_MARGIN_SECONDS).run()

