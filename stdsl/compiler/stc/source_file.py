"""Read a program or schema file as UTF-8 text; every failure is a located `ProgramError`, never an OSError."""

from __future__ import annotations

from pathlib import Path

from stdsl.compiler.source_files import FileAccess, SourceFileError
from stdsl.compiler.stc.syntax import ProgramError


def read_source(path: str | Path, files: FileAccess | None = None) -> str:
    """The UTF-8 text of `path` read under `files` (default: a local user's); a missing file, a directory, a
    device, an oversized file or a byte that is not UTF-8 is a ProgramError."""
    try:
        return (files or FileAccess.local()).read(Path(path), str(path))
    except SourceFileError as error:
        raise ProgramError(error.message, error.source, error.line, error.column) from None
