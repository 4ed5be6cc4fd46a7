"""The server reads a row by awaiting its handle on the event loop: no thread per row, and a reply that ends early
(a stop string) or a read that is abandoned (a client gone) cancels the row. No model: the engine's side of the
handle is played by a thread that publishes events."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from stdsl.errors import Cancelled
from stdsl.generation import Generation, Stats
from stdsl.runtime.batch.handle import Event, RowHandle
from stdsl.server.requests.rows import read_choice
from stdsl.server.tools.reply_reader import ReplyReader, ReplyUpdate

PIECES = ["Hello", ", wor", "ld. ", "STOP", " never sent"]


def _publisher(handle: RowHandle, gate: threading.Event, pieces: list[str]) -> threading.Thread:
    """The engine's side: once `gate` opens, publish `pieces` one by one, then the finished result."""

    def publish() -> None:
        gate.wait(30)
        for piece in pieces:
            handle._emit(Event(piece))
        text = "".join(pieces)
        result = Generation(text=text, tokens=[], stats=Stats(), accepted=True, finish_reason="stop")
        handle._emit(Event("", result))
        handle._finish(result, None)

    return threading.Thread(target=publish, daemon=True)


def _refusing_new_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: threading.Thread) -> None:
        raise AssertionError(f"reading a row started a thread ({self.name})")

    monkeypatch.setattr(threading.Thread, "start", refuse)


def _handle(cancelled: list[bool]) -> RowHandle:
    return RowHandle(lambda: cancelled.append(True))


def test_a_row_is_read_on_the_loop_without_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    cancelled: list[bool] = []
    handle, gate = _handle(cancelled), threading.Event()
    _publisher(handle, gate, PIECES[:3]).start()
    seen: list[str] = []

    async def on_update(update: ReplyUpdate) -> None:
        seen.append(update.content)

    async def read() -> object:
        _refusing_new_threads(monkeypatch)
        reading = asyncio.ensure_future(read_choice(handle, ReplyReader(), on_update))
        await asyncio.sleep(0.01)
        gate.set()
        return await asyncio.wait_for(reading, 30)

    result = asyncio.run(read())
    assert result.generation is not None and result.generation.text == "Hello, world. "
    assert "".join(seen) == result.reader.content == "Hello, world. "
    assert cancelled == []


def test_a_reply_ended_by_a_stop_string_cancels_its_row() -> None:
    cancelled: list[bool] = []
    handle = _handle(cancelled)

    async def read() -> object:
        reading = asyncio.ensure_future(read_choice(handle, ReplyReader(stops=["STOP"])))
        for piece in PIECES:
            await asyncio.sleep(0.005)
            handle._emit(Event(piece))
        return await asyncio.wait_for(reading, 30)

    result = asyncio.run(read())
    assert result.reader.end == "stop" and result.reader.content == "Hello, world. "
    assert cancelled == [True] and not handle.done


@pytest.mark.parametrize("abandon", [lambda task: task.cancel(), None], ids=["task cancelled", "row cancelled"])
def test_an_abandoned_read_cancels_its_row_and_a_cancelled_row_ends_the_read(
        abandon: Callable[[asyncio.Task[object]], object] | None) -> None:
    cancelled: list[bool] = []
    handle = _handle(cancelled)

    async def read() -> None:
        reading = asyncio.ensure_future(read_choice(handle, ReplyReader()))
        handle._emit(Event("partial"))
        await asyncio.sleep(0.01)
        if abandon is not None:
            abandon(reading)
            with pytest.raises(asyncio.CancelledError):
                await reading
            return
        threading.Thread(target=handle._finish, args=(None, Cancelled("the client left"))).start()
        with pytest.raises(Cancelled):
            await asyncio.wait_for(reading, 30)

    asyncio.run(read())
    assert cancelled == ([True] if abandon is not None else [])
