"""A tokenizer's recovered token bytes kept between processes, in a user cache folder keyed by the tokenizer's
content hash, so a new process reads them instead of decoding every piece again.

A file holds one id -> bytes list (None for specials): a header (magic, format version, entry count, data length),
int32 lengths (-1 for None), the bytes concatenated, and a SHA-256 of all that. It is written to a temporary file
and renamed into place (readers never see half a file); one that is short, altered or of another format is
ignored (and rewritten by the next build). The folder is `$STDSL_CACHE_DIR` if set, else `$XDG_CACHE_HOME/stdsl`,
else `~/.cache/stdsl`; `STDSL_CACHE_DIR=off` keeps nothing on disk. A folder that cannot be written only costs
the rebuild.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

MAGIC = b"stdsl-token-bytes"
VERSION = 1
"""Raise when the recovery (`hf_token_bytes`) or this format changes: files of other versions are not read."""
_HEADER = struct.Struct("<17sIqq")
_DIGEST = 32


def cache_folder() -> Path | None:
    """Where stdsl keeps files between processes (None: `STDSL_CACHE_DIR=off`)."""
    chosen = os.environ.get("STDSL_CACHE_DIR")
    if chosen:
        return None if chosen.lower() == "off" else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "stdsl"


def store_path(content: bytes) -> Path | None:
    """The file for a tokenizer whose serialized form is `content` (None: nothing is kept on disk)."""
    folder = cache_folder()
    if folder is None:
        return None
    return folder / "token-bytes" / f"{hashlib.sha256(content).hexdigest()}-v{VERSION}.bin"


def encode(token_bytes: Sequence[bytes | None]) -> bytes:
    """The file's bytes for `token_bytes`."""
    lengths = np.fromiter((-1 if b is None else len(b) for b in token_bytes), dtype="<i4", count=len(token_bytes))
    data = b"".join(b for b in token_bytes if b is not None)
    body = _HEADER.pack(MAGIC, VERSION, len(token_bytes), len(data)) + lengths.tobytes() + data
    return body + hashlib.sha256(body).digest()


def decode(blob: bytes) -> list[bytes | None] | None:
    """`token_bytes` back from a file's bytes, or None if they are not a whole, unaltered file of this version."""
    if len(blob) < _HEADER.size + _DIGEST:
        return None
    body, digest = blob[:-_DIGEST], blob[-_DIGEST:]
    magic, version, count, size = _HEADER.unpack_from(body)
    if magic != MAGIC or version != VERSION or count < 0 or len(body) != _HEADER.size + 4 * count + size:
        return None
    if hashlib.sha256(body).digest() != digest:
        return None
    lengths = np.frombuffer(body, dtype="<i4", count=count, offset=_HEADER.size)
    if int(lengths[lengths > 0].sum(dtype=np.int64)) != size or bool((lengths < -1).any()):
        return None
    data = body[_HEADER.size + 4 * count:]
    ends = np.cumsum(np.maximum(lengths, 0), dtype=np.int64).tolist()
    starts = [0, *ends[:-1]]
    return [None if n < 0 else data[s:e] for n, s, e in zip(lengths.tolist(), starts, ends)]


def read(path: Path) -> list[bytes | None] | None:
    """The list stored at `path`, or None if there is none or it is unusable."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    return decode(blob)


def write(path: Path, token_bytes: Sequence[bytes | None]) -> None:
    """Store `token_bytes` at `path` atomically (a failure to write is ignored: the cache is only a cache)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(encode(token_bytes))
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        return


def stored(content: bytes, build: Callable[[], list[bytes | None]]) -> list[bytes | None]:
    """The token bytes of the tokenizer serialized as `content`: read from the cache folder, else built and
    stored there."""
    path = store_path(content)
    if path is not None and (found := read(path)) is not None:
        return found
    built = build()
    if path is not None:
        write(path, built)
    return built
