"""The tokenizer's own split of short output texts, remembered once per tokenizer.

The boundary cover splits the open block followed by every continuation the constraint allows
(each next character, punctuation pairs, a chain); across grammars these texts repeat (a string
value opens the same way in every schema), so a new grammar's covers mostly reuse splits
already made. Bounded: the memo is emptied when it holds `MAX_SPLITS` texts.
"""

from __future__ import annotations

from typing import Any

from stdsl.caches import CacheKind
from stdsl.control.split.characters import valid_utf8_prefix

MAX_SPLITS = 8192
SPLIT_NBYTES = 200
"""About what one remembered split holds (the text, its token tuple, the dictionary's slot), for `stdsl.caches`."""


class SplitMemo:
    """`encode_ordinary` of one tokenizer, remembered per byte string (reads and writes are single dict
    operations, so threads may share it)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._splits: dict[bytes, tuple[int, ...]] = {}

    @staticmethod
    def of(tokenizer: Any) -> SplitMemo:
        """The memo of a tokenizer, made once per tokenizer object (a `stdsl.caches` entry)."""
        return _MEMOS.get((tokenizer,), lambda: SplitMemo(tokenizer))

    def split(self, data: bytes) -> tuple[int, ...]:
        """The tokenizer's split of the longest valid UTF-8 prefix of `data`, read as output (special-token
        text spelled with ordinary tokens)."""
        hit = self._splits.get(data)
        if hit is None:
            hit = tuple(self.tokenizer.encode_ordinary(data[: valid_utf8_prefix(data)].decode("utf-8")))
            if len(self._splits) >= MAX_SPLITS:
                self._splits.clear()
            self._splits[data] = hit
        return hit

    @property
    def nbytes(self) -> int:
        """An estimate of the bytes held: `SPLIT_NBYTES` per remembered split."""
        return len(self._splits) * SPLIT_NBYTES

    def __len__(self) -> int:
        return len(self._splits)


_MEMOS: CacheKind[SplitMemo] = CacheKind("split memos")
