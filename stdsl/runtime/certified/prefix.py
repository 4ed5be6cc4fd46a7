"""The cache of a certified output: one pass gives the logits at every position; rejected tails are cut off.

It is one row of the engine's own row caches, so a sliding-window model's certified prefix is exact like its
rows are. A recurrent state cannot forget positions, so on a model that keeps one a feed first forks the row (its
recurrent states and its attention keys as they are: arrays a pass replaces, not copies), and cutting back restores
the fork and feeds the accepted tokens again: one more pass of the kept tokens per rejected round.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from stdsl.runtime.engine import Engine
from stdsl.runtime.row_caches.layers import BatchCaches, LeafRow


class CertifiedPrefix:
    """The cache of the certified output (used on the engine thread only): feed for all-position logits, cut."""

    def __init__(self, engine: Engine, prompt: list[int]) -> None:
        """Start from the longest cached prefix of `prompt`, prefill the rest and store it for the wave rows."""
        self.engine = engine
        self.net = engine.model.net
        self.layout = engine.cache_layout
        self.cache = self.layout.new()
        self.stored: list[int] | None = None
        self.fork: tuple[list[LeafRow] | None, int] | None = None
        """The row before the last feed (models with recurrent states: what a cut goes back to), and its length."""
        hit = engine.prompt_cache.lookup(prompt[:-1])
        self.length = hit.length if hit is not None else 0
        self.cache.append_rows([hit.layers if hit is not None else None], [self.length])
        self.tokens = list(prompt[: self.length])
        self.last = self.feed(prompt[self.length :])[-1]
        self.prompt = list(prompt)
        self.share()

    def share(self) -> None:
        """Put the certified prefix in the engine's prompt cache (replacing the previous one), so wave rows start
        from it and prefill only what follows; the prompt's own entry stays, for the rows that draft later blocks
        from the prompt (a recurrent state is reused only by an exact match)."""
        if self.stored is not None and self.stored != self.prompt:
            self.engine.prompt_cache.discard(self.stored)
        self.stored = list(self.tokens)
        self.engine.prompt_cache.store(self.stored, self.cache.row(0, self.length))

    def feed(self, tokens: list[int]) -> np.ndarray:
        """Float32 logits (len(tokens), V) after appending `tokens` in one pass (`last`: the final row)."""
        if not self.layout.trimmable:
            self.fork = (self.cache.row(0) if self.length else None, self.length)
        logits = self._pass(self.cache, tokens)
        self.length += len(tokens)
        self.tokens += tokens
        self.last = logits[-1]
        return logits

    def _pass(self, cache: BatchCaches, tokens: list[int]) -> np.ndarray:
        cache.prepare([len(tokens)], len(tokens))
        out = self.net(mx.array([tokens], dtype=mx.int32), cache=cache.layers)[0].astype(mx.float32)
        cache.commit()
        return np.asarray(out)

    def trim(self, count: int, last: np.ndarray) -> int:
        """Drop the last `count` positions; `last` is the logits row after what remains. Returns the passes this
        took (1 where a recurrent row fed its kept tokens again, else 0)."""
        passes = 0
        if count and not self.layout.trimmable:
            if self.fork is None or self.length - count < self.fork[1]:
                raise ValueError("a row with recurrent states goes back only to where its last feed began")
            row, length = self.fork
            kept = self.tokens[length : self.length - count]
            self.cache = self.layout.new()
            self.cache.append_rows([row], [length])
            if kept:
                self._pass(self.cache, kept)
                passes = 1
        else:
            self.cache.cut(0, count)
        self.length -= count
        del self.tokens[len(self.tokens) - count :]
        self.last = last
        return passes
