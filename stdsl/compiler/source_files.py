"""Read a program, schema or grammar file as UTF-8 text under a file-access policy; every failure is a located
`SourceFileError`, never an OSError, a hang on a device or FIFO, or a read without end (`/dev/zero`).

`FileAccess.local()` (the library's default) reads any regular file a local user names. A server reads for
clients: `FileAccess.none()` refuses every file reference, `FileAccess.under(DIR)` only relative paths that stay
inside DIR with symlinks resolved. Under a server's policy an error never tells whether a refused path exists and
never quotes a byte of a file the client did not send.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from stdsl.errors import CompileError

MAX_FILE_BYTES = 8 << 20
"""The most bytes a program's file reference may read (a grammar file is far smaller)."""


class SourceFileError(CompileError):
    """A file that could not be read as text, or that a policy refuses: `source` names it (as written), `line` and
    `column` (1-based, 0 when none) where its text stops being UTF-8."""

    def __init__(self, message: str, source: str = "", line: int = 0, column: int = 0) -> None:
        self.message, self.source, self.line, self.column = message, source, line, column
        where = f"{source}:{line}:{column}" if line else source
        super().__init__(f"{where}: {message}" if where else message)


@dataclass(frozen=True)
class FileAccess:
    """Which files a program may read: any (`root` None, `allowed`), none, or relative paths under `root`."""

    allowed: bool = True
    root: Path | None = None
    max_bytes: int = MAX_FILE_BYTES

    @classmethod
    def local(cls, max_bytes: int = MAX_FILE_BYTES) -> FileAccess:
        """Any regular file a local user names (relative to the program's folder)."""
        return cls(True, None, max_bytes)

    @classmethod
    def none(cls) -> FileAccess:
        """No file at all: what a server allows a client's program by default."""
        return cls(False, None, 0)

    @classmethod
    def under(cls, root: str | Path, max_bytes: int = MAX_FILE_BYTES) -> FileAccess:
        """Relative paths inside `root` only (no absolute path, no `..`, no symlink out)."""
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise ValueError(f"the program directory {root} is not a directory")
        return cls(True, resolved, max_bytes)

    @property
    def restricted(self) -> bool:
        """Whether the reader is a client of a server (errors then quote nothing of the files)."""
        return not self.allowed or self.root is not None

    def resolve(self, written: str, base: Path | None, what: str) -> Path:
        """The path `written` in a program names (relative to `base`, the program's folder, where local), or a
        SourceFileError that says the same for an existing and a missing refused path."""
        if not self.allowed:
            raise SourceFileError(f"{what} is refused: this server reads no files for programs (its operator can "
                               "allow files under one directory with stcon serve --program-dir DIR)")
        if self.root is None:
            path = Path(written)
            return path if path.is_absolute() or base is None else base / path
        relative = Path(written)
        if relative.is_absolute() or ".." in relative.parts or not written:
            raise SourceFileError(f"{what} is refused: only relative paths inside the server's program directory "
                               "(no absolute path, no '..') may be read")
        path = (self.root / relative).resolve()
        if path != self.root and self.root not in path.parents:
            raise SourceFileError(f"{what} is refused: it leads out of the server's program directory")
        return path

    def read(self, path: Path, shown: str) -> str:
        """The UTF-8 text of regular file `path` (named `shown` in errors), at most `max_bytes` long."""
        data = _read_regular(path, shown, self.max_bytes, self.restricted)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            before = data[: exc.start]
            line = before.count(b"\n") + 1
            column = len(before[before.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
            byte = "" if self.restricted else f" (byte 0x{data[exc.start]:02x})"
            raise SourceFileError(f"not UTF-8 text{byte}", shown, line, column) from None


def _read_regular(path: Path, shown: str, max_bytes: int, restricted: bool) -> bytes:
    """At most `max_bytes` of a regular file, opened without blocking (a FIFO never holds the reader)."""
    missing = "cannot be read" if restricted else "no such file"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SourceFileError(missing, shown) from None
    except IsADirectoryError:
        raise SourceFileError("is a directory, not a file", shown) from None
    except OSError as exc:
        raise SourceFileError("cannot be read" if restricted else f"cannot read: {exc.strerror}", shown) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SourceFileError("is a directory, not a file", shown)
        if not stat.S_ISREG(info.st_mode):
            raise SourceFileError("is not a regular file (a device, a FIFO or a socket); only files are read", shown)
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise SourceFileError(f"is larger than {max_bytes} bytes, the most a program's file may hold", shown)
        return b"".join(chunks)
    finally:
        os.close(fd)
