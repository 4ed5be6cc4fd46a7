"""One choice of a reply decoded as an engine row, read asynchronously: events pumped from the row's thread.

The row's events are moved onto the event loop by a small thread per row (the engine's handle
blocks), read by a `ReplyReader`, and the row is cancelled as soon as the reader says the reply
ends (a stop string, a loop guard) or the caller goes away (a client that disconnects frees its row).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from stdsl.errors import Cancelled
from stdsl.runtime.batch.row import Event, RowHandle
from stdsl.runtime.generation import Generation
from stdsl.server.tools.formats import ParsedCall
from stdsl.server.tools.reply_reader import ReplyReader

_DONE = object()


async def row_events(handle: RowHandle) -> AsyncIterator[Event]:
    """The row's events on the event loop; leaving early (or being cancelled) cancels the row."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def deliver(item: Any) -> None:
        try:
            loop.call_soon_threadsafe(inbox.put_nowait, item)
        except RuntimeError:
            handle.cancel()

    def pump() -> None:
        try:
            for event in handle:
                deliver(event)
            deliver(_DONE)
        except BaseException as error:  # the row's StdslError travels to the reader
            deliver(error)

    threading.Thread(target=pump, name="stdsl-row-pump", daemon=True).start()
    try:
        while True:
            item = await inbox.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        if not handle.done:
            handle.cancel()


@dataclass
class ChoiceResult:
    """A finished choice: the reader (content, calls, text), the engine's Generation when it ran to its end."""

    reader: ReplyReader
    generation: Generation | None = None
    reasoning: str = ""

    @property
    def calls(self) -> list[ParsedCall]:
        return self.reader.calls


async def read_choice(handle: RowHandle, reader: ReplyReader, on_update: Any = None,
                      on_reasoning: Any = None) -> ChoiceResult:
    """Decode one choice to its end, handing each update to `on_update` and each piece of thinking text to
    `on_reasoning` (async callables) as they come; the reader sees only the answer."""
    result = ChoiceResult(reader)
    try:
        async for event in row_events(handle):
            if event.result is not None:
                result.generation = event.result
            if event.reasoning:
                result.reasoning += event.reasoning
                if on_reasoning is not None:
                    await on_reasoning(event.reasoning)
            update = reader.push(event.text)
            if on_update is not None:
                await on_update(update)
            if update.end is not None:
                break
    except Cancelled:
        if reader.end is None:
            raise
    update = reader.finish()
    if on_update is not None:
        await on_update(update)
    return result
