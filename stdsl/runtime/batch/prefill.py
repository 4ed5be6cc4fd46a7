"""Prefilling rows that join the batch, and the drip rule that sizes a pass's feed.

Ragged feeds (drip rule): a pass over B rows of width T costs about `1 + TOKEN_COST * B * T` single-token passes on
this CPU (SmolLM2, `benchmarks/batch.py`: least squares gives 0.096). Each pass feeds at most `width` tokens per
row, the width among the feed lengths that maximises tokens fed per unit of cost; longer feeds drip the rest in
later passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx

from stdsl.runtime.batch.forward import forward_rows
from stdsl.runtime.batch.prompt_cache import PromptCache
from stdsl.runtime.batch.row import Row
from stdsl.runtime.row_caches.layers import CacheLayout, LeafRow

TOKEN_COST = 0.1
DEFAULT_PREFILL_CHUNK = 512


def feed_width(lengths: Sequence[int]) -> int:
    """The per-row token cap for one pass: the feed length maximising tokens fed per unit of pass cost."""
    rows = len(lengths)
    best, best_rate = 1, -1.0
    for width in sorted(set(lengths)):
        fed = sum(min(n, width) for n in lengths)
        rate = fed / (1 + TOKEN_COST * rows * width)
        if rate > best_rate:
            best, best_rate = width, rate
    return best


def prefill_rows(net: Any, layout: CacheLayout, prompt_cache: PromptCache, rows: list[Row], prefill_chunk: int,
                 counters: dict[str, int]) -> tuple[list[list[LeafRow]], list[mx.array]] | None:
    """Prefill new rows together from their longest cached prefix, in caches of their own; each row's state (its
    leaf rows) and last logits, or None when every row was cancelled meanwhile.

    Counts passes and tokens in `counters`. Chunks are at most `prefill_chunk` wide and follow the drip rule over
    the rows that still have prompt to feed: a row whose prompt is done leaves the prefill batch (its state kept
    aside), so one long prompt among short ones is prefilled alone after the short ones instead of padding them.
    """
    sequences = [row.prompt_ids + row.feed for row in rows]
    caches = layout.new()
    starts: list[int] = []
    for sequence in sequences:
        hit = prompt_cache.lookup(sequence[:-1])
        start = hit.length if hit is not None else 0
        starts.append(start)
        caches.append_rows([hit.layers if hit is not None else None], [start])
    pending = [s[k:] for s, k in zip(sequences, starts)]
    states: list[list[LeafRow]] = [[] for _ in rows]
    last: list[mx.array | None] = [None] * len(rows)
    active = list(range(len(rows)))
    """The rows still feeding, in the order of the prefill caches' rows."""
    while active:
        if all(row.cancelled for row in rows):
            for row in rows:
                row.cancel_now()
            return None
        width = min(prefill_chunk, feed_width([len(pending[i]) for i in active]))
        chunk = [pending[i][:width] for i in active]
        logits = forward_rows(net, caches, chunk, [len(pending[i]) <= width for i in active])
        mx.eval(logits, *caches.arrays())
        counters["passes"] += 1
        done: list[int] = []
        for k, (i, piece) in enumerate(zip(active, chunk)):
            rows[i].stats.passes += 1
            counters["prefilled_tokens"] += len(piece)
            pending[i] = pending[i][len(piece) :]
            if not pending[i]:
                last[i] = logits[k]
                states[i] = caches.row(k)
                done.append(k)
        if done:
            stay = [k for k in range(len(active)) if k not in done]
            caches.keep(stay)
            caches.compact()
            active = [active[k] for k in stay]
    for i, (row, sequence) in enumerate(zip(rows, sequences)):
        counters["prompt_tokens"] += len(row.prompt_ids)
        row.stats.cached_tokens = min(starts[i], len(row.prompt_ids))
        if row.remember:
            prompt_cache.store(sequence, states[i])
        row.fed = list(row.feed)
        row.feed = []
        row.publish()
    return states, [x for x in last if x is not None]
