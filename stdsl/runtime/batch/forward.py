"""One model pass over a batch of ragged feeds, returning each row's logits at its last fed position.

Row i feeds `feeds[i]` (any length, 0 for a row that waits); the input is right-padded to the
longest feed. Only the last real position of each row goes through the output head, so a pass
over long forced spans does not pay the vocabulary projection for every position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from stdsl.errors import StdslError, UnsupportedModelError
from stdsl.runtime.batch.row_slots import RowSlotsCache


def plain_cache_layers(net: Any, name: str = "this model") -> int:
    """The number of layers of `net`, each of which must keep a plain KV cache; a model with a sliding-window,
    rotating or recurrent cache (mlx-lm's RotatingKVCache, ArraysCache, ...) is refused with UnsupportedModelError."""
    from mlx_lm.models.cache import make_prompt_cache

    layers = make_prompt_cache(net)
    others = sorted({type(layer).__name__ for layer in layers if type(layer) is not KVCache})
    if others:
        raise UnsupportedModelError(
            f"{name} keeps {', '.join(others)} in some layers; stdsl's batch engine slots a plain KV cache (KVCache) "
            "per row and supports no sliding-window, rotating or recurrent layers")
    return len(layers)


def make_row_caches(net: Any, rows: int = 0) -> list[RowSlotsCache]:
    """One `RowSlotsCache` per attention layer holding `rows` empty rows (models with other caches are refused)."""
    return [RowSlotsCache([0] * rows) for _ in range(plain_cache_layers(net))]


def _head(net: Any, hidden: mx.array) -> mx.array:
    """The output projection of an mlx-lm language model (tied embeddings or an lm_head)."""
    head = getattr(net, "lm_head", None)
    if head is not None:
        return head(hidden)
    return net.model.embed_tokens.as_linear(hidden)


def forward_rows(net: Any, caches: list[RowSlotsCache], feeds: Sequence[Sequence[int]]) -> mx.array:
    """Float32 logits (B, V) at each row's last fed position after one pass; rows with an empty feed get garbage."""
    width = max((len(f) for f in feeds), default=0)
    if width == 0:
        raise StdslError("a pass needs at least one row with a token to feed")
    padded = [list(f) + [0] * (width - len(f)) for f in feeds]
    for cache in caches:
        cache.prepare([len(f) for f in feeds], width)
    inputs = mx.array(padded, dtype=mx.int32)
    last = mx.array([max(len(f) - 1, 0) for f in feeds], dtype=mx.int32)
    inner = getattr(net, "model", None)
    if inner is not None and callable(inner) and hasattr(inner, "embed_tokens"):
        hidden = inner(inputs, cache=caches)
        picked = mx.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0, :]
        logits = _head(net, picked)
    else:
        full = net(inputs, cache=caches)
        logits = mx.take_along_axis(full, last[:, None, None], axis=1)[:, 0, :]
    for cache in caches:
        cache.commit()
    return logits.astype(mx.float32)
