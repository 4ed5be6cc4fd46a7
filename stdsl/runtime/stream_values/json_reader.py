"""An incremental JSON reader over the bytes a constraint accepted: every value at its path as its last byte arrives.

The constraint guarantees the bytes are a prefix of a valid document, so the reader never guesses: a string,
object, array or literal is complete at its closing byte, a number at the byte after it (or at the end of the
output). Each value is read with `json.loads`, so it equals what the final result reads at that path. A string
value still open also yields its text so far, decoded only up to its last complete character or escape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

Path = tuple[str | int, ...]

_SPACE = frozenset(b" \t\n\r")
_NUMBER = frozenset(b"0123456789+-.eE")
_LITERALS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}


@dataclass(frozen=True)
class StreamValue:
    """A typed value read from the output so far: `path` (keys and indices; () for the whole output), `value`, and
    `complete` (False: a string's text so far, or a Pydantic instance of the fields complete so far); `end` is the
    number of output bytes that decided it."""

    path: Path
    value: Any
    complete: bool = True
    end: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The event as plain JSON data (a Pydantic value dumped), as the server sends it."""
        value = self.value.model_dump(mode="json", by_alias=True) if hasattr(self.value, "model_dump") else self.value
        return {"path": list(self.path), "value": value, "complete": self.complete}


@dataclass
class _Frame:
    """An object or array being read: what it holds so far and the key of the member being read."""

    container: dict[str, Any] | list[Any]
    path: Path
    key: str | None = None
    seen: dict[str, int] = field(default_factory=dict)
    """How many times each key came so far (an object whose keys may repeat)."""
    held: list[tuple[str, int, StreamValue]] = field(default_factory=list)
    """Its members' values held until it closes, with the key and occurrence each belongs to."""


class JsonReader:
    """Feed it the output's bytes (`feed`), then `finish()` once the constraint accepted the whole output; both
    return the `StreamValue`s decided by what they read, in document order (a value's members before it).

    Where an object's keys may repeat (`keys_may_repeat`: the constraint admits undeclared members), a later member
    of the same key replaces an earlier one in the final value, so the members of an object are held until it
    closes and only the last of each key is read out (and no string's text so far)."""

    def __init__(self, keys_may_repeat: bool = False) -> None:
        self._hold = keys_may_repeat
        self._frames: list[_Frame] = []
        self._mode = "value"
        self._token = bytearray()
        self._is_key = False
        self._escaped = False
        self._read = 0
        self._decoded = ""
        self._decoded_bytes = 0
        self._out: list[StreamValue] = []

    def feed(self, data: bytes) -> list[StreamValue]:
        """The values completed by `data` (and an open string value's text so far, when it grew)."""
        for byte in data:
            self._step(byte)
            self._read += 1
        if self._mode == "string" and not self._is_key:
            self._partial_string()
        out, self._out = self._out, []
        return out

    def finish(self) -> list[StreamValue]:
        """The values the end of an accepted output completes (a top-level number)."""
        if self._mode == "number":
            self._complete(json.loads(bytes(self._token)))
        out, self._out = self._out, []
        return out

    def _path(self) -> Path:
        if not self._frames:
            return ()
        frame = self._frames[-1]
        if isinstance(frame.container, list):
            return (*frame.path, len(frame.container))
        assert frame.key is not None
        return (*frame.path, frame.key)

    def _step(self, byte: int) -> None:
        mode = self._mode
        if mode == "string":
            self._string_byte(byte)
        elif mode == "number":
            if byte in _NUMBER:
                self._token.append(byte)
                return
            self._complete(json.loads(bytes(self._token)))
            self._step(byte)
        elif mode == "literal":
            self._token.append(byte)
            word = _LITERALS[self._token[0]]
            if len(self._token) == len(word):
                self._complete(json.loads(bytes(self._token)))
        elif byte in _SPACE:
            return
        elif mode in ("value", "value_or_end"):
            if byte == ord("]") and mode == "value_or_end":
                self._close()
            else:
                self._start_value(byte)
        elif mode in ("key_or_end", "key"):
            if byte == ord("}") and mode == "key_or_end":
                self._close()
            else:
                self._start_string(is_key=True)
        elif mode == "colon":
            self._mode = "value"
        elif mode == "after":
            if byte == ord(","):
                self._mode = "key" if isinstance(self._frames[-1].container, dict) else "value"
            else:
                self._close()

    def _start_value(self, byte: int) -> None:
        if byte == ord("{"):
            self._frames.append(_Frame({}, self._path()))
            self._mode = "key_or_end"
        elif byte == ord("["):
            self._frames.append(_Frame([], self._path()))
            self._mode = "value_or_end"
        elif byte == ord('"'):
            self._start_string(is_key=False)
        else:
            self._token = bytearray([byte])
            self._mode = "literal" if byte in _LITERALS else "number"

    def _start_string(self, is_key: bool) -> None:
        self._mode, self._is_key, self._escaped = "string", is_key, False
        self._token = bytearray()
        self._decoded, self._decoded_bytes = "", 0

    def _string_byte(self, byte: int) -> None:
        if byte == ord('"') and not self._escaped:
            text = json.loads(b'"' + bytes(self._token) + b'"')
            if self._is_key:
                frame = self._frames[-1]
                frame.key = text
                frame.seen[text] = frame.seen.get(text, 0) + 1
                self._mode = "colon"
            else:
                self._complete(text)
            return
        self._escaped = byte == ord("\\") and not self._escaped
        self._token.append(byte)

    def _partial_string(self) -> None:
        """Emit the open string's text up to its last complete character or escape, if that grew."""
        raw, at = self._token, self._decoded_bytes
        cut = at
        while cut < len(raw):
            size = _unit_size(raw, cut)
            if size is None:
                break
            cut += size
        if cut > at:
            self._decoded += json.loads(b'"' + bytes(raw[at:cut]) + b'"')
            self._decoded_bytes = cut
            self._emit(StreamValue(self._path(), self._decoded, complete=False, end=self._read))

    def _close(self) -> None:
        frame = self._frames.pop()
        first: dict[str, int] = {}
        for key, _, _ in frame.held:
            first.setdefault(key, len(first))
        kept = [(key, event) for key, occurrence, event in frame.held if occurrence == frame.seen[key]]
        for _, event in sorted(kept, key=lambda member: first[member[0]]):  # the final value's member order
            self._emit(replace(event, end=self._read + 1))  # a later member could have replaced it until now
        self._complete(frame.container, frame.path)

    def _emit(self, event: StreamValue) -> None:
        """Read `event` out, or hold it in the innermost object around it whose keys may repeat (where keys may
        repeat, a string's text so far is never read out)."""
        if self._hold and not event.complete:
            return
        holder = next((f for f in reversed(self._frames) if isinstance(f.container, dict)), None) \
            if self._hold else None
        if holder is None:
            self._out.append(event)
        else:
            assert holder.key is not None
            holder.held.append((holder.key, holder.seen[holder.key], event))

    def _complete(self, value: Any, path: Path | None = None) -> None:
        where = self._path() if path is None else path
        end = self._read + (1 if self._mode != "number" else 0)
        if self._frames:
            frame = self._frames[-1]
            if isinstance(frame.container, list):
                frame.container.append(value)
            else:
                assert frame.key is not None
                frame.container[frame.key] = value
            self._mode = "after"
        else:
            self._mode = "done"
        self._emit(StreamValue(where, value, end=end))


def _unit_size(raw: bytearray, at: int) -> int | None:
    """Bytes of the whole character or escape starting at `at` of a string's raw bytes (None: not all there yet).

    A `\\uD8xx` high surrogate waits for the low one that may follow, as `json.loads` pairs them."""
    first = raw[at]
    if first == ord("\\"):
        if at + 1 >= len(raw):
            return None
        if raw[at + 1] != ord("u"):
            return 2
        if at + 6 > len(raw):
            return None
        if not 0xD800 <= int(raw[at + 2 : at + 6], 16) <= 0xDBFF:
            return 6
        follow = raw[at + 6 : at + 8]
        if len(follow) < 2:
            return None if follow in (b"", b"\\") else 6
        if follow != b"\\u":
            return 6
        return 12 if at + 12 <= len(raw) else None
    size = 1 if first < 0x80 else 2 if first < 0xE0 else 3 if first < 0xF0 else 4
    return size if at + size <= len(raw) else None
