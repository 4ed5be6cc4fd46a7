"""One state's allowed tokens as the shorter of two sorted id lists, the form a warm step returns.

At a structural state a few tokens are allowed (keys, punctuation); inside a string almost all
are.  `TokenMask` lists the allowed ids in the first case and the refused ids in the second, so a
cached mask costs bytes in proportion to what differs from "none" or "all", not to the vocabulary,
and a warm step hands it over without expanding anything.  `dense`, `fill_bitmask` and `allowed_ids`
expand it for consumers that need a full mask (a bool array, or the 32-tokens-per-int32 bitmask
that XGrammar's and llguidance's kernels take).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from stdsl.errors import StdslError

WORD_BITS = 32
DENSE_WORD_SHARE = 16


def bitmask_words(size: int) -> int:
    """Number of int32 words of a bitmask over `size` tokens (bit j of word i is token 32·i + j)."""
    return (size + WORD_BITS - 1) // WORD_BITS


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

    @cached_property
    def _bitmask(self) -> tuple[int, np.ndarray, np.ndarray]:
        """(fill byte, word indices, word values): the bitmask is `fill` in every byte but `values` at `indices`,
        or, where many words differ from the fill, (-1, all words, empty): a full copy is faster than a scatter.

        The last word is always listed when the fill is all ones, so bits past `size` stay 0.
        """
        ids = self.listed.astype(np.int64)
        index = ids >> 5
        bits = np.left_shift(np.ones(ids.shape[0], dtype=np.uint32), (ids & 31).astype(np.uint32))
        starts = np.flatnonzero(np.diff(index, prepend=-1))
        words = index[starts]
        values = np.bitwise_or.reduceat(bits, starts) if starts.size else np.zeros(0, dtype=np.uint32)
        total = bitmask_words(self.size)
        fill = 0
        if not self.listed_allowed:
            fill, values = 255, ~values
            if not words.size or words[-1] != total - 1:
                words = np.append(words, total - 1)
                values = np.append(values, np.uint32(0xFFFFFFFF))
            values[-1] &= np.uint32((1 << (self.size - WORD_BITS * (total - 1))) - 1)
        values = values.astype(np.uint32).view(np.int32)
        if words.shape[0] * DENSE_WORD_SHARE > total:
            full = np.full(total, -1 if fill else 0, dtype=np.int32)
            full[words] = values
            return -1, full, np.zeros(0, dtype=np.int32)
        return fill, words.astype(np.int32), values

    def fill_bitmask(self, out: np.ndarray) -> np.ndarray:
        """Write the mask into `out`, int32 (bitmask_words(size),) contiguous: bit j of word i is token 32·i + j;
        returns `out`."""
        if out.dtype != np.int32 or out.shape != (bitmask_words(self.size),) or not out.flags.c_contiguous:
            raise StdslError(
                f"TokenMask: the bitmask must be contiguous int32 of shape ({bitmask_words(self.size)},), "
                f"got {out.dtype} {out.shape}"
            )
        fill, words, values = self._bitmask
        if fill < 0:
            np.copyto(out, words)
        else:
            out.view(np.uint8).fill(fill)
            np.put(out, words, values)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held: the listed ids, and the bitmask words once a fill has built them."""
        words = self.__dict__.get("_bitmask")
        extra = 0 if words is None else int(words[1].nbytes + words[2].nbytes)
        return int(self.listed.nbytes) + extra
