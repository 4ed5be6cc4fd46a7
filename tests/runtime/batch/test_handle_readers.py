"""`RowHandle` on its own (no model): every reader sees the one log the engine published.

Property: under any interleaving of publishing and reading, each `for` loop, `async for` loop and done
callback opened at any point (before, during or after the row's end) sees exactly the published events
followed by the same end. Threads: a publisher thread and readers on other threads and an event loop agree.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.errors import Cancelled, GenerationError
from stdsl.generation import Generation, Stats
from stdsl.runtime.batch.handle import Event, RowHandle

END = "end"


def _generation(text: str) -> Generation:
    return Generation(text=text, tokens=[], stats=Stats(), accepted=True, finish_reason="stop")


def _script(count: int, fails: bool) -> tuple[list[Event], Generation | None, BaseException | None]:
    """What an engine publishes for one row: `count` pieces, then a result event and the result, or an error."""
    pieces = [Event(f"<{k}>", reasoning="r" if k % 3 == 0 else "") for k in range(count)]
    if fails:
        return pieces, None, Cancelled("cancelled in the test")
    result = _generation("".join(event.text for event in pieces))
    return [*pieces, Event("", result)], result, None


class SyncReader:
    """A `for` loop over the handle, advanced one event at a time, only when it would not block."""

    def __init__(self, handle: RowHandle) -> None:
        self.iterator: Iterator[Event] = iter(handle)
        self.seen: list[Any] = []

    def step(self, published: int, ended: bool) -> None:
        if self.finished or (len(self.seen) >= published and not ended):
            return
        try:
            self.seen.append(next(self.iterator))
        except StopIteration:
            self.seen.append(END)
        except Cancelled as error:
            self.seen.append(error)

    @property
    def finished(self) -> bool:
        return bool(self.seen) and not isinstance(self.seen[-1], Event)


class AsyncReader:
    """An `async for` loop over the handle on a test-driven event loop: a pending `__anext__` waits for a wake."""

    def __init__(self, handle: RowHandle, loop: asyncio.AbstractEventLoop) -> None:
        self.iterator: AsyncIterator[Event] = aiter(handle)
        self.loop = loop
        self.pending: asyncio.Future[Event] | None = None
        self.seen: list[Any] = []

    def step(self, published: int, ended: bool) -> None:
        if self.finished:
            return
        if self.pending is None:
            self.pending = asyncio.ensure_future(anext(self.iterator), loop=self.loop)
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.run_until_complete(asyncio.sleep(0))
        if not self.pending.done():
            return
        try:
            self.seen.append(self.pending.result())
        except StopAsyncIteration:
            self.seen.append(END)
        except Cancelled as error:
            self.seen.append(error)
        self.pending = None

    @property
    def finished(self) -> bool:
        return bool(self.seen) and not isinstance(self.seen[-1], Event)


def _expected(events: list[Event], error: BaseException | None) -> list[Any]:
    return [*events, error if error is not None else END]


@settings(max_examples=150, deadline=None)
@given(count=st.integers(0, 6), fails=st.booleans(), data=st.data())
def test_any_interleaving_of_readers_sees_the_published_log(count: int, fails: bool, data: st.DataObject) -> None:
    events, result, error = _script(count, fails)
    handle = RowHandle(lambda: None)
    loop = asyncio.new_event_loop()
    readers: list[SyncReader | AsyncReader] = []
    called: list[RowHandle] = []
    published, ended, registered = 0, False, 0
    try:
        for _ in range(data.draw(st.integers(0, 40), label="actions")):
            action = data.draw(st.sampled_from(["publish", "sync", "async", "callback", "step"]))
            if action == "publish" and published < len(events):
                handle._emit(events[published])
                published += 1
            elif action == "publish" and not ended:
                handle._finish(result, error)
                ended = True
            elif action == "sync":
                readers.append(SyncReader(handle))
            elif action == "async":
                readers.append(AsyncReader(handle, loop))
            elif action == "callback":
                before = len(called)
                handle.add_done_callback(called.append)
                registered += 1
                assert len(called) == before + int(ended)
            elif readers:
                reader = data.draw(st.sampled_from(readers))
                reader.step(published, ended)
            assert handle.done == ended
        for event in events[published:]:
            handle._emit(event)
        handle._finish(result, error)
        handle._emit(Event("after the end"))
        for reader in readers:
            for _ in range(4 * len(events) + 8):
                reader.step(len(events), True)
            assert reader.seen == _expected(events, error)
        assert called == [handle] * registered
        assert list(_drain(handle)) == _expected(events, error)
        assert asyncio.run(_drain_async(handle)) == _expected(events, error)
        if error is None:
            assert handle.result(timeout=0) is result
        else:
            with pytest.raises(Cancelled):
                handle.result(timeout=0)
    finally:
        loop.close()


def _drain(handle: RowHandle) -> Iterator[Any]:
    try:
        yield from handle
    except Cancelled as error:
        yield error
        return
    yield END


async def _drain_async(handle: RowHandle) -> list[Any]:
    seen: list[Any] = []
    try:
        async for event in handle:
            seen.append(event)
    except Cancelled as error:
        return [*seen, error]
    return [*seen, END]


@pytest.mark.parametrize("seed", range(4))
def test_readers_on_threads_and_a_loop_see_what_a_publishing_thread_published(seed: int) -> None:
    rng = random.Random(seed)
    events, result, error = _script(200, fails=seed % 2 == 1)
    handle = RowHandle(lambda: None)
    outcomes: dict[str, list[Any]] = {}
    called: list[RowHandle] = []
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()

    def read(name: str) -> None:
        outcomes[name] = list(_drain(handle))

    async def read_async(name: str) -> None:
        outcomes[name] = await _drain_async(handle)

    def publish() -> None:
        for k, event in enumerate(events):
            handle._emit(event)
            if k % 20 == 0:
                threading.Event().wait(rng.random() / 1000)
        handle._finish(result, error)

    publisher = threading.Thread(target=publish)
    threads: list[threading.Thread] = []
    futures = []
    publisher.start()
    for k in range(8):
        if k % 2:
            futures.append(asyncio.run_coroutine_threadsafe(read_async(f"async {k}"), loop))
        else:
            threads.append(threading.Thread(target=read, args=(f"thread {k}",)))
            threads[-1].start()
        handle.add_done_callback(called.append)
        threading.Event().wait(rng.random() / 500)
    publisher.join(30)
    for thread in threads:
        thread.join(30)
    for future in futures:
        future.result(30)
    loop.call_soon_threadsafe(loop.stop)
    loop_thread.join(30)
    loop.close()
    assert len(outcomes) == 8
    for name, seen in outcomes.items():
        assert seen == _expected(events, error), name
    assert called == [handle] * 8


def test_a_raising_done_callback_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    handle = RowHandle(lambda: None)
    called: list[str] = []

    def broken(_: RowHandle) -> None:
        raise ValueError("a caller's bug")

    handle.add_done_callback(broken)
    handle.add_done_callback(lambda _: called.append("second"))
    with caplog.at_level(logging.ERROR, logger="stdsl.runtime.batch.handle"):
        handle._finish(_generation("x"), None)
        handle.add_done_callback(broken)
    assert called == ["second"]
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [ValueError, ValueError]
    assert handle.result(timeout=0).text == "x"


def test_an_async_reader_cancelled_while_it_waits_leaves_nothing_behind() -> None:
    handle = RowHandle(lambda: None)

    async def cancelled_reader() -> list[Event]:
        task = asyncio.ensure_future(_drain_async(handle))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        handle._emit(Event("a"))
        handle._finish(_generation("a"), None)
        return [event async for event in handle]

    seen = asyncio.run(cancelled_reader())
    assert [event.text for event in seen] == ["a"]
    assert handle._wakers == []


def test_publishing_to_a_reader_whose_loop_has_closed_does_not_raise() -> None:
    handle = RowHandle(lambda: None)
    loop = asyncio.new_event_loop()
    waiting = loop.create_task(_drain_async(handle))
    loop.run_until_complete(asyncio.sleep(0.01))
    assert not waiting.done()
    loop.close()
    handle._emit(Event("a"))
    handle._finish(_generation("a"), None)
    assert [event.text for event in handle] == ["a"]
    waiting._log_destroy_pending = False


def test_result_times_out_with_a_generation_error_and_cancel_calls_the_engine() -> None:
    asked: list[bool] = []
    handle = RowHandle(lambda: asked.append(True))
    with pytest.raises(GenerationError, match="no result within 0.01 s"):
        handle.result(timeout=0.01)
    handle.cancel()
    assert asked == [True] and not handle.done
