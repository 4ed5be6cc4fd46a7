"""What the forced planner and the boundary cover read about a tokenizer's token bytes, built once per tokenizer.

Every grammar decoded with a tokenizer shares these (token by bytes, single-byte tokens, each
token's length and its byte at an offset), so a new grammar's first mask builds none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np

from stdsl.caches import CacheKind

NO_BYTE = 256
"""`byte_at`'s value for a token shorter than the offset."""

MAX_AGREEING = 16
BY_BYTES_NBYTES = 120
"""About what one entry of `by_bytes` holds (the bytes object, the int, the dictionary's slot)."""


class TokenSpellings:
    """Lookups over `token_bytes` (token id -> bytes, None for specials) shared by every grammar.

    `by_bytes` maps bytes to the first token that spells them, `byte_tokens[b]` is the
    single-byte token of byte b (-1 when there is none), `longest_token` the longest spelling.
    """

    def __init__(self, token_bytes: Sequence[bytes | None]) -> None:
        self.token_bytes = token_bytes
        self.by_bytes: dict[bytes, int] = {}
        for i, b in enumerate(token_bytes):
            if b:
                self.by_bytes.setdefault(bytes(b), i)
        self.longest_token = max((len(b) for b in self.by_bytes), default=1)
        self.byte_tokens = [self.by_bytes.get(bytes([b]), -1) for b in range(256)]
        self._bytes_at: dict[int, np.ndarray] = {}
        self._agreeing: dict[bytes, np.ndarray] = {}

    @staticmethod
    def of(token_bytes: Sequence[bytes | None]) -> TokenSpellings:
        """The spellings of a token list, built once per list object (a `stdsl.caches` entry)."""
        return _SPELLINGS.get((token_bytes,), lambda: TokenSpellings(token_bytes))

    @cached_property
    def _packed(self) -> tuple[np.ndarray, np.ndarray]:
        """(all token bytes concatenated, start offset of each token)."""
        lengths = self.lengths
        starts = np.zeros(lengths.shape[0], dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        data = np.frombuffer(b"".join(b or b"" for b in self.token_bytes), dtype=np.uint8)
        return data, starts

    @cached_property
    def lengths(self) -> np.ndarray:
        """Each token's length in bytes (0 for specials)."""
        return np.fromiter((len(b or b"") for b in self.token_bytes), dtype=np.int64, count=len(self.token_bytes))

    @cached_property
    def adjacent_pairs(self) -> np.ndarray:
        """bool (65536,): whether bytes a, b stand side by side in some token (at a * 256 + b): a BPE merge
        joins two bytes only into a token that holds them so."""
        data, starts = self._packed
        pairs = np.zeros(1 << 16, dtype=bool)
        if len(data) < 2:
            return pairs
        inside = np.ones(len(data) - 1, dtype=bool)
        ends = (starts + self.lengths)[self.lengths > 0] - 1
        inside[ends[ends < len(inside)]] = False
        pairs[(data[:-1].astype(np.int64) * 256 + data[1:])[inside]] = True
        pairs.flags.writeable = False
        return pairs

    @property
    def nbytes(self) -> int:
        """Bytes held: the arrays built so far, and `BY_BYTES_NBYTES` per entry of `by_bytes` (an estimate)."""
        arrays = [*self._bytes_at.values(), *self._agreeing.values()]
        arrays += [self.__dict__[name] for name in ("lengths", "adjacent_pairs") if name in self.__dict__]
        arrays += list(self.__dict__.get("_packed", ()))
        return sum(int(array.nbytes) for array in arrays) + len(self.by_bytes) * BY_BYTES_NBYTES

    def byte_at(self, offset: int) -> np.ndarray:
        """Each token's byte at `offset` (NO_BYTE where the token is shorter), cached per offset (at most
        one more than the longest token's length: every offset past it reads NO_BYTE alike)."""
        offset = min(offset, self.longest_token)
        hit = self._bytes_at.get(offset)
        if hit is None:
            data, starts = self._packed
            longer = self.lengths > offset
            hit = np.full(self.lengths.shape[0], NO_BYTE, dtype=np.int16)
            hit[longer] = data[starts[longer] + offset]
            hit.flags.writeable = False
            self._bytes_at[offset] = hit
        return hit

    def agreeing_with(self, data: bytes) -> np.ndarray:
        """bool (V,): the tokens whose bytes agree with `data` as far as both go (a prefix of it, or starting
        with it); the last few answers are kept (held-back bytes such as `":` recur at every member)."""
        hit = self._agreeing.get(data)
        if hit is None:
            hit = np.ones(self.lengths.shape[0], dtype=bool)
            for offset, byte in enumerate(data[: self.longest_token]):
                column = self.byte_at(offset)
                hit &= (column == byte) | (column == NO_BYTE)
            hit.flags.writeable = False
            if len(self._agreeing) >= MAX_AGREEING:
                self._agreeing.pop(next(iter(self._agreeing)))
            self._agreeing[data] = hit
        return hit


_SPELLINGS: CacheKind[TokenSpellings] = CacheKind("token spellings")
