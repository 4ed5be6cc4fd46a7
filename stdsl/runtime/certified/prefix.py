"""The KV cache of a certified output: one pass gives the logits at every position; rejected tails are trimmed."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from stdsl.errors import StdslError
from stdsl.runtime.batch.engine import Engine
from stdsl.runtime.mlx_lm_models import make_prompt_cache
from stdsl.runtime.row_caches.layers import LeafRow
from stdsl.runtime.row_caches.recurrent import RecurrentState


class CertifiedPrefix:
    """The KV cache of the certified output (used on the engine thread only): feed for all-position logits, trim."""

    def __init__(self, engine: Engine, prompt: list[int]) -> None:
        """Start from the longest cached prefix of `prompt`, prefill the rest and store it for the wave rows."""
        self.engine = engine
        self.net = engine.model.net
        self.cache = make_prompt_cache(self.net)
        self.tokens = list(prompt)
        self.stored: list[int] | None = None
        hit = engine.prompt_cache.lookup(prompt[:-1])
        self.length = 0
        if hit is not None:
            for layer, stored in zip(self.cache, hit.layers):
                if isinstance(stored, RecurrentState):
                    raise StdslError("certified drafting needs a model whose layers all keep plain KV caches")
                keys, values = stored
                layer.keys = mx.array(keys[..., : hit.length, :])
                layer.values = mx.array(values[..., : hit.length, :])
                layer.offset = hit.length
            self.length = hit.length
        self.tokens = list(prompt[: self.length])
        self.last = self.feed(prompt[self.length :])[-1]
        self.share()

    def share(self) -> None:
        """Put the certified prefix in the engine's prompt cache (replacing the previous one), so wave rows start
        from it and prefill only what follows."""
        kept: list[LeafRow] = [(layer.keys[..., : self.length, :], layer.values[..., : self.length, :])
                               for layer in self.cache]
        if self.stored is not None:
            self.engine.prompt_cache.discard(self.stored)
        self.stored = list(self.tokens)
        self.engine.prompt_cache.store(self.stored, kept)

    def feed(self, tokens: list[int]) -> np.ndarray:
        """Float32 logits (len(tokens), V) after appending `tokens` in one pass (`last`: the final row)."""
        out = np.asarray(self.net(mx.array([tokens], dtype=mx.int32), cache=self.cache)[0].astype(mx.float32))
        self.length += len(tokens)
        self.tokens += tokens
        self.last = out[-1]
        return out

    def trim(self, count: int, last: np.ndarray) -> None:
        """Drop the last `count` positions; `last` is the logits row after what remains."""
        for layer in self.cache:
            layer.trim(count)
        self.length -= count
        del self.tokens[len(self.tokens) - count :]
        self.last = last
