"""One choice of a reply decoded as an engine row, read on the event loop: the row's handle is awaited directly
(`async for`), with no thread per row, and read by a `ReplyReader`; the row is cancelled as soon as the reader
says the reply ends (a stop string, a loop guard) or the caller goes away (a client that disconnects frees its row).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from stdsl.compiler.tools.formats import ParsedCall
from stdsl.errors import Cancelled
from stdsl.generation import Generation
from stdsl.runtime.batch.handle import Event, RowHandle
from stdsl.server.tools.reply_reader import ReplyReader


async def row_events(handle: RowHandle) -> AsyncGenerator[Event, None]:
    """The row's events on the event loop; leaving early (or being cancelled) cancels the row."""
    try:
        async for event in handle:
            yield event
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
        async with aclosing(row_events(handle)) as events:
            async for event in events:
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
