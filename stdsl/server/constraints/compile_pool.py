"""Compile worker processes that can each be stopped, so a compile past its limit never holds a worker.

The compiler runs in spawned processes (it never imports MLX, and a slow schema never holds the
interpreter lock the decode thread needs).  The compiler keeps each job's limit itself
(`max_seconds`); a worker that has not answered by the limit plus `grace_seconds` is killed, which
frees its memory, and a new one is started at once, so the next compile does not wait for it.  All the
workers start with the first compile (a server that never compiles starts none), so later ones do not wait
for an interpreter to start either.  A
worker grown past `max_worker_bytes` is replaced after its job.  Several workers let other clients'
schemas compile beside one client's slow schema.  No worker outlives the server: `close` kills them
(so does interpreter exit), and on Linux each asks the kernel to kill it when its parent goes.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import multiprocessing
import os
import signal
import sys
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from stdsl.errors import CompileError, CompileTimeError

DEFAULT_WORKERS = 2
GRACE_SECONDS = 2.0
STARTUP_SECONDS = 120.0
MAX_WORKER_BYTES = 1 << 30
PR_SET_PDEATHSIG = 1

_LIVE: weakref.WeakSet[CompilePool] = weakref.WeakSet()


class WorkerLost(CompileError):
    """The worker process ended while it held a job (it crashed, or was killed)."""


def _die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent ends; end now if the parent is already gone."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(0)


def _worker_main(conn: Connection, parent: int) -> None:
    """A worker: say it is ready, then compile each `(spec, seconds)` received and send its outcome back."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    from stdsl.compiler.constraint_spec import build_outcome

    conn.send("ready")
    while True:
        try:
            spec, seconds = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(build_outcome(spec, seconds))


def resident_bytes(pid: int) -> int:
    """A process's resident memory from /proc (0 where there is none)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _Worker:
    """One spawned compile process and the parent's end of its pipe."""

    def __init__(self, context: Any) -> None:
        self.conn, child_end = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child_end, os.getpid()), daemon=True,
                                       name="stdsl-compile")
        self.process.start()
        child_end.close()
        self.ready = False

    def kill(self) -> None:
        """End the process now and reap it."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5.0)
        self.conn.close()


class CompilePool:
    """`await run(spec, seconds)` compiles in one of `workers` processes, killing it past `seconds + grace_seconds`."""

    def __init__(self, workers: int = DEFAULT_WORKERS, *, grace_seconds: float = GRACE_SECONDS,
                 max_worker_bytes: int = MAX_WORKER_BYTES) -> None:
        if workers < 1 or grace_seconds <= 0:
            raise ValueError(f"a compile pool needs workers >= 1 and grace_seconds > 0, got {workers}, {grace_seconds}")
        self.workers = workers
        self.grace_seconds = grace_seconds
        self.max_worker_bytes = max_worker_bytes
        self.replaced = 0
        self._context = multiprocessing.get_context("spawn")
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._started = False
        self._slots = asyncio.Semaphore(workers)
        self._closed = False
        _LIVE.add(self)

    def pids(self) -> list[int]:
        """The process ids of the workers alive now."""
        return [w.process.pid for w in [*self._idle, *self._busy] if w.process.pid is not None]

    async def run(self, spec: dict[str, Any], seconds: float) -> Any:
        """`build_outcome(spec, seconds)` in a worker; CompileTimeError once it passes `seconds + grace_seconds`
        (the worker is then killed and replaced), WorkerLost if the worker died."""
        async with self._slots:
            if self._closed:
                raise CompileError("the compile pool is closed")
            if not self._started:
                self._started = True
                self._idle = [_Worker(self._context) for _ in range(self.workers)]
            worker = self._idle.pop() if self._idle else _Worker(self._context)
            self._busy.add(worker)
            try:
                outcome = await self._job(worker, spec, seconds)
            except BaseException:
                self._retire(worker)
                raise
            self._busy.discard(worker)
            if resident_bytes(worker.process.pid or 0) > self.max_worker_bytes:
                self._retire(worker)
            else:
                self._idle.append(worker)
            return outcome

    async def _job(self, worker: _Worker, spec: dict[str, Any], seconds: float) -> Any:
        if not worker.ready:
            if await self._receive(worker, STARTUP_SECONDS, "starting a compile worker") != "ready":
                raise WorkerLost("the compile worker did not start")
            worker.ready = True
        await asyncio.to_thread(worker.conn.send, (spec, seconds))
        return await self._receive(worker, seconds + self.grace_seconds, f"compiling (limit {seconds:g} s)")

    async def _receive(self, worker: _Worker, timeout: float, doing: str) -> Any:
        """The worker's next message, read off the loop once it starts arriving, within `timeout` seconds."""
        loop = asyncio.get_running_loop()
        arrived: asyncio.Future[None] = loop.create_future()
        fd = worker.conn.fileno()

        def readable() -> None:
            if not arrived.done():
                arrived.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await asyncio.wait_for(arrived, timeout)
        except TimeoutError:
            raise CompileTimeError(f"the compile worker did not answer within {timeout:g} s ({doing}); it was "
                                   "stopped") from None
        finally:
            loop.remove_reader(fd)
        try:
            return await asyncio.to_thread(worker.conn.recv)
        except (EOFError, OSError):
            raise WorkerLost(f"the compile worker stopped ({doing})") from None

    def _retire(self, worker: _Worker) -> None:
        """Kill a worker that overran, died or grew too large; start its replacement now unless closing."""
        self._busy.discard(worker)
        worker.kill()
        if not self._closed:
            self.replaced += 1
            self._idle.append(_Worker(self._context))

    def close(self) -> None:
        """Kill every worker (a compile in progress included) and refuse new jobs."""
        self._closed = True
        workers, self._idle = [*self._idle, *self._busy], []
        for worker in workers:
            if worker.process.is_alive():
                worker.process.kill()
        for worker in workers:
            worker.process.join(5.0)
            if worker not in self._busy:
                worker.conn.close()


@atexit.register
def _close_pools() -> None:
    """Kill every pool's workers when the interpreter exits, so none is left running."""
    for pool in list(_LIVE):
        pool.close()
