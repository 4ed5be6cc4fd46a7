"""The caller's side of a submitted request: a log of its events that any number of readers can follow.

The engine's thread publishes `Event`s and then the end (the `Generation`, or the row's StdslError) into
one log under one lock. Readers never consume the log: every `for` or `async for` over a handle replays it
from the first event and then follows it, so a second loop, loops on several threads or event loops, and
loops after the end all see the same sequence. `async for` and `add_done_callback` are woken by the
publishing thread (through `loop.call_soon_threadsafe` for a loop), so waiting costs no thread per request.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

from stdsl.control.log import Log
from stdsl.errors import Cancelled, GenerationError
from stdsl.generation import Generation

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """Output text newly decided by one step, and the finished `Generation` on a row's last event.

    A reasoning model's thinking text comes in `reasoning`, never in `text` (the answer).
    """

    text: str
    result: Generation | None = None
    reasoning: str = ""


DoneCallback = Callable[["RowHandle"], object]
"""Called with the handle once it has finished, failed or been cancelled."""


def _ended_already() -> None:
    """A handle's cancel once its row has ended: nothing to free.  The engine's cancel is dropped then, since it
    holds the row's submission, which holds the handle (a reference cycle keeping the row's controller and log)."""


class RowHandle:
    """The caller's side of a submitted request: read its events (again and again, `for` or `async for`), wait
    for its result, be called back when it ends, or cancel it. Safe to use from any thread.

    A loop that cancels the handle it reads (`for event in handle: handle.cancel()`) ends cleanly after the
    events decided so far; `result()` then raises `Cancelled`, the record of the cancel. A row cancelled by the
    engine rather than through `cancel()` (the process exiting) ends every loop with `Cancelled`.
    """

    def __init__(self, cancel: Callable[[], None]) -> None:
        self._cancel = cancel
        self._cancel_asked = False
        lock = threading.RLock()
        self._changed = threading.Condition(lock)
        self._end = threading.Condition(lock)
        """The end alone, under the same lock: `result()` waits on it, so a waiter for the result is not woken by
        every token's event."""
        self._events: list[Event] = []
        self._ended = False
        self._result: Generation | None = None
        self._error: BaseException | None = None
        self._callbacks: list[DoneCallback] = []
        self._wakers: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.log: Log | None = None
        """The row's log once it completed (what certified drafting resumes a draft from); None before, or when it
        failed or was cancelled."""

    def __iter__(self) -> Iterator[Event]:
        """Every event from the first, blocking for those still to come; at the end, raises the row's error (a
        StdslError: failed, or cancelled other than by `cancel()`) if it has one."""
        seen = 0
        while True:
            with self._changed:
                self._changed.wait_for(lambda: seen < len(self._events) or self._ended)
                fresh = self._events[seen:]
            if not fresh:
                break
            seen += len(fresh)
            yield from fresh
        self._raise_reading_error()

    def __aiter__(self) -> AsyncIterator[Event]:
        """As `__iter__`, awaiting on the running event loop instead of blocking a thread."""
        return self._follow()

    async def _follow(self) -> AsyncIterator[Event]:
        loop = asyncio.get_running_loop()
        seen = 0
        while True:
            waker: asyncio.Future[None] | None = None
            with self._changed:
                fresh = self._events[seen:]
                if not fresh and not self._ended:
                    waker = loop.create_future()
                    self._wakers.append((loop, waker))
            if fresh:
                seen += len(fresh)
                for event in fresh:
                    yield event
            elif waker is None:
                break
            else:
                try:
                    await waker
                finally:
                    self._forget(waker)
        self._raise_reading_error()

    def result(self, timeout: float | None = None) -> Generation:
        """The finished `Generation` (blocks); raises the row's StdslError, or GenerationError on timeout."""
        with self._end:
            if not self._end.wait_for(lambda: self._ended, timeout):
                raise GenerationError(f"no result within {timeout} s")
        self._raise_error()
        assert self._result is not None
        return self._result

    def add_done_callback(self, callback: DoneCallback) -> None:
        """Call `callback(handle)` once when the row ends (finished, failed or cancelled), on the thread that ends
        it; at once, on this thread, if it has ended already. An exception it raises is logged, never raised."""
        with self._changed:
            if not self._ended:
                self._callbacks.append(callback)
                return
        self._call(callback)

    def cancel(self) -> None:
        """Ask the engine to free this row at its next step: loops over the handle then end after the events
        decided so far, and `result()` raises `Cancelled` (unless the row had already finished)."""
        self._cancel_asked = True
        self._cancel()

    @property
    def done(self) -> bool:
        """Whether the row has finished, failed or been cancelled."""
        return self._ended

    def _emit(self, event: Event) -> None:
        """Publish one event (the engine's side); ignored once the row has ended, so every reader sees one log."""
        with self._changed:
            if self._ended:
                return
            self._events.append(event)
            wakers, self._wakers = self._wakers, []
            self._changed.notify_all()
        _wake(wakers)

    def _finish(self, result: Generation | None, error: BaseException | None) -> None:
        """End the row once (the engine's side): a later end (a failure after a cancel) changes nothing."""
        with self._changed:
            if self._ended:
                return
            self._result, self._error, self._ended = result, error, True
            self._cancel = _ended_already
            wakers, self._wakers = self._wakers, []
            callbacks, self._callbacks = self._callbacks, []
            self._changed.notify_all()
            self._end.notify_all()
        _wake(wakers)
        for callback in callbacks:
            self._call(callback)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _raise_reading_error(self) -> None:
        """The end of a loop over the events: the row's error, unless it is the cancel the caller asked for."""
        if not (self._cancel_asked and isinstance(self._error, Cancelled)):
            self._raise_error()

    def _forget(self, waker: asyncio.Future[None]) -> None:
        """Drop an async reader's waker that was not used (its task was cancelled while it waited)."""
        with self._changed:
            self._wakers = [entry for entry in self._wakers if entry[1] is not waker]

    def _call(self, callback: DoneCallback) -> None:
        try:
            callback(self)
        except Exception:  # a caller's callback must never break the thread that ends rows
            logger.exception("a done callback of a request raised")


def _wake(wakers: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]) -> None:
    """Resolve async readers' wakers on their own loops (a loop already closed has no reader left to wake)."""
    for loop, waker in wakers:
        try:
            loop.call_soon_threadsafe(_resolve, waker)
        except RuntimeError:
            continue


def _resolve(waker: asyncio.Future[None]) -> None:
    if not waker.done():
        waker.set_result(None)
