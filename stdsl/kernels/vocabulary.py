"""A tokenizer's vocabulary as byte strings: lengths, packed bytes and the trie stored level by level.

Everything downstream of the compiler needs only this: the walk kernel reads the packed
bytes, the token table and rows on demand walk the trie (Theorem 18, Appendix D.1).  Both are
built on first use, so a process holds only what the paths it runs read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar, overload

import numpy as np

from stdsl.errors import StdslError
from stdsl.kernels.monotone_index import MonotoneIndex

T = TypeVar("T")


def length_dtype(longest: int) -> np.dtype:
    """The narrowest of uint8, uint16 and int32 holding token lengths up to `longest` bytes."""
    for dtype in (np.uint8, np.uint16):
        if longest <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int32)


class TokenBytes(Sequence["bytes | None"]):
    """A tokenizer's own id → bytes list read with its special ids as None, so a `Vocabulary` needs no copy of it.

    The tokenizer keeps the list for decoding (specials spelled as their text); constraints must see
    specials as spelling nothing.  The list is read, never changed.
    """

    def __init__(self, spelled: Sequence[bytes], special_ids: Iterable[int]) -> None:
        self.spelled = spelled
        self.special_ids = frozenset(int(i) for i in special_ids)

    def __len__(self) -> int:
        return len(self.spelled)

    @overload
    def __getitem__(self, index: int) -> bytes | None: ...

    @overload
    def __getitem__(self, index: slice) -> list[bytes | None]: ...

    def __getitem__(self, index: int | slice) -> bytes | None | list[bytes | None]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.spelled)))]
        b = self.spelled[index]
        return None if (index if index >= 0 else index + len(self.spelled)) in self.special_ids else b

    def __iter__(self) -> Iterator[bytes | None]:
        specials = self.special_ids
        return (None if i in specials else b for i, b in enumerate(self.spelled))


@dataclass(frozen=True)
class TrieLevel:
    """The trie nodes at one byte depth d >= 1, ordered by (parent, byte).

    `parent_index` holds each node's parent in level d-1 (level 0 is the single root), non-decreasing,
    so a node's children at depth d+1 are the range of the next level whose parent is it (`children`);
    `byte_string` holds the nodes' last bytes (a byte string, which byte classes translate);
    `end_tokens`/`end_index` list the tokens whose bytes end at depth d and their node here,
    ordered by node (`tokens_at`).  Both node arrays are `MonotoneIndex`es: 2 bytes per entry.
    """

    parent_index: MonotoneIndex
    byte_string: bytes
    end_tokens: np.ndarray
    end_index: MonotoneIndex

    @property
    def byte(self) -> np.ndarray:
        """The nodes' last bytes as a read-only uint8 view of `byte_string` (no copy)."""
        return np.frombuffer(self.byte_string, dtype=np.uint8)

    @property
    def parent(self) -> np.ndarray:
        """Each node's parent as a fresh int32 array (hot paths gather through `parents_of`)."""
        return self.parent_index.values()

    @property
    def end_nodes(self) -> np.ndarray:
        """The node of each of `end_tokens` as a fresh int32 array (hot paths gather through `ends_of`)."""
        return self.end_index.values()

    @property
    def size(self) -> int:
        """Number of trie nodes at this depth."""
        return len(self.byte_string)

    @property
    def nbytes(self) -> int:
        """Bytes held by this level's arrays."""
        return len(self.byte_string) + self.parent_index.nbytes + self.end_tokens.nbytes + self.end_index.nbytes

    def parents_of(self, above: np.ndarray) -> np.ndarray:
        """`above[parent]`: a value per node of this level from its parent's value in the level above."""
        return self.parent_index.take(above)

    def ends_of(self, here: np.ndarray) -> np.ndarray:
        """`here[end_nodes]`: a value per token ending at this depth from its node's value here."""
        return self.end_index.take(here)

    def children(self, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first index here, count) of the children of the given nodes of the level above (sorted ids)."""
        return self.parent_index.ranges(parents)

    def tokens_at(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first index into `end_tokens`, count) of the tokens ending at the given nodes (sorted ids)."""
        return self.end_index.ranges(nodes)


class Vocabulary:
    """Token id -> byte string for one tokenizer, with eos ids, specials, packed bytes and trie.

    `None` marks a special token: it has no bytes and no constraint ever allows it. Eos ids
    never spell bytes either: they are allowed exactly at accepting states.  A list or a
    `TokenBytes` is kept as given, not copied (the tokenizer's own list serves both), so it must
    not change afterwards.
    """

    def __init__(
        self, token_bytes: Sequence[bytes | None], eos_ids: Iterable[int]
    ) -> None:
        self.size = len(token_bytes)
        if self.size == 0:
            raise StdslError("Vocabulary: the token list is empty")
        eos = sorted({int(i) for i in eos_ids})
        for i in eos:
            if not 0 <= i < self.size:
                raise StdslError(
                    f"Vocabulary: eos id {i} is outside the vocabulary (size {self.size})"
                )
        self.eos_ids = np.asarray(eos, dtype=np.int32)
        listed = token_bytes if isinstance(token_bytes, list) else list(token_bytes)
        self.token_bytes: Sequence[bytes | None] = token_bytes if isinstance(token_bytes, TokenBytes) else listed
        self.special = np.fromiter((b is None for b in listed), dtype=bool, count=self.size)
        self.eos = np.zeros(self.size, dtype=bool)
        self.eos[self.eos_ids] = True
        empty = [i for i, b in enumerate(listed) if b is not None and len(b) == 0]
        if empty:
            raise StdslError(
                f"Vocabulary: token {empty[0]} has empty bytes (use None for a special token)"
            )
        longest = max((len(b) for b in listed if b is not None), default=0)
        lengths = np.fromiter(
            (0 if b is None else len(b) for b in listed),
            dtype=length_dtype(longest),
            count=self.size,
        )
        self.total_bytes = int(lengths.sum(dtype=np.int64))
        self.walk_lengths = np.where(self.eos, 0, lengths).astype(lengths.dtype)
        self.max_length = int(self.walk_lengths.max())
        self._derived: dict[str, object] = {}

    @property
    def lengths(self) -> np.ndarray:
        """Byte length of every token (specials 0): the walk lengths with eos tokens' own bytes counted (not stored)."""
        out = self.walk_lengths.copy()
        out[self.eos_ids] = [len(self.token_bytes[i] or b"") for i in self.eos_ids.tolist()]
        return out

    @cached_property
    def offsets(self) -> np.ndarray:
        """int32 (size + 1,): token i's bytes are `data[offsets[i]:offsets[i + 1]]`; built on first use (the walks
        need it, rows on demand do not)."""
        return self._packed()[0]

    @cached_property
    def data(self) -> np.ndarray:
        """uint8: every token's bytes, concatenated in id order; built on first use (the walks need it, rows on
        demand do not)."""
        return self._packed()[1]

    def _packed(self) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, data): the packed arrays if built, else fresh ones."""
        held = self.__dict__
        if "offsets" in held and "data" in held:
            return held["offsets"], held["data"]
        offsets = np.zeros(self.size + 1, dtype=np.int32)
        np.cumsum(self.lengths, out=offsets[1:])
        data = np.frombuffer(b"".join(b for b in self.token_bytes if b is not None), dtype=np.uint8).copy()
        return offsets, data

    @cached_property
    def levels(self) -> list[TrieLevel]:
        """The trie by levels, built on first use: rows on demand and the token table need it, the walk does not."""
        offsets, data = self._packed()
        return _build_trie(data, offsets, self.walk_lengths)

    @property
    def trie_nodes(self) -> int:
        """Number of trie nodes, the root included."""
        return 1 + sum(level.size for level in self.levels)

    @property
    def core_nbytes(self) -> int:
        """Bytes every path holds: eos ids, the eos and special masks and the walk lengths."""
        return sum(a.nbytes for a in (self.eos_ids, self.special, self.eos, self.walk_lengths))

    @property
    def packed_nbytes(self) -> int:
        """Bytes of what the walk kernel needs, built or not: the core arrays plus packed token bytes and offsets."""
        return self.core_nbytes + 4 * (self.size + 1) + self.total_bytes

    @property
    def trie_nbytes(self) -> int:
        """Bytes of the trie if it has been built (0 otherwise)."""
        levels = self.__dict__.get("levels")
        return sum(level.nbytes for level in levels) if levels is not None else 0

    @property
    def rows_nbytes(self) -> int:
        """Bytes of what rows on demand and the token table need: the core arrays plus the trie (once built)."""
        return self.core_nbytes + self.trie_nbytes

    @property
    def nbytes(self) -> int:
        """Bytes of all numpy arrays this vocabulary holds now: the core arrays, and the packed bytes and the
        trie once built."""
        held = sum(self.__dict__[name].nbytes for name in ("offsets", "data") if name in self.__dict__)
        return self.core_nbytes + held + self.trie_nbytes

    def bytes_of(self, token_id: int) -> bytes:
        """The bytes a token spells (empty for specials and eos)."""
        if not 0 <= token_id < self.size:
            raise StdslError(
                f"token id {token_id} is outside the vocabulary (size {self.size})"
            )
        b = self.token_bytes[token_id]
        return b"" if b is None else b

    def decode(self, token_ids: Iterable[int]) -> bytes:
        """Concatenated bytes of a token sequence."""
        return b"".join(self.bytes_of(int(t)) for t in token_ids)

    def cached(self, key: str, build: Callable[[], T]) -> T:
        """Per-vocabulary cache of derived forms (device arrays, walk layouts), built once on demand."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]  # type: ignore[return-value]

    def __repr__(self) -> str:
        return (
            f"Vocabulary(size={self.size}, eos={self.eos_ids.tolist()}, specials={int(self.special.sum())}, "
            f"trie_nodes={self.trie_nodes}, max_length={self.max_length})"
        )


def _build_trie(
    data: np.ndarray, offsets: np.ndarray, lengths: np.ndarray
) -> list[TrieLevel]:
    """Build the trie level by level: at depth d a node is a unique (parent node, byte) pair."""
    tokens = np.flatnonzero(lengths > 0).astype(np.int32)
    node = np.zeros(tokens.shape[0], dtype=np.int64)
    starts = offsets[tokens].astype(np.int64)
    token_len = lengths[tokens]
    levels: list[dict[str, np.ndarray]] = []
    depth = 0
    while tokens.shape[0]:
        depth += 1
        byte = data[starts + (depth - 1)].astype(np.int64)
        keys = node * 256 + byte
        unique, inverse = np.unique(keys, return_inverse=True)
        node = inverse.astype(np.int64)
        ending = token_len == depth
        levels.append(
            {
                "parent": (unique >> 8).astype(np.int32),
                "byte": (unique & 255).astype(np.uint8),
                "end_tokens": tokens[ending],
                "end_nodes": node[ending].astype(np.int32),
            }
        )
        keep = ~ending
        tokens, node, starts, token_len = (
            tokens[keep],
            node[keep],
            starts[keep],
            token_len[keep],
        )
    out: list[TrieLevel] = []
    for level in levels:
        order = np.argsort(level["end_nodes"], kind="stable")
        out.append(
            TrieLevel(
                MonotoneIndex.of(level["parent"]),
                level["byte"].tobytes(),
                level["end_tokens"][order],
                MonotoneIndex.of(level["end_nodes"][order]),
            )
        )
    return out
