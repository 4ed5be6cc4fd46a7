"""One model pass over a batch of ragged feeds, returning each row's logits at its last fed position.

Row i feeds `feeds[i]` (any length, 0 for a row that waits); the input is right-padded to the
longest feed. The pass calls the model itself (`net(inputs, cache=...)`), so every architecture's
logit transform applies (granite's `logits_scaling`, gemma2's soft-cap, cohere's `logit_scale`).
Only for the architectures allow-listed here, whose `Model.__call__` is exactly `head(model(x))`, does the
output head run on the last real position of each row alone, so a pass over long forced spans or a prefill chunk
does not pay the vocabulary projection for every position, and only on the rows whose logits the caller reads (a
262,144-token head such as Gemma 3's costs more per row than the rest of a 270M model's pass; so large a matrix
projects its two vocabulary halves on two CPU streams, `SPLIT_HEAD_BYTES`). Gated DeltaNet
layers fed a long span (a prefill chunk, a long forced span) solve their recurrence in chunks
(`chunked_recurrences`) rather than step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from stdsl.errors import StdslError
from stdsl.runtime.platform.mlx_lm_models import chunked_recurrences, llama, qwen2, qwen3
from stdsl.runtime.platform.side_stream import side_stream
from stdsl.runtime.row_caches.layers import BatchCaches
from stdsl.runtime.row_caches.load_probe import cache_layout
from stdsl.runtime.row_caches.uniform_feeds import run_uniform

HEAD_ONLY_ARCHITECTURES: frozenset[type] = frozenset({llama.Model, qwen2.Model, qwen3.Model})
"""mlx-lm model classes whose `__call__` is `model(x)` then the tied embedding or `lm_head`, nothing else (checked
by tests/runtime/batch/test_forward_logits.py against `net(...)`); an exact type match, so a subclass or wrapper
goes through `net(...)`."""

@dataclass(frozen=True)
class HeadRule:
    """How a model's `__call__` picks its head after its body: the body's attribute, the body's embedding, and
    whether the head is that embedding (`as_linear`) rather than `lm_head`: always, never, or by the flag at this
    attribute path of the model; `wrapper` names a text model the net wraps (Qwen3.5's, taken when unsharded)."""

    body: str = "model"
    embedding: str = "embed_tokens"
    tied: bool | str = "args.tie_word_embeddings"
    wrapper: str | None = None


HEAD_ONLY_BY_NAME: dict[tuple[str, str], HeadRule] = {
    ("mlx_lm.models.gemma3_text", "Model"): HeadRule(tied="tie_word_embeddings"),
    ("mlx_lm.models.qwen3_5", "Model"): HeadRule(wrapper="language_model"),
    ("mlx_lm.models.olmo3", "Model"): HeadRule(),
    ("mlx_lm.models.qwen3_next", "Model"): HeadRule(),
    ("mlx_lm.models.gpt_oss", "Model"): HeadRule(tied=False),
    ("mlx_lm.models.glm4", "Model"): HeadRule(tied=False),
    ("mlx_lm.models.lfm2", "Model"): HeadRule(tied=True),
    ("mlx_lm.models.nemotron_h", "Model"): HeadRule(body="backbone", tied=False),
    ("mlx_lm.models.mamba2", "Model"): HeadRule(body="backbone", embedding="embeddings"),
}
"""More such classes, by module and name (not imported until a model uses them), each with its `HeadRule`; each is
checked against `net(...)` in tests/runtime/batch/test_forward_logits.py."""

SPLIT_HEAD_BYTES = 256 << 20
"""A plain head matrix this large (Gemma 3's 262,144 x 640 float32 embedding: 671 MB) projects its two halves of
the vocabulary on two CPU streams (`side_stream.py`): the projection reads the whole matrix for a handful of rows,
so it is bound by memory traffic on one core, and each half's logits are the same dot products."""


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
    named = HEAD_ONLY_BY_NAME.get((kind.__module__, kind.__qualname__))
    rule = HeadRule() if kind in HEAD_ONLY_ARCHITECTURES else named
    if rule is None:
        return None
    if rule.wrapper is not None:
        net = getattr(net, rule.wrapper)
        if type(net).__qualname__ != "TextModel" or getattr(net, "sharding_group", None) is not None:
            return None
    body = getattr(net, rule.body)
    tied = rule.tied if isinstance(rule.tied, bool) else bool(attrgetter(rule.tied)(net))
    return body, _head(getattr(body, rule.embedding) if tied else net.lm_head, tied)


def _head(module: Any, tied: bool) -> Callable[[mx.array], mx.array]:
    """The projection of hidden states to logits by `module` (the embedding if `tied`, else an `lm_head`): its
    matrix's two halves of the vocabulary on two CPU streams where it is a plain matrix of `SPLIT_HEAD_BYTES` or more,
    else the module's own projection."""
    plain = type(module) is nn.Embedding or (type(module) is nn.Linear and "bias" not in module)
    own = module.as_linear if tied else module
    if not plain or module.weight.nbytes < SPLIT_HEAD_BYTES:
        return own
    weight = module.weight

    def project(hidden: mx.array) -> mx.array:
        stream = side_stream()
        if stream is None:
            return own(hidden)
        half = weight.shape[0] // 2
        with mx.stream(stream):
            upper = hidden @ weight[half:].T
        return mx.concatenate([hidden @ weight[:half].T, upper], axis=-1)

    return project


def head_only(net: Any) -> bool:
    """Whether `net`'s logits may be taken by running its head on chosen positions alone (see the allow-lists)."""
    return _split(net) is not None


def forward_rows(net: Any, caches: BatchCaches, feeds: Sequence[Sequence[int]],
                 read: Sequence[bool] | None = None) -> mx.array:
    """Float32 logits (B, V) at each row's last fed position after one pass (lazy), in row order; rows with an
    empty feed get garbage. `read` names the rows whose logits the caller reads (None: all): where the head can be
    split off, it runs on those rows alone and the others' logits are zeros, so a prefill chunk that ends no prompt,
    a row whose forced span drips on, or a resting row fed nothing pays no vocabulary projection. Caches that ask
    for uniform feeds (`uniform_feeds.py`) run one model pass per distinct feed length."""
    wanted = [True] * len(feeds) if read is None else list(read)
    if caches.uniform_feeds and len({len(f) for f in feeds if f}) > 1:
        return run_uniform(lambda part, reads: _one_pass(net, caches, part, reads), feeds, wanted)
    return _one_pass(net, caches, feeds, wanted)


def _one_pass(net: Any, caches: BatchCaches, feeds: Sequence[Sequence[int]], read: Sequence[bool]) -> mx.array:
    """`forward_rows` as one model pass over the right-padded feeds."""
    width = max((len(f) for f in feeds), default=0)
    if width == 0:
        raise StdslError("a pass needs at least one row with a token to feed")
    caches.prepare([len(f) for f in feeds], width)
    physical = caches.physical(feeds)
    inputs = mx.array([list(f) + [0] * (width - len(f)) for f in physical], dtype=mx.int32)
    return _logits(net, caches, inputs, [len(f) for f in physical], read)


def forward_drawn(net: Any, caches: BatchCaches, drawn: mx.array, fed: Sequence[bool]) -> mx.array:
    """`forward_rows` where row i feeds one token, `drawn[i]` (ids on the device, perhaps not computed yet), if
    `fed[i]`, else nothing (it ends with that draw: its logits are not read): the next pass is queued before the
    draws reach the host (`BatchCore`'s pipelined step)."""
    if not any(fed):
        raise StdslError("a pass needs at least one row with a token to feed")
    caches.prepare([int(f) for f in fed], 1)
    physical = caches.physical([[i] if f else [] for i, f in enumerate(fed)])
    rows = mx.array([f[0] if f else 0 for f in physical], dtype=mx.int32)
    held = mx.array([bool(f) for f in physical])
    inputs = mx.where(held, drawn[rows].astype(mx.int32), mx.array(0, mx.int32))[:, None]
    return _logits(net, caches, inputs, [len(f) for f in physical], fed)


def _logits(net: Any, caches: BatchCaches, inputs: mx.array, lengths: Sequence[int], read: Sequence[bool]) -> mx.array:
    """The pass over physical `inputs` (slots, T) whose slot s holds `lengths[s]` real tokens (caches prepared): the
    logits at each row's last fed position, in row order (zeros for a row not `read` where the head is split off)."""
    slots = caches.slots
    last = mx.array([max(n - 1, 0) for n in lengths], dtype=mx.int32)[:, None, None]
    split = _split(net)
    with chunked_recurrences():
        if split is not None:
            body, head = split
            hidden = mx.take_along_axis(body(inputs, cache=caches.layers), last, axis=1)[:, 0, :]
            logits = _read_rows(head, hidden, slots, read)
        else:
            logits = mx.take_along_axis(net(inputs, cache=caches.layers), last, axis=1)[:, 0, :]
            if slots != list(range(len(lengths))):
                logits = logits[mx.array(slots, dtype=mx.int32)]
    caches.commit()
    return logits.astype(mx.float32)


def _read_rows(head: Callable[[mx.array], mx.array], hidden: mx.array, slots: Sequence[int],
               read: Sequence[bool]) -> mx.array:
    """`head` on the last hidden states (slots, D) of the rows `read` (row i in slot `slots[i]`), in row order; the
    other rows' logits are zeros."""
    wanted = [i for i, r in enumerate(read) if r]
    if len(wanted) == len(slots):
        every = list(slots) == list(range(hidden.shape[0]))  # no free slot, none moved
        return head(hidden if every else hidden[mx.array(list(slots), dtype=mx.int32)])
    part = head(hidden[mx.array([slots[i] for i in wanted], dtype=mx.int32)])
    place = dict(zip(wanted, range(len(wanted))))
    rows = mx.concatenate([part, mx.zeros((1, part.shape[-1]), dtype=part.dtype)])
    return rows[mx.array([place.get(i, len(wanted)) for i in range(len(slots))], dtype=mx.int32)]
