"""One model pass over a batch of ragged feeds, returning each row's logits at its last fed position.

Row i feeds `feeds[i]` (any length, 0 for a row that waits); the input is right-padded to the
longest feed. The pass calls the model itself (`net(inputs, cache=...)`), so every architecture's
logit transform applies (granite's `logits_scaling`, gemma2's soft-cap, cohere's `logit_scale`).
Only for the architectures in `HEAD_ONLY_ARCHITECTURES`, whose `Model.__call__` is exactly
`head(model(x))`, does the output head run on the last real position of each row alone, so a
pass over long forced spans or a prefill chunk does not pay the vocabulary projection for every position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx

from stdsl.errors import StdslError
from stdsl.runtime.mlx_lm_models import llama, qwen2, qwen3
from stdsl.runtime.row_caches.layers import BatchCaches
from stdsl.runtime.row_caches.load_probe import cache_layout

HEAD_ONLY_ARCHITECTURES: frozenset[type] = frozenset({llama.Model, qwen2.Model, qwen3.Model})
"""mlx-lm model classes whose `__call__` is `model(x)` then the tied embedding or `lm_head`, nothing else (checked
by tests/runtime/test_forward_logits.py against `net(...)`); an exact type match, so a subclass or wrapper
goes through `net(...)`."""


def make_row_caches(net: Any, rows: int = 0) -> BatchCaches:
    """Row caches for every layer of `net` holding `rows` empty rows (a model that cannot be batched exactly is
    refused with UnsupportedModelError)."""
    caches = cache_layout(net).new()
    if rows:
        caches.append_rows([None] * rows, [0] * rows)
    return caches


def head_only(net: Any) -> bool:
    """Whether `net`'s logits may be taken by running its head on chosen positions alone (see the allow-list)."""
    return type(net) in HEAD_ONLY_ARCHITECTURES


def _head(net: Any, hidden: mx.array) -> mx.array:
    """The output projection of an allow-listed model: the tied embedding or its `lm_head`, as its `__call__` does."""
    if net.args.tie_word_embeddings:
        return net.model.embed_tokens.as_linear(hidden)
    return net.lm_head(hidden)


def forward_rows(net: Any, caches: BatchCaches, feeds: Sequence[Sequence[int]]) -> mx.array:
    """Float32 logits (B, V) at each row's last fed position after one pass (lazy), in row order; rows with an
    empty feed get garbage."""
    width = max((len(f) for f in feeds), default=0)
    if width == 0:
        raise StdslError("a pass needs at least one row with a token to feed")
    caches.prepare([len(f) for f in feeds], width)
    slots = caches.slots
    physical = caches.physical(feeds)
    inputs = mx.array([list(f) + [0] * (width - len(f)) for f in physical], dtype=mx.int32)
    last = mx.array([max(len(f) - 1, 0) for f in physical], dtype=mx.int32)[:, None, None]
    if head_only(net):
        hidden = net.model(inputs, cache=caches.layers)
        logits = _head(net, mx.take_along_axis(hidden, last, axis=1)[:, 0, :])
    else:
        logits = mx.take_along_axis(net(inputs, cache=caches.layers), last, axis=1)[:, 0, :]
    caches.commit()
    if slots != list(range(len(physical))):
        logits = logits[mx.array(slots, dtype=mx.int32)]
    return logits.astype(mx.float32)
