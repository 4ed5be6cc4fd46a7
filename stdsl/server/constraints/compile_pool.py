"""Compile worker processes that can each be stopped, so a compile past its limit never holds a worker.

The compiler runs in spawned processes (it never imports MLX, and a slow schema never holds the
interpreter lock the decode thread needs).  The compiler keeps each job's limit itself
(`max_seconds`); a worker that has not answered by the limit plus `grace_seconds` is killed, which
frees its memory, and a new one is started at once, so the next compile does not wait for it.  All the
workers start with the first compile (a server that never compiles starts none), so later ones do not wait
for an interpreter to start either.

Memory: on Linux each worker caps its address space (`RLIMIT_AS`) at what it maps once its imports are done
plus `max_compile_bytes`, so a compile that grows past it gets a MemoryError while it runs; the worker
answers `CompileMemoryError` and is replaced.  A worker grown past `max_compile_bytes` is replaced after
its job too (the only check where `RLIMIT_AS` is not enforced, as on macOS).

Scheduling: jobs carry a client key.  `workers` general workers take any job, and `reserved_workers` more
take only small jobs (`small_job`: a schema, regex or choice of at most `SMALL_BYTES`), at most one per
client, so a schema is never queued behind big grammars.  A free worker goes to the queued job whose client
has the fewest jobs running, then was served longest ago, then asked first: clients are served round-robin
and a client's second job waits behind its own first.  A tool list goes to the idle worker that last compiled
one in its format (`affinity`), whose caches hold its calls.  A job cancelled while queued leaves the queue; one
cancelled while it runs kills its worker, which is replaced.  No worker outlives the server: `close` kills
them (so does interpreter exit), and on Linux each asks the kernel to kill it when its parent goes.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import multiprocessing
import os
import resource
import signal
import sys
import time
import weakref
from collections import Counter
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from stdsl.errors import CompileError, CompileTimeError

DEFAULT_WORKERS = 2
RESERVED_WORKERS = 1
GRACE_SECONDS = 2.0
STARTUP_SECONDS = 120.0
MAX_COMPILE_BYTES = 1 << 30
SMALL_BYTES = 16 << 10
SMALL_KINDS = frozenset({"json_schema", "json_object", "regex", "choice"})
OUT_OF_MEMORY = "out of memory"
PR_SET_PDEATHSIG = 1

_LIVE: weakref.WeakSet[CompilePool] = weakref.WeakSet()


class WorkerLost(CompileError):
    """The worker process ended while it held a job (it crashed, or was killed)."""


class CompileMemoryError(CompileError):
    """A compile needed more memory than the pool's `max_compile_bytes`."""


def small_job(spec: dict[str, Any], text: str) -> bool:
    """Whether a spec (`text`: its canonical text) may run on a reserved worker: a schema, regex or choice of at
    most `SMALL_BYTES`."""
    return spec.get("kind") in SMALL_KINDS and len(text.encode("utf-8")) <= SMALL_BYTES


def _die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent ends; end now if the parent is already gone."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(0)


def _cap_address_space(max_bytes: int) -> None:
    """Limit this process's address space to what it maps now plus `max_bytes` (Linux: read from /proc), so a
    compile that grows past it gets a MemoryError instead of taking the machine's memory."""
    try:
        mapped = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mapped + max_bytes if hard == resource.RLIM_INFINITY else min(mapped + max_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _answer(spec: dict[str, Any], seconds: float) -> memoryview:
    """The pickled outcome of one job, or of `OUT_OF_MEMORY` when the compile or its pickling passed the cap (the
    compile's memory is freed once the handler has left, so the marker pickles)."""
    from stdsl.compiler.constraint_spec import worker_outcome

    try:
        return memoryview(ForkingPickler.dumps(worker_outcome(spec, seconds)))
    except MemoryError:
        pass
    return memoryview(ForkingPickler.dumps(OUT_OF_MEMORY))


def _worker_main(conn: Connection, parent: int, max_bytes: int) -> None:
    """A worker: import the compiler, cap its memory, say it is ready, then answer each `(spec, seconds)`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    import stdsl.compiler.constraint_spec
    import stdsl.compiler.grammar
    import stdsl.compiler.stc.program
    import stdsl.compiler.tools.custom_input  # noqa: F401  (imported before the cap measures the baseline)

    _cap_address_space(max_bytes)
    conn.send("ready")
    while True:
        try:
            spec, seconds = conn.recv()
        except (EOFError, OSError):
            return
        conn.send_bytes(_answer(spec, seconds))


def resident_bytes(pid: int) -> int:
    """A process's resident memory from /proc (0 where there is none)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def affinity(spec: dict[str, Any]) -> tuple[str, ...] | None:
    """What a compile reuses from a worker's caches: a tool list in a format is assembled from the calls, fronts
    and blocks the worker kept from that format's earlier lists (one tool changed costs one tool there, the whole
    list on a worker that never saw it).  None for the rest, which need no particular worker."""
    if spec.get("kind") == "tools":
        return ("tools", str(spec.get("format")))
    return None


def take_idle(idle: list[Any], wanted: tuple[str, ...] | None) -> Any:
    """Take from `idle` (most recently idle last) the worker for a job of affinity `wanted`: the latest one that
    ran such jobs, else (and for a job with none) the latest without an affinity, so a warm worker stays free for
    its kind, else the latest."""
    for choice in ((wanted,) if wanted is not None else ()) + (None,):
        for index in range(len(idle) - 1, -1, -1):
            if idle[index].affinity == choice:
                return idle.pop(index)
    return idle.pop()


class _Worker:
    """One spawned compile process and the parent's end of its pipe."""

    def __init__(self, context: Any, max_bytes: int) -> None:
        self.conn, child_end = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child_end, os.getpid(), max_bytes), daemon=True,
                                       name="stdsl-compile")
        self.process.start()
        child_end.close()
        self.ready = False
        self.affinity: tuple[str, ...] | None = None
        """The kind of compile whose caches this worker holds (`affinity`), None before it has run one."""

    def kill(self) -> None:
        """End the process now and reap it."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5.0)
        self.conn.close()


@dataclass(eq=False)
class _Job:
    """A compile waiting for a worker: whose it is, whether it is small, when it was asked, and its grant (True: a
    reserved worker)."""

    client: str
    small: bool
    asked: float = field(default_factory=time.monotonic)
    granted: asyncio.Future[bool] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class PoolStats:
    """What the pool has done: jobs queued and running now, seconds jobs waited for a worker and spent on one, jobs
    cancelled, workers replaced, compiles refused for memory."""

    queued: int = 0
    running: int = 0
    queue_seconds: float = 0.0
    compile_seconds: float = 0.0
    cancelled: int = 0
    replaced: int = 0
    memory_refusals: int = 0


class CompilePool:
    """`await run(spec, seconds, client=...)` compiles in a worker process, killing it past `seconds +
    grace_seconds`, with `workers` general workers and `reserved_workers` for small jobs."""

    def __init__(self, workers: int = DEFAULT_WORKERS, *, grace_seconds: float = GRACE_SECONDS,
                 max_compile_bytes: int = MAX_COMPILE_BYTES, reserved_workers: int = RESERVED_WORKERS) -> None:
        if workers < 1 or reserved_workers < 0 or grace_seconds <= 0 or max_compile_bytes < 1:
            raise ValueError("a compile pool needs workers >= 1, reserved_workers >= 0, grace_seconds > 0 and "
                             f"max_compile_bytes >= 1, got {workers}, {reserved_workers}, {grace_seconds}, "
                             f"{max_compile_bytes}")
        self.workers = workers
        self.reserved_workers = reserved_workers
        self.grace_seconds = grace_seconds
        self.max_compile_bytes = max_compile_bytes
        self._stats = PoolStats()
        self._context = multiprocessing.get_context("spawn")
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._started = False
        self._queue: list[_Job] = []
        self._general = 0
        self._reserved: set[str] = set()
        self._running: Counter[str] = Counter()
        self._served: dict[str, float] = {}
        self._closed = False
        _LIVE.add(self)

    @property
    def stats(self) -> PoolStats:
        """What the pool has done, and the jobs queued and running now."""
        return replace(self._stats, queued=len(self._queue), running=self._general + len(self._reserved))

    @property
    def replaced(self) -> int:
        """Workers killed and replaced (overran, died, cancelled or grown too large)."""
        return self._stats.replaced

    def free_workers(self) -> int:
        """General workers no job holds and no queued job waits for (0 while any job is queued)."""
        return 0 if self._queue or self._closed else self.workers - self._general

    def pids(self) -> list[int]:
        """The process ids of the workers alive now."""
        return [w.process.pid for w in [*self._idle, *self._busy] if w.process.pid is not None]

    async def run(self, spec: dict[str, Any], seconds: float, *, client: str = "", small: bool = False) -> Any:
        """`worker_outcome(spec, seconds)` in a worker once `client`'s turn comes; CompileTimeError once it passes
        `seconds + grace_seconds` (the worker is then killed and replaced), CompileMemoryError past
        `max_compile_bytes`, WorkerLost if the worker died.  Cancelling it frees its place or its worker."""
        if self._closed:
            raise CompileError("the compile pool is closed")
        job = _Job(client, small)
        self._queue.append(job)
        self._dispatch()
        try:
            reserved = await job.granted
        except asyncio.CancelledError:
            self._stats.cancelled += 1
            if job in self._queue:
                self._queue.remove(job)
            elif job.granted.done() and not job.granted.cancelled() and job.granted.exception() is None:
                self._release(job, job.granted.result())
            raise
        began = time.monotonic()
        self._stats.queue_seconds += began - job.asked
        try:
            return await self._on_worker(spec, seconds)
        except asyncio.CancelledError:
            self._stats.cancelled += 1
            raise
        finally:
            self._stats.compile_seconds += time.monotonic() - began
            self._release(job, reserved)

    def _fits(self, job: _Job) -> bool | None:
        """Where `job` may run now: False on a general worker, True on a reserved one, None nowhere yet."""
        if self._general < self.workers:
            return False
        if job.small and len(self._reserved) < self.reserved_workers and job.client not in self._reserved:
            return True
        return None

    def _dispatch(self) -> None:
        """Grant free workers to queued jobs: fewest jobs running for the client first, then the client served
        longest ago, then the job asked first."""
        while not self._closed:
            fitting = [(job, lane) for job in self._queue if (lane := self._fits(job)) is not None]
            if not fitting:
                return
            job, reserved = min(fitting, key=lambda pair: (self._running[pair[0].client],
                                                           self._served.get(pair[0].client, -1.0), pair[0].asked))
            self._queue.remove(job)
            if reserved:
                self._reserved.add(job.client)
            else:
                self._general += 1
            self._running[job.client] += 1
            self._served[job.client] = time.monotonic()
            job.granted.set_result(reserved)

    def _release(self, job: _Job, reserved: bool) -> None:
        """Give back the place a job held and grant it to the next; forget a client with nothing left."""
        if reserved:
            self._reserved.discard(job.client)
        else:
            self._general -= 1
        self._running[job.client] -= 1
        if self._running[job.client] <= 0:
            del self._running[job.client]
            if not any(queued.client == job.client for queued in self._queue):
                self._served.pop(job.client, None)
        self._dispatch()

    async def _on_worker(self, spec: dict[str, Any], seconds: float) -> Any:
        """Run one granted job on an idle worker; retire the worker if the job failed, was cancelled, ran out of
        memory or left it too large."""
        if not self._started:
            self._started = True
            self._idle = [self._start_worker() for _ in range(self.workers + self.reserved_workers)]
        wanted = affinity(spec)
        worker = take_idle(self._idle, wanted) if self._idle else self._start_worker()
        self._busy.add(worker)
        try:
            outcome = await self._job(worker, spec, seconds)
        except BaseException:
            self._retire(worker)
            raise
        if outcome == OUT_OF_MEMORY:
            self._retire(worker)
            self._stats.memory_refusals += 1
            raise CompileMemoryError(f"compiling this constraint needed more than "
                                     f"{self.max_compile_bytes / (1 << 20):g} MiB (--max-compile-bytes)")
        self._busy.discard(worker)
        if wanted is not None:
            worker.affinity = wanted
        if resident_bytes(worker.process.pid or 0) > self.max_compile_bytes:
            self._retire(worker)
        else:
            self._idle.append(worker)
        return outcome

    def _start_worker(self) -> _Worker:
        return _Worker(self._context, self.max_compile_bytes)

    async def _job(self, worker: _Worker, spec: dict[str, Any], seconds: float) -> Any:
        if not worker.ready:
            if await self._receive(worker, STARTUP_SECONDS, "starting a compile worker") != "ready":
                raise WorkerLost("the compile worker did not start")
            worker.ready = True
        await asyncio.to_thread(worker.conn.send, (spec, seconds))
        return await self._receive(worker, seconds + self.grace_seconds, f"compiling (limit {seconds:.3g} s)")

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
            raise CompileTimeError(f"the compile worker did not answer within {timeout:.3g} s ({doing}); it was "
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
            self._stats.replaced += 1
            self._idle.append(self._start_worker())

    def close(self) -> None:
        """Kill every worker (a compile in progress included), refuse new jobs and cancel the queued ones."""
        self._closed = True
        for job in self._queue:
            if not job.granted.done():
                job.granted.set_exception(CompileError("the compile pool is closed"))
        self._queue = []
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
