"""One state's allowed tokens as the shorter of two sorted id lists, the form a warm step returns.

At a structural state a few tokens are allowed (keys, punctuation); inside a string almost all
are.  `TokenMask` lists the allowed ids in the first case and the refused ids in the second, so a
cached mask costs bytes in proportion to what differs from "none" or "all", not to the vocabulary,
and a warm step hands it over without expanding anything.  `dense`, `packed` and `allowed_ids`
expand it for consumers that need a full mask (a bool array, or the 32-tokens-per-int32 bitmask
that XGrammar's and llguidance's kernels take; `PackedMasks` memoizes the latter per state).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stdsl.errors import StdslError

WORD_BITS = 32


def bitmask_words(size: int) -> int:
    """Number of int32 words of a bitmask over `size` tokens (bit j of word i is token 32·i + j)."""
    return (size + WORD_BITS - 1) // WORD_BITS


def pack_words(allowed: np.ndarray) -> np.ndarray:
    """A bool (size,) mask as int32 bitmask words (bitmask_words(size),): bit j of word i is token 32·i + j, the
    bits past `size` 0."""
    bits = np.zeros(bitmask_words(allowed.shape[0]) * WORD_BITS, dtype=bool)
    bits[: allowed.shape[0]] = allowed
    return np.packbits(bits, bitorder="little").view("<i4").astype(np.int32)


@dataclass(frozen=True)
class TokenMask:
    """`size` tokens of which `listed` (sorted distinct int32 ids) are the allowed ones if `listed_allowed`,
    else the refused ones; every other token is the opposite."""

    size: int
    listed: np.ndarray
    listed_allowed: bool

    @staticmethod
    def of(size: int, listed: np.ndarray, listed_allowed: bool) -> TokenMask:
        """A mask over `size` tokens; `listed` must be sorted distinct ids in [0, size) (kept read-only, not copied)."""
        ids = np.asarray(listed)
        if ids.ndim != 1 or (ids.size and (int(ids[0]) < 0 or int(ids[-1]) >= size)):
            raise StdslError(f"TokenMask: listed ids must be a sorted list of ids in [0, {size})")
        if ids.flags.writeable:
            ids = ids.copy()
            ids.flags.writeable = False
        return TokenMask(size, ids, listed_allowed)

    @property
    def count(self) -> int:
        """Number of allowed tokens."""
        listed = int(self.listed.shape[0])
        return listed if self.listed_allowed else self.size - listed

    def allows(self, token: int) -> bool:
        """Whether `token` is allowed (a binary search in the listed ids)."""
        if not 0 <= token < self.size:
            raise StdslError(f"TokenMask: token id {token} is outside the vocabulary (size {self.size})")
        at = int(np.searchsorted(self.listed, token))
        listed = at < self.listed.shape[0] and int(self.listed[at]) == token
        return listed == self.listed_allowed

    def allowed_ids(self) -> np.ndarray:
        """The allowed token ids, sorted (int32)."""
        if self.listed_allowed:
            return self.listed
        keep = np.ones(self.size, dtype=bool)
        keep[self.listed] = False
        return np.flatnonzero(keep).astype(np.int32)

    def dense(self) -> np.ndarray:
        """bool (size,): True where the token is allowed (a fresh writable array)."""
        out = np.zeros(self.size, dtype=bool) if self.listed_allowed else np.ones(self.size, dtype=bool)
        out[self.listed] = self.listed_allowed
        return out

    def packed(self) -> np.ndarray:
        """The mask as int32 bitmask words (bitmask_words(size),), read-only: bit j of word i is token 32·i + j, and
        the bits past `size` are 0 (built anew per call; `PackedMasks` keeps them per state).

        With fewer listed ids than words, only their words are built (a structural state's few tokens);
        otherwise the bool mask is packed whole.
        """
        total = bitmask_words(self.size)
        if self.listed.shape[0] > total:
            words = pack_words(self.dense()).view(np.uint32)
        else:
            ids = self.listed.astype(np.intp)
            words = np.zeros(total, dtype=np.uint32)
            if ids.shape[0]:
                index = ids >> 5
                starts = np.flatnonzero(np.diff(index, prepend=-1))  # the ids are sorted: one run per word
                bits = np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32))
                words[index[starts]] = np.bitwise_or.reduceat(bits, starts)
            if not self.listed_allowed:
                np.invert(words, out=words)
                words[-1] &= np.uint32((1 << (self.size - WORD_BITS * (total - 1))) - 1)
        out = words.view(np.int32)
        out.flags.writeable = False
        return out

    def fill_bitmask(self, out: np.ndarray) -> np.ndarray:
        """Write the mask into `out`, int32 (bitmask_words(size),) contiguous (the layout of `packed`); returns
        `out`."""
        if out.dtype != np.int32 or out.shape != (bitmask_words(self.size),) or not out.flags.c_contiguous:
            raise StdslError(
                f"TokenMask: the bitmask must be contiguous int32 of shape ({bitmask_words(self.size)},), "
                f"got {out.dtype} {out.shape}"
            )
        out[...] = self.packed()
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held: the listed ids."""
        return int(self.listed.nbytes)
