"""A row's handle on the real engine: iterating again replays every event and ends, `async for` and done callbacks
read it too, a drained `Stream` gives its result at once, and a caller interrupted while `generate` waits frees
its row, so the engine goes on serving the next call."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

import stdsl
from stdsl.errors import Cancelled
from stdsl.generation import Generation, Stats
from stdsl.runtime.batch.handle import Event, RowHandle
from stdsl.runtime.decode import Stream, engine_for
from stdsl.runtime.engine import Engine


def _within(seconds: float, work) -> object:
    """`work()`'s value (or the exception it raised), failing the test if it has not returned after `seconds` (a
    hang, not a slow run)."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as error:
            out.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds} s"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def test_stream_result_after_iteration_returns_the_generation(tiny_model) -> None:
    stream = stdsl.stream(tiny_model, "Count.", {"type": "integer"}, max_tokens=8)
    pieces = list(stream)
    result = _within(30, stream.result)
    assert "".join(pieces) == result.text == stream.generation.text


def test_a_handle_iterated_again_replays_every_event(tiny_model) -> None:
    handle = Engine(tiny_model, max_rows=1).submit("Go.", {"type": "integer"}, max_tokens=8)
    first = list(handle)
    second = _within(30, lambda: list(handle))
    assert second == first and first[-1].result is handle.result(timeout=30)
    assert "".join(event.text for event in first) == first[-1].result.text


def test_async_for_and_done_callbacks_read_a_row_of_the_engine(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=2)
    called: list[RowHandle] = []
    ended = threading.Event()
    handle = engine.submit("Go.", {"type": "integer"}, max_tokens=8)
    handle.add_done_callback(called.append)
    handle.add_done_callback(lambda _: ended.set())

    async def read() -> list[object]:
        return [event async for event in handle]

    seen = asyncio.run(asyncio.wait_for(read(), 30))
    assert ended.wait(30) and called == [handle]
    assert seen == list(handle) and seen[-1].result is handle.result(timeout=0)
    handle.add_done_callback(called.append)
    assert called == [handle, handle]


def test_a_raising_done_callback_does_not_stop_the_engine(tiny_model, caplog) -> None:
    engine = Engine(tiny_model, max_rows=1)
    first = engine.submit("Go.", {"type": "integer"}, max_tokens=8)

    def broken(_: RowHandle) -> None:
        raise RuntimeError("a caller's bug")

    with caplog.at_level(logging.ERROR, logger="stdsl.runtime.batch.handle"):
        first.add_done_callback(broken)
        first.result(timeout=30)
        after = engine.submit("Again.", {"type": "integer"}, max_tokens=8).result(timeout=30)
    assert after.text.lstrip("-").isdigit()
    assert any(record.exc_info and record.exc_info[0] is RuntimeError for record in caplog.records)


def test_a_cancelled_row_ends_every_reader_cleanly_and_its_result_is_cancelled(tiny_model) -> None:
    """Issue 35: `cancel()` ends every loop over the handle after the events decided so far (no exception out
    of the `for`); `result()` records the cancel by raising Cancelled."""
    handle = Engine(tiny_model, max_rows=1).submit("Write on and on.", None, max_tokens=100_000)
    handle.cancel()
    for _ in range(2):
        events = _within(30, lambda: list(handle))
        assert all(event.result is None for event in events)

    async def read() -> int:
        return len([event async for event in handle])

    assert asyncio.run(asyncio.wait_for(read(), 30)) == len(events)
    with pytest.raises(Cancelled):
        handle.result(timeout=30)


def test_cancelling_inside_the_loop_that_reads_the_handle_ends_the_loop(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=2)
    handle = engine.submit("Write on and on.", None, max_tokens=100_000)
    pieces = []
    for event in handle:
        pieces.append(event.text)
        if len(pieces) == 3:
            handle.cancel()
    assert len(pieces) >= 3 and handle.done
    with pytest.raises(Cancelled):
        handle.result(timeout=30)
    streamed = stdsl.stream(tiny_model, "Write on and on.", None, max_tokens=100_000)
    count = 0
    for _ in streamed:
        count += 1
        streamed.cancel()
    assert count >= 1 and streamed.generation is None
    with pytest.raises(Cancelled):
        streamed.result()
    assert engine.submit("Again.", {"type": "integer"}, max_tokens=8).result(timeout=30).text.lstrip("-").isdigit()


def test_interrupting_generate_cancels_its_row_and_the_engine_serves_the_next_call(tiny_model, monkeypatch) -> None:
    waited: list[RowHandle] = []
    plain_result = RowHandle.result

    def interrupted(self: RowHandle, timeout: float | None = None):
        waited.append(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(RowHandle, "result", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stdsl.generate(tiny_model, "Write on and on.", None, max_tokens=100_000)
    monkeypatch.setattr(RowHandle, "result", plain_result)
    (handle,) = waited
    with pytest.raises(Cancelled):
        handle.result(timeout=30)
    after = stdsl.generate(tiny_model, "Count.", {"type": "integer"}, max_tokens=8)
    assert after.text.lstrip("-").isdigit()
    assert engine_for(tiny_model).metrics()["rows_active"] == 0


def test_interrupting_generate_batch_cancels_every_row_it_submitted(tiny_model, monkeypatch) -> None:
    made: list[RowHandle] = []
    plain_init = RowHandle.__init__

    def recorded(self: RowHandle, cancel) -> None:
        plain_init(self, cancel)
        made.append(self)

    def interrupted(self: RowHandle, timeout: float | None = None):
        raise KeyboardInterrupt

    monkeypatch.setattr(RowHandle, "__init__", recorded)
    monkeypatch.setattr(RowHandle, "result", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stdsl.generate_batch(tiny_model, [{"prompt": "On."}, {"prompt": "And on."}], max_tokens=100_000)
    monkeypatch.undo()
    assert len(made) == 2
    for handle in made:
        with pytest.raises(Cancelled):
            handle.result(timeout=30)


def test_a_stream_read_again_gathers_its_reasoning_once() -> None:
    handle = RowHandle(lambda: None)
    result = Generation(text="a", tokens=[], stats=Stats(), accepted=True, finish_reason="stop", reasoning="think ")
    for event in (Event("", reasoning="think "), Event("a"), Event("", result)):
        handle._emit(event)
    handle._finish(result, None)
    stream = Stream(handle)
    assert list(stream) == ["a"] and stream.result() is result and list(stream) == ["a"]
    assert stream.reasoning == "think " and stream.generation is result
