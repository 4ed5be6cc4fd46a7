"""One model pass over a batch of ragged feeds, returning each row's logits at its last fed position.

Row i feeds `feeds[i]` (any length, 0 for a row that waits); the input is right-padded to the
longest feed. The pass calls the model itself (`net(inputs, cache=...)`), so every architecture's
logit transform applies (granite's `logits_scaling`, gemma2's soft-cap, cohere's `logit_scale`).
Only for the architectures allow-listed here, whose `Model.__call__` is exactly `head(model(x))`, does the
output head run on the last real position of each row alone, so a pass over long forced spans or a prefill chunk
does not pay the vocabulary projection for every position. Gated DeltaNet layers fed a long span (a prefill
chunk, a long forced span) solve their recurrence in chunks (`chunked_recurrences`) rather than step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from stdsl.errors import StdslError
from stdsl.runtime.platform.mlx_lm_models import chunked_recurrences, llama, qwen2, qwen3
from stdsl.runtime.row_caches.layers import BatchCaches
from stdsl.runtime.row_caches.load_probe import cache_layout
from stdsl.runtime.row_caches.uniform_feeds import run_uniform

HEAD_ONLY_ARCHITECTURES: frozenset[type] = frozenset({llama.Model, qwen2.Model, qwen3.Model})
"""mlx-lm model classes whose `__call__` is `model(x)` then the tied embedding or `lm_head`, nothing else (checked
by tests/runtime/batch/test_forward_logits.py against `net(...)`); an exact type match, so a subclass or wrapper
goes through `net(...)`."""

HEAD_ONLY_BY_NAME: frozenset[tuple[str, str]] = frozenset({("mlx_lm.models.gemma3_text", "Model"),
                                                           ("mlx_lm.models.qwen3_5", "Model"),
                                                           ("mlx_lm.models.nemotron_h", "Model")})
"""More such classes, by module and name (not imported until a model uses them): Gemma 3's text model (a tied
embedding or `lm_head` after its body), Qwen3.5's wrapper around a text model of that shape (unsharded) and
Nemotron-H (`lm_head` after its `backbone`)."""


def make_row_caches(net: Any, rows: int = 0) -> BatchCaches:
    """Row caches for every layer of `net` holding `rows` empty rows (a model that cannot be batched exactly is
    refused with UnsupportedModelError)."""
    caches = cache_layout(net).new()
    if rows:
        caches.append_rows([None] * rows, [0] * rows)
    return caches


def _split(net: Any) -> tuple[Any, Callable[[mx.array], mx.array]] | None:
    """An allow-listed model's body (tokens and cache to hidden states) and head, as its `__call__` chains them (None:
    not allow-listed)."""
    kind = type(net)
    if kind in HEAD_ONLY_ARCHITECTURES:
        tied, text = net.args.tie_word_embeddings, net
    elif (kind.__module__, kind.__qualname__) not in HEAD_ONLY_BY_NAME:
        return None
    elif hasattr(net, "backbone"):
        return net.backbone, net.lm_head
    elif hasattr(net, "language_model"):
        text = net.language_model
        if type(text).__qualname__ != "TextModel" or getattr(text, "sharding_group", None) is not None:
            return None
        tied = text.args.tie_word_embeddings
    else:
        tied, text = net.tie_word_embeddings, net
    return text.model, (text.model.embed_tokens.as_linear if tied else text.lm_head)


def head_only(net: Any) -> bool:
    """Whether `net`'s logits may be taken by running its head on chosen positions alone (see the allow-lists)."""
    return _split(net) is not None


def forward_rows(net: Any, caches: BatchCaches, feeds: Sequence[Sequence[int]]) -> mx.array:
    """Float32 logits (B, V) at each row's last fed position after one pass (lazy), in row order; rows with an
    empty feed get garbage. Caches that ask for uniform feeds (`uniform_feeds.py`) run one model pass per distinct
    feed length."""
    if caches.uniform_feeds and len({len(f) for f in feeds if f}) > 1:
        return run_uniform(lambda part: _one_pass(net, caches, part), feeds)
    return _one_pass(net, caches, feeds)


def _one_pass(net: Any, caches: BatchCaches, feeds: Sequence[Sequence[int]]) -> mx.array:
    """`forward_rows` as one model pass over the right-padded feeds."""
    width = max((len(f) for f in feeds), default=0)
    if width == 0:
        raise StdslError("a pass needs at least one row with a token to feed")
    caches.prepare([len(f) for f in feeds], width)
    physical = caches.physical(feeds)
    inputs = mx.array([list(f) + [0] * (width - len(f)) for f in physical], dtype=mx.int32)
    return _logits(net, caches, inputs, [len(f) for f in physical])


def forward_drawn(net: Any, caches: BatchCaches, drawn: mx.array, fed: Sequence[bool]) -> mx.array:
    """`forward_rows` where row i feeds one token, `drawn[i]` (ids on the device, perhaps not computed yet), if
    `fed[i]`, else nothing: the next pass is queued before the draws reach the host (`BatchCore`'s pipelined step)."""
    if not any(fed):
        raise StdslError("a pass needs at least one row with a token to feed")
    caches.prepare([int(f) for f in fed], 1)
    physical = caches.physical([[i] if f else [] for i, f in enumerate(fed)])
    rows = mx.array([f[0] if f else 0 for f in physical], dtype=mx.int32)
    held = mx.array([bool(f) for f in physical])
    inputs = mx.where(held, drawn[rows].astype(mx.int32), mx.array(0, mx.int32))[:, None]
    return _logits(net, caches, inputs, [len(f) for f in physical])


def _logits(net: Any, caches: BatchCaches, inputs: mx.array, lengths: Sequence[int]) -> mx.array:
    """The pass over physical `inputs` (slots, T) whose slot s holds `lengths[s]` real tokens (caches prepared): the
    logits at each row's last fed position, in row order."""
    slots = caches.slots
    last = mx.array([max(n - 1, 0) for n in lengths], dtype=mx.int32)[:, None, None]
    split = _split(net)
    with chunked_recurrences():
        if split is not None:
            body, head = split
            hidden = body(inputs, cache=caches.layers)
            logits = head(mx.take_along_axis(hidden, last, axis=1)[:, 0, :])
        else:
            logits = mx.take_along_axis(net(inputs, cache=caches.layers), last, axis=1)[:, 0, :]
    caches.commit()
    if slots != list(range(len(lengths))):
        logits = logits[mx.array(slots, dtype=mx.int32)]
    return logits.astype(mx.float32)
