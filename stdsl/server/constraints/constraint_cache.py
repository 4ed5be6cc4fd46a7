"""The server's async front of the cache registry: compiled constraints by canonical spec text, compiled off the loop.

Compiles run in worker processes (`compile_pool.py`): each has a time limit and is refused past it,
and a worker that overruns it is killed and replaced, so one client's schema never holds up the others.
Concurrent requests for the same spec share one compile, which is cancelled (its worker freed) once every
request waiting for it has gone; compiles are queued per client (`CompilePool`).  The compiled constraints
are entries of a `stdsl.caches` kind ("server constraints"): least recently used go first once the automata
held pass `max_bytes`, or the registry's budget, and `stdsl.caches.clear()` empties it.

A tool list first seen with `tool_choice` none or one named tool compiles few or none of its calls; its reply with
`tool_choice` auto (what its later requests most likely need) is then compiled too, in the background in the same
client's turn (`warm_variant`): no request waits for it, and the worker that compiles it keeps the list's calls.

A tool list with at least `SPLIT_MIN_TOOLS` function tools this cache has not sent to a worker before, met while two
or more general workers and as many spare cores are free (`SPARE_CORES`), is compiled across them: each builds the
call DFAs of its share of those tools (kind `tool_calls`), and one worker assembles the reply from them (the spec's
`calls`), which then holds every call, so a later change of one tool costs one tool there.  On free cores that takes
0.57-0.68 of one worker's time at 128 and 400 tools, pickling the calls under 1%
(`benchmarks/results/tool_compile_parallel.md`); on two cores under load a split list waits longer than a whole one
(the shares take the cores the decode and other processes use), hence the spare cores.  The shares and the assembly
together keep the compile's time limit; a share that fails is dropped and the whole list compiled as before in the
time left, which reports the error.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stdsl.caches import CacheKind
from stdsl.compiler.constraint_spec import Compiled, Outcome, Spec, canonical_text
from stdsl.errors import CompileError, CompileTimeError
from stdsl.server.constraints.compile_pool import (
    DEFAULT_WORKERS,
    GRACE_SECONDS,
    MAX_COMPILE_BYTES,
    RESERVED_WORKERS,
    CompilePool,
    PoolStats,
    WorkerLost,
    small_job,
)


@dataclass
class CacheStats:
    """What the cache has done: entries and bytes held, compiles, hits, evictions, seconds on a worker, compiles
started with no request waiting (`warm_variant`), tool lists compiled across workers, and its compile pool's queue
and workers."""

    entries: int = 0
    bytes: int = 0
    compiles: int = 0
    hits: int = 0
    evictions: int = 0
    compile_seconds: float = 0.0
    warmed: int = 0
    split: int = 0
    pool: PoolStats = field(default_factory=PoolStats)


class UnsupportedSchema(CompileError):
    """A schema refused by the compiler (the message names the keyword and its schema path)."""


REFUSALS: dict[str, type[CompileError]] = {"SchemaError": UnsupportedSchema, "CompileTimeError": CompileTimeError}


SPLIT_MIN_TOOLS = 32
"""A tool list with at least this many tools not met before is compiled across the free workers."""
SPARE_CORES = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) - 1
"""The cores this process may run on but one (the decode's): a list is split across at most this many workers, so
on two cores, where the shares would take the decode's core, it is not split."""
SEEN_TOOLS = 1 << 16
"""How many tools (per format) the cache remembers having sent to a worker."""


def _tools_part(spec: Spec) -> Spec | None:
    """The tools spec of `spec` (itself, or a reasoning spec's answer), where it has choice auto or required (the
    replies that compile every call); None otherwise."""
    if spec.get("kind") == "reasoning" and isinstance(spec.get("answer"), dict):
        return _tools_part(spec["answer"])
    if spec.get("kind") != "tools" or spec.get("choice") not in ("auto", "required"):
        return None
    return spec


def _on_tools(spec: Spec, change: Callable[[Spec], Spec | None]) -> Spec | None:
    """`spec` with its tools spec (itself, or a reasoning spec's answer) replaced by `change` of it; None where it
    holds no tools spec or `change` gives None."""
    if spec.get("kind") == "reasoning" and isinstance(spec.get("answer"), dict):
        answer = _on_tools(spec["answer"], change)
        return None if answer is None else {**spec, "answer": answer}
    return change(spec) if spec.get("kind") == "tools" else None


def _with_calls(spec: Spec, calls: list[Any]) -> Spec:
    """`spec` (holding a tools spec) with its tools spec carrying `calls` (call DFAs built by other workers)."""
    changed = _on_tools(spec, lambda tools: {**tools, "calls": calls})
    assert changed is not None
    return changed


def warm_variant(spec: Spec) -> Spec | None:
    """The spec a tool list's later requests most likely need where compiling `spec` leaves most of its calls
    uncompiled: a tools spec (or a reasoning spec answering with one) with `tool_choice` none or one named tool,
    with choice auto instead.  None for every other spec."""
    return _on_tools(spec, lambda tools: None if tools.get("choice") in ("auto", "required")
                     else {**tools, "choice": "auto"})


@dataclass(eq=False)
class _Pending:
    """A compile in progress and how many requests wait for it."""

    task: asyncio.Future[Compiled]
    waiters: int = 0


class ConstraintCache:
    """Compiled constraints by canonical spec text; `await get(spec)` compiles on a miss within `compile_seconds`."""

    def __init__(self, max_bytes: int = 64 << 20, compile_seconds: float = 30.0, workers: int = DEFAULT_WORKERS,
                 grace_seconds: float = GRACE_SECONDS, max_compile_bytes: int = MAX_COMPILE_BYTES,
                 reserved_workers: int = RESERVED_WORKERS) -> None:
        self.max_bytes = max_bytes
        self.compile_seconds = compile_seconds
        self._entries: CacheKind[Compiled] = CacheKind("server constraints", max_bytes=max_bytes)
        self._compiles = 0
        self._warmed = 0
        self._split = 0
        self._seen: dict[str, None] = {}
        self._pending: dict[str, _Pending] = {}
        self.pool = CompilePool(workers, grace_seconds=grace_seconds, max_compile_bytes=max_compile_bytes,
                                reserved_workers=reserved_workers)

    @property
    def stats(self) -> CacheStats:
        """What the cache holds now (from the registry) and has done."""
        held = self._entries.stats()
        pool = self.pool.stats
        return CacheStats(held.entries, held.bytes, self._compiles, held.hits, held.evictions, pool.compile_seconds,
                          self._warmed, self._split, pool)

    def close(self) -> None:
        """Stop the compile workers, a compile in progress included, and drop the compiles still pending."""
        for pending in self._pending.values():
            pending.task.cancel()
        self.pool.close()

    async def get(self, spec: Spec, client: str = "") -> Compiled:
        """The compiled constraint of `spec`: from the cache, from a compile already running, or compiled now in
        `client`'s turn.  Cancelling the last request waiting for a compile cancels the compile."""
        key = canonical_text(spec)
        held = self._entries.find((), (key,))
        if held is not None:
            return held[0]
        if key not in self._pending:
            self._pending[key] = _Pending(asyncio.ensure_future(self._compile(key, spec, client)))
            variant = warm_variant(spec)
            if variant is not None:
                self.warm(variant, client)
        pending = self._pending[key]
        pending.waiters += 1
        try:
            return await asyncio.shield(pending.task)
        except asyncio.CancelledError:
            if pending.task.cancelled():
                raise CompileError("the server is shutting down; the constraint was not compiled") from None
            if pending.waiters == 1:
                pending.task.cancel()
                self._pending.pop(key, None)
            raise
        finally:
            pending.waiters -= 1
            if pending.task.done() and self._pending.get(key) is pending:
                del self._pending[key]

    def warm(self, spec: Spec, client: str = "") -> bool:
        """Start compiling `spec` in `client`'s turn with no request waiting for it, unless it is held or already
        compiling (a held one counts as a hit); True when started.  A request for it meanwhile joins that compile; a
        refusal is left for such a request to report (it compiles the spec again); the cache's close cancels it."""
        key = canonical_text(spec)
        if key in self._pending or self._entries.find((), (key,)) is not None:
            return False
        pending = self._pending[key] = _Pending(asyncio.ensure_future(self._compile(key, spec, client)))
        self._warmed += 1

        def finished(task: asyncio.Future[Any]) -> None:
            if not task.cancelled():
                task.exception()
            if self._pending.get(key) is pending and pending.waiters == 0:
                del self._pending[key]

        pending.task.add_done_callback(finished)
        return True

    async def render(self, spec: Spec, seconds: float, client: str = "") -> list[dict[str, str]]:
        """A program's messages rendered in a compile worker (its memory cap, killed past `seconds`) in `client`'s
        turn: clients' templates never run in the server's process. Not cached (arguments differ per request)."""
        try:
            messages, error_class, message = await self.pool.run(dict(spec), seconds, client=client, small=True)
        except WorkerLost:
            raise CompileError("the compile worker stopped while rendering this program") from None
        if messages is None:
            raise REFUSALS.get(error_class or "", CompileError)(message)
        return list(messages)

    async def _run(self, spec: Spec, key: str, client: str, seconds: float) -> Outcome:
        """One compile in a worker within `seconds`; a worker that crashed is replaced and the compile retried once."""
        small = small_job(dict(spec), key)
        try:
            return await self.pool.run(dict(spec), seconds, client=client, small=small)
        except WorkerLost:
            pass
        try:
            return await self.pool.run(dict(spec), seconds, client=client, small=small)
        except WorkerLost:
            raise CompileError("the compile worker stopped while compiling this constraint") from None

    def _shares(self, spec: Spec) -> list[list[int]]:
        """The shares of a tool list's tools to build across the free workers (none: compile it whole), and the
        list's tools remembered as met."""
        tools = _tools_part(spec)
        if tools is None:
            return []
        unseen = []
        for index, entry in enumerate(tools["tools"]):
            if "custom" in entry:
                continue
            seen = canonical_text({"format": tools["format"], "tokens": tools.get("tokens"), "tool": entry})
            if seen in self._seen:
                del self._seen[seen]
            else:
                unseen.append(index)
            self._seen[seen] = None
        while len(self._seen) > SEEN_TOOLS:
            del self._seen[next(iter(self._seen))]
        free = min(self.pool.free_workers(), SPARE_CORES)
        if len(unseen) < SPLIT_MIN_TOOLS or free < 2:
            return []
        return [unseen[part::free] for part in range(free)]

    async def _calls_across_workers(self, spec: Spec, shares: list[list[int]], client: str) -> list[Any] | None:
        """The call DFAs of each share, built at once on as many workers; None where a share failed."""
        tools = _tools_part(spec)
        jobs = [self.pool.run({"kind": "tool_calls", "tools": dict(tools or {}), "share": share}, self.compile_seconds,
                              client=client) for share in shares]
        try:
            outcomes = await asyncio.gather(*jobs)
        except CompileError:
            return None
        if any(calls is None for calls, _, _ in outcomes):
            return None
        return [pair for calls, _, _ in outcomes for pair in calls]

    async def _compile(self, key: str, spec: Spec, client: str) -> Compiled:
        began = time.monotonic()
        shares = self._shares(spec)
        if shares:
            calls = await self._calls_across_workers(spec, shares, client)
            if calls is not None:
                self._split += 1
                spec = _with_calls(spec, calls)
        left = self.compile_seconds - (time.monotonic() - began)
        compiled, error_class, message = await self._run(spec, key, client, max(left, 1e-3))
        if compiled is None:
            raise REFUSALS.get(error_class or "", CompileError)(message)
        self._compiles += 1
        self._entries.put((), compiled, (key,))
        return compiled
