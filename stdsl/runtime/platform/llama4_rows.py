"""Llama 4's chunked attention on caches that hold each row at its own length (the batch engine's row caches).

mlx-lm's Llama 4 builds its chunked-attention mask once for the whole batch, from the first layer's cache position
(`ChunkedKVCache.offset`, one int), and its layers without RoPE scale queries by a temperature of that one
position; mlx-lm 0.32 batches neither (`ChunkedKVCache` has no `merge`). When the caches give a position per row
(an array `offset`), these take each layer's mask from its own cache (`make_mask`: the row cache standing for a
`ChunkedKVCache` masks keys to the query's chunk, the others causally, each row from its own length) and each row's
temperature from its own positions; with mlx-lm's own caches everything is mlx-lm's code unchanged.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from stdsl.runtime.platform.mlx_lm_models import import_without_package_init


def _per_row(cache: Any) -> bool:
    """Whether `cache` gives each row its own position (the engine's row caches), not one int for the batch."""
    return cache is not None and isinstance(cache.offset, mx.array)


def _text_model_call(original: Any) -> Any:
    def __call__(self: Any, inputs: mx.array, cache: Any = None) -> mx.array:  # noqa: N807 (a method)
        if cache is None or not _per_row(cache[0]):
            return original(self, inputs, cache)
        h = self.embed_tokens(inputs)
        for layer, layer_cache in zip(self.layers, cache):
            h = layer(h, layer_cache.make_mask(h.shape[1]), cache=layer_cache)
        return self.norm(h)

    __call__.stdsl_original = original  # type: ignore[attr-defined]
    return __call__


def _attention_call(original: Any, base: Any) -> Any:
    def __call__(self: Any, x: mx.array, mask: mx.array | None = None, cache: Any = None) -> mx.array:  # noqa: N807
        if not _per_row(cache) or self.use_rope or not self.attn_temperature_tuning:
            return original(self, x, mask, cache)
        batch, length, _ = x.shape
        queries = self.q_proj(x).reshape(batch, length, self.n_heads, -1).transpose(0, 2, 1, 3)
        keys = self.k_proj(x).reshape(batch, length, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        values = self.v_proj(x).reshape(batch, length, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        positions = cache.offset[:, None] + mx.arange(1, length + 1)[None]
        scales = mx.log(mx.floor(positions / self.floor_scale) + 1.0) * self.attn_scale + 1.0
        queries = (queries * scales[:, None, :, None]).astype(queries.dtype)
        keys, values = cache.update_and_fetch(keys, values)
        output = base.scaled_dot_product_attention(queries, keys, values, cache=cache, scale=self.scale, mask=mask)
        return self.o_proj(output.transpose(0, 2, 1, 3).reshape(batch, length, -1))

    __call__.stdsl_original = original  # type: ignore[attr-defined]
    return __call__


def install_row_masks() -> None:
    """Make mlx-lm's Llama 4 text model take per-row masks and temperatures from per-row caches (once)."""
    llama4 = import_without_package_init("mlx_lm.models.llama4")
    base = import_without_package_init("mlx_lm.models.base")
    for kind, wrap in ((llama4.LlamaModel, _text_model_call), (llama4.Attention, lambda o: _attention_call(o, base))):
        if not hasattr(kind.__call__, "stdsl_original"):
            kind.__call__ = wrap(kind.__call__)
