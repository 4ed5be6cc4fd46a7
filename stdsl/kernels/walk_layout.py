"""The walk layout of a vocabulary (numpy only): tokens sorted by byte length, bytes stored position-major.

The numpy, MLX and torch token walks read it; it depends only on the tokenizer and is built once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stdsl.kernels.vocabulary import Vocabulary

KIND_WALK, KIND_EOS, KIND_NEVER = 0, 1, 2


@dataclass(frozen=True)
class WalkLayout:
    """Walkable tokens sorted by byte length (longest first), bytes stored position-major.

    At byte position i only the first `alive[i]` tokens of `order` are still walking, and
    `position_bytes[i]` holds their i-th bytes, so later positions touch only long tokens.
    """

    order: np.ndarray
    alive: np.ndarray
    position_bytes: tuple[np.ndarray, ...]
    by_first_byte: np.ndarray
    first_byte_offsets: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held by the layout."""
        arrays = (self.order, self.alive, self.by_first_byte, self.first_byte_offsets)
        return sum(a.nbytes for a in arrays) + sum(
            a.nbytes for a in self.position_bytes
        )


def token_kinds(vocab: Vocabulary) -> np.ndarray:
    """Per token: 0 walks its bytes, 1 is eos (allowed iff accepting), 2 is never allowed (special)."""
    kind = np.full(vocab.size, KIND_WALK, dtype=np.uint8)
    kind[vocab.special] = KIND_NEVER
    kind[vocab.eos] = KIND_EOS
    return kind


def walk_layout(vocab: Vocabulary) -> WalkLayout:
    """The length-sorted position-major layout of a vocabulary, built once and cached on it."""

    def build() -> WalkLayout:
        lengths = vocab.walk_lengths
        walkable = np.flatnonzero(lengths > 0)
        order = walkable[np.argsort(-lengths[walkable].astype(np.int64), kind="stable")].astype(np.int32)
        sorted_lengths = lengths[order]
        alive = np.array(
            [
                int(np.count_nonzero(sorted_lengths > i))
                for i in range(vocab.max_length)
            ],
            dtype=np.int32,
        )
        starts = vocab.offsets[order].astype(np.int64)
        position_bytes = tuple(
            vocab.data[starts[: alive[i]] + i] for i in range(vocab.max_length)
        )
        first = position_bytes[0] if position_bytes else np.zeros(0, dtype=np.uint8)
        by_first_byte = np.argsort(first, kind="stable").astype(np.int32)
        first_byte_offsets = np.zeros(257, dtype=np.int32)
        np.cumsum(np.bincount(first, minlength=256), out=first_byte_offsets[1:])
        return WalkLayout(
            order, alive, position_bytes, by_first_byte, first_byte_offsets
        )

    return vocab.cached("walk_layout", build)
