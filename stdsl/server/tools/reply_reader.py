"""Reads a reply while it is decoded: free text safe to send, finished tool calls, stop strings, loop guards.

Text that could still begin a call tag or a stop string is held back until it is decided.  A
stop string ends the reply only in free text (inside a call the constraint wins).  For small
models the guard ends a reply that repeats a call, passes `max_calls` calls, or ends with the
same block of text three times in a row (blocks of `MIN_BLOCK`..`MAX_BLOCK` characters).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stdsl.compiler.tools.formats import ParsedCall, ToolFormat

MIN_BLOCK, MAX_BLOCK = 16, 512
REPEATS = 3
MAX_CALLS = 16
STOP, REPETITION = "stop", "repetition"


@dataclass
class ReplyUpdate:
    """What a new piece of text decided: content to send, calls completed, and why the reply must end (or None)."""

    content: str = ""
    calls: list[ParsedCall] = field(default_factory=list)
    end: str | None = None


def _held_suffix(text: str, patterns: Sequence[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of one of `patterns`."""
    best = 0
    for pattern in patterns:
        for size in range(min(len(pattern) - 1, len(text)), best, -1):
            if text.endswith(pattern[:size]):
                best = size
                break
    return best


def ends_in_loop(text: str, min_block: int = MIN_BLOCK, max_block: int = MAX_BLOCK) -> bool:
    """Whether `text` ends with one block of min_block..max_block characters repeated three times."""
    for size in range(min_block, min(max_block, len(text) // REPEATS) + 1):
        block = text[-size:]
        if all(text[-(k + 1) * size: -k * size] == block for k in range(1, REPEATS)):
            return True
    return False


class ReplyReader:
    """Consumes a reply's text piece by piece; `tool_format` None reads plain content (no calls, no guard)."""

    def __init__(self, tool_format: ToolFormat | None = None, parameters: Mapping[str, Mapping[str, Any]] | None = None,
                 stops: Sequence[str] = (), guard: bool = True, max_calls: int = MAX_CALLS) -> None:
        self.tool_format = tool_format
        self.parameters = parameters or {}
        self.stops = tuple(stops)
        self.guard = guard and tool_format is not None
        self.max_calls = max_calls
        self.text = ""
        self.content = ""
        self.calls: list[ParsedCall] = []
        self.end: str | None = None
        self._sent = 0

    def push(self, piece: str) -> ReplyUpdate:
        """Take newly decided text; return what may be sent now and whether the reply must end."""
        if self.end is not None:
            return ReplyUpdate(end=self.end)
        self.text += piece
        return self._read(final=False)

    def finish(self) -> ReplyUpdate:
        """The decoder finished: release any held text and the last calls."""
        return self._read(final=True)

    def _read(self, final: bool) -> ReplyUpdate:
        update = ReplyUpdate()
        tool_format = self.tool_format
        if tool_format is not None and not tool_format.streams_content:
            return self._read_whole(final)
        literals = tool_format.triggers if tool_format is not None else ()
        start = tool_format.call_start(self.text) if tool_format is not None else -1
        call_start = start if start >= 0 else None
        free = self.text if call_start is None else self.text[:call_start]
        hits = [i for i in (free.find(s) for s in self.stops) if i >= 0]
        if hits:
            free, call_start, self.end = free[: min(hits)], None, STOP
        ready = len(free)
        if call_start is None and self.end is None and not final:
            ready -= _held_suffix(free, (*literals, *self.stops))
        if ready > self._sent:
            update.content = free[self._sent: ready]
            self.content += update.content
            self._sent = ready
        if call_start is not None and tool_format is not None:
            calls = tool_format.read_calls(self.text, call_start, self.parameters)
            update.calls = self._accept(calls[len(self.calls):])
        if self.guard and call_start is None and self.end is None and not final and ends_in_loop(self.text):
            self.end = REPETITION
        update.end = self.end
        return update

    def _read_whole(self, final: bool) -> ReplyUpdate:
        """A format whose content is known only at the end (Harmony): everything is decided when the reply ends."""
        update = ReplyUpdate()
        if final and self.tool_format is not None and self.end is None:
            content, calls = self.tool_format.parse(self.text, self.parameters)
            hits = [i for i in (content.find(s) for s in self.stops) if i >= 0]
            if hits:
                content, self.end = content[: min(hits)], STOP
            update.content = content
            self.content = content
            update.calls = self._accept(calls)
        update.end = self.end
        return update

    def _accept(self, new: list[ParsedCall]) -> list[ParsedCall]:
        """Append newly finished calls; a repeated call or one past `max_calls` ends the reply instead."""
        accepted: list[ParsedCall] = []
        seen = {_identity(c) for c in self.calls}
        for call in new:
            if self.guard and (_identity(call) in seen or len(self.calls) >= self.max_calls):
                self.end = REPETITION
                break
            seen.add(_identity(call))
            self.calls.append(call)
            accepted.append(call)
        return accepted


def _identity(call: ParsedCall) -> tuple[str, str]:
    try:
        arguments = json.dumps(json.loads(call.arguments), sort_keys=True)
    except ValueError:
        arguments = call.arguments
    return call.name, arguments
