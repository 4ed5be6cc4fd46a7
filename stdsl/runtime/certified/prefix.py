"""The cache of a certified output: one pass gives the logits at every position; rejected tails are cut off.

It is one row of the engine's own row caches, so a sliding-window model's certified prefix is exact like its
rows are; a model whose layers cannot be cut (recurrent states) is not drafted (`drafts.submit_certified`).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from stdsl.runtime.batch.engine import Engine


class CertifiedPrefix:
    """The cache of the certified output (used on the engine thread only): feed for all-position logits, cut."""

    def __init__(self, engine: Engine, prompt: list[int]) -> None:
        """Start from the longest cached prefix of `prompt`, prefill the rest and store it for the wave rows."""
        self.engine = engine
        self.net = engine.model.net
        self.cache = engine.cache_layout.new()
        self.stored: list[int] | None = None
        hit = engine.prompt_cache.lookup(prompt[:-1])
        self.length = hit.length if hit is not None else 0
        self.cache.append_rows([hit.layers if hit is not None else None], [self.length])
        self.tokens = list(prompt[: self.length])
        self.last = self.feed(prompt[self.length :])[-1]
        self.share()

    def share(self) -> None:
        """Put the certified prefix in the engine's prompt cache (replacing the previous one), so wave rows start
        from it and prefill only what follows."""
        if self.stored is not None:
            self.engine.prompt_cache.discard(self.stored)
        self.stored = list(self.tokens)
        self.engine.prompt_cache.store(self.stored, self.cache.row(0, self.length))

    def feed(self, tokens: list[int]) -> np.ndarray:
        """Float32 logits (len(tokens), V) after appending `tokens` in one pass (`last`: the final row)."""
        self.cache.prepare([len(tokens)], len(tokens))
        out = self.net(mx.array([tokens], dtype=mx.int32), cache=self.cache.layers)[0].astype(mx.float32)
        self.cache.commit()
        logits = np.asarray(out)
        self.length += len(tokens)
        self.tokens += tokens
        self.last = logits[-1]
        return logits

    def trim(self, count: int, last: np.ndarray) -> None:
        """Drop the last `count` positions; `last` is the logits row after what remains."""
        self.cache.cut(0, count)
        self.length -= count
        del self.tokens[len(self.tokens) - count :]
        self.last = last
