"""Read a program or schema file as UTF-8 text; every failure is a located `ProgramError`, never an OSError."""

from __future__ import annotations

from pathlib import Path

from stdsl.compiler.stc.syntax import ProgramError


def read_source(path: str | Path) -> str:
    """The UTF-8 text of `path`; a missing file, a directory or a byte that is not UTF-8 is a ProgramError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise ProgramError("is a directory, not a file", str(path)) from None
    except FileNotFoundError:
        raise ProgramError("no such file", str(path)) from None
    except OSError as exc:
        raise ProgramError(f"cannot read: {exc.strerror}", str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = len(before[before.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
        raise ProgramError(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", str(path), line, column) from None
