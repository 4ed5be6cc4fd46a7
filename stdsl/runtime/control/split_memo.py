"""The tokenizer's own split of short output texts, remembered once per tokenizer.

The boundary cover splits the open block followed by every continuation the constraint allows
(each next character, punctuation pairs, a chain); across grammars these texts repeat (a string
value opens the same way in every schema), so a new grammar's covers mostly reuse splits
already made. Bounded: the least recently used split is dropped past `MAX_SPLITS`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from stdsl.runtime.control.identity_cache import IdentityCache

MAX_SPLITS = 8192
MAX_TOKENIZERS = 8


class SplitMemo:
    """`encode_ordinary` of one tokenizer, remembered for the last `MAX_SPLITS` texts (safe across threads)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._splits: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def of(tokenizer: Any) -> SplitMemo:
        """The memo of a tokenizer, made once per tokenizer object (kept for the last few)."""
        return _MEMOS.get((tokenizer,), lambda: SplitMemo(tokenizer))

    def encode_ordinary(self, text: str) -> list[int]:
        """The tokenizer's split of `text` read as output (special-token text spelled with ordinary tokens)."""
        with self._lock:
            hit = self._splits.get(text)
            if hit is not None:
                self._splits.move_to_end(text)
                return list(hit)
        tokens = tuple(self.tokenizer.encode_ordinary(text))
        with self._lock:
            self._splits[text] = tokens
            if len(self._splits) > MAX_SPLITS:
                self._splits.popitem(last=False)
        return list(tokens)

    def __len__(self) -> int:
        return len(self._splits)


_MEMOS: IdentityCache[SplitMemo] = IdentityCache(MAX_TOKENIZERS)
