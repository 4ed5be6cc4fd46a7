"""The typed values a streamed chat reply carries beside its text (`delta.stdsl`, docs/serving.md): each value of
the reply's constraint as it completes, read exactly as the final content reads it.

Only a reply under one constraint and no tools has them (a tool call's arguments stream as calls). The whole
output's text so far is not repeated (it is the content); a JSON string's text so far is.
"""

from __future__ import annotations

from typing import Any

from stdsl.generation import Generation
from stdsl.runtime.stream_values.readers import ValueReader, reader_for
from stdsl.server.requests.request_plan import Plan


class ReplyValues:
    """Reads one choice's typed values from the content it streams."""

    def __init__(self, reader: ValueReader) -> None:
        self._reader = reader
        self._text = ""

    def feed(self, content: str) -> list[dict[str, Any]]:
        """The values the next piece of content completes, as JSON data."""
        self._text += content
        return _sent(self._reader.feed(content)) if content else []

    def finish(self, generation: Generation | None, cut: bool) -> list[dict[str, Any]]:
        """The values the end of the reply completes: none unless the constraint accepted the whole of what was
        streamed (`cut`: the reply ended early, for repetition or a client's stop)."""
        if cut or generation is None or not generation.accepted or generation.text != self._text:
            return []
        return _sent(self._reader.finish())


def reply_values(plan: Plan, compiled: Any) -> ReplyValues | None:
    """A value reader for one choice of `plan` (None: no constraint, or tools)."""
    if plan.spec is None or compiled is None or plan.tool_format is not None:
        return None
    return ReplyValues(reader_for(compiled))


def _sent(events: list[Any]) -> list[dict[str, Any]]:
    return [event.to_dict() for event in events if event.complete or event.path != ()]
