"""The files of a dataset run: input lines split on "\\n" only and read one at a time, the output file checked
before any work, and the records an interrupted run already wrote.

A line that cannot be read (not UTF-8, not JSON, a number too long to convert, nesting past `MAX_DEPTH`,
not an object) raises `OptionError` for that line alone, so the run writes an error record and goes on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from stdsl.errors import OptionError

MAX_DEPTH = 100
"""Deepest nesting of lists and objects accepted in one input line (program arguments are shallow)."""

BLANK = b" \t\r"
TORN_PREFIX = b'{"line": '
"""How every record this module's writer starts: an unterminated last line with it is a record cut by a kill."""


def input_lines(path: Path) -> list[tuple[int, bytes]]:
    """The non-blank lines of `path`, numbered from 1, split on b"\\n" only (U+2028 or NEL inside a JSON string
    is text, not a line break, so line numbers never drift)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise OptionError("input", f"{path}: cannot read the input ({error.strerror or error})") from error
    return [(number, raw) for number, raw in enumerate(data.split(b"\n"), start=1) if raw.strip(BLANK)]


def read_arguments(raw: bytes, number: int = 0) -> dict[str, Any]:
    """One input line as a dict of program arguments, or OptionError saying why it is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise OptionError("input", f"not UTF-8 text (byte 0x{raw[error.start]:02x} at column {error.start + 1})") \
            from None
    if number == 1:
        text = text.removeprefix("\ufeff")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as error:
        raise OptionError("input", f"not valid JSON at column {error.colno}: {error.msg}") from None
    except ValueError as error:
        raise OptionError("input", f"not readable JSON: {str(error).split(';')[0]}") from None
    except RecursionError:
        raise OptionError("input", f"nested deeper than {MAX_DEPTH} levels") from None
    if not isinstance(value, dict):
        raise OptionError("input", f"not a JSON object of program arguments (a {_json_kind(value)})")
    if nesting(value) > MAX_DEPTH:
        raise OptionError("input", f"nested deeper than {MAX_DEPTH} levels")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_kind(value: Any) -> str:
    kinds = {list: "list", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def nesting(value: Any) -> int:
    """How deep lists and dicts nest in `value` (0 for a scalar), counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:
            stack.extend((child, depth + 1) for child in children)
    return deepest


def check_output(source: Path, output: Path) -> None:
    """Refuse an output path the run cannot append its records to, before any work: the input itself (by
    any name: a symlink or hard link too), a directory, a file that cannot be written, a missing folder."""
    where = f"output {output}"
    if output.is_dir():
        raise OptionError("output", f"{where}: is a directory; give a file path for the results")
    if output.exists():
        if source.exists() and os.path.samefile(source, output):
            raise OptionError("output", f"{where}: is the input file {source}; write the results to a file of "
                                        "their own")
        try:
            with open(output, "ab"):
                pass
        except OSError as error:
            raise OptionError("output", f"{where}: cannot be written ({error.strerror or error})") from None
        return
    parent = output.parent
    if not parent.is_dir():
        raise OptionError("output", f"{where}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OptionError("output", f"{where}: cannot create a file in {parent} (permission denied)")


def finished_lines(output: Path) -> set[int]:
    """Line numbers already recorded in `output` (none when it does not exist).

    A last line without its newline is kept (and the newline added) when it is a whole record, cut when
    it is a record torn by a kill; any other line that is not a record refuses the file, so a run never
    appends to, or cuts, a file it did not write.
    """
    if not output.exists():
        return set()
    data = output.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()
    done = {_record_line(output, number, raw) for number, raw in enumerate(lines, start=1) if raw.strip(BLANK)}
    if tail.strip(BLANK):
        try:
            done.add(_record_line(output, len(lines) + 1, tail))
        except OptionError:
            if not tail.startswith(TORN_PREFIX):
                raise
            with open(output, "r+b") as handle:
                handle.truncate(len(data) - len(tail))
        else:
            with open(output, "ab") as handle:
                handle.write(b"\n")
    return done


def _record_line(output: Path, number: int, raw: bytes) -> int:
    """The input line number a record of `output` holds (OptionError when the line is not a record)."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        record = None
    line = record.get("line") if isinstance(record, dict) else None
    if not isinstance(line, int) or isinstance(line, bool) or not ("result" in record or "error" in record):
        raise OptionError("output", f"output {output}:{number}: not a record of a dataset run; give a new file or "
                                    "the results file of an earlier run")
    return line


def record_text(line: int, payload: dict[str, Any]) -> str:
    """One output record as a line of JSON (non-ASCII text as is, unless it holds a lone surrogate: then escaped)."""
    record = {"line": line, **payload}
    text = json.dumps(record, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(record, default=str)
    return text + "\n"
