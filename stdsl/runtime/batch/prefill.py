"""Prefilling rows that join the batch, and the drip rule that sizes a pass's feed.

Ragged feeds (drip rule): a pass over B rows of width T costs about `1 + TOKEN_COST * B * T` single-token passes on
this CPU (SmolLM2, `benchmarks/batch.py`: least squares gives 0.096). Each pass feeds at most `width` tokens per
row, the width among the feed lengths that maximises tokens fed per unit of cost; longer feeds drip the rest in
later passes.

Rows admitted together that share a prefix beyond their prompt-cache hits (`shared_prefixes.py`) prefill it once:
its stem is prefilled first, then every row that shares it starts from a copy of its state. A row may also start
from a running row's keys and values (`Donor`: attention layers only, the running row held whole), where that row's
tokens share more with it than the prompt cache does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from stdsl.runtime.batch.forward import forward_rows
from stdsl.runtime.batch.prompt_cache import CacheHit, PromptCache
from stdsl.runtime.batch.row import Row
from stdsl.runtime.batch.shared_prefixes import Stem, common_prefix, deepest_stems, plan_stems
from stdsl.runtime.platform.side_stream import beside, side_stream
from stdsl.runtime.row_caches.layers import CacheLayout, LeafRow, leaf_row_arrays

TOKEN_COST = 0.1
DEFAULT_PREFILL_CHUNK = 512

Origin = tuple[Sequence[LeafRow] | None, int]
"""Where a prefill starts: a state (each leaf cache's row; None: empty) and the positions it holds."""

Donor = tuple[Sequence[int], Callable[[int], list[LeafRow]]]
"""A running row's tokens, each in its caches, and its state over its first n positions (every layer cut to n)."""


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
                 counters: dict[str, int], donors: Sequence[Donor] = ()) -> tuple[list[list[LeafRow]],
                                                                             list[mx.array]] | None:
    """Prefill new rows together from their longest cached prefix (the prompt cache's, or a running row's in
    `donors`) or shared stem, in caches of their own; each row's state (its leaf rows) and last logits, or None when
    every row was cancelled meanwhile.

    Counts passes and tokens in `counters` (`shared_prefix_rows` and `shared_prefix_tokens`: rows started from a
    stem or a running row, and the prompt tokens those spared them). Chunks follow `_feed_together`.
    """
    sequences = [row.prompt_ids + row.feed for row in rows]
    hits: list[CacheHit | None] = [prompt_cache.lookup(sequence[:-1]) for sequence in sequences]
    cached = [hit.length if hit is not None else 0 for hit in hits]
    found = list(cached)
    for i, sequence in enumerate(sequences):
        shared, donor = max(((common_prefix(sequence[:-1], tokens), state) for tokens, state in donors),
                            key=lambda pair: pair[0], default=(0, None))
        if donor is not None and shared > found[i]:
            hits[i], found[i] = CacheHit(shared, donor(shared)), shared
    stems = plan_stems([sequence[:-1] for sequence in sequences], found, TOKEN_COST)
    prefilled = _prefill_stems(net, layout, stems, sequences, hits, rows, prefill_chunk, counters)
    if prefilled is None:
        _cancel(rows)
        return None
    origins: list[Origin] = []
    for i, stem in enumerate(deepest_stems(stems, len(rows))):
        hit = hits[i]
        if stem is not None:
            origins.append((prefilled[stem], stems[stem].length))
        else:
            origins.append((hit.layers if hit is not None else None, found[i]))
    starts = [length for _, length in origins]
    for start, own in zip(starts, cached):
        counters["shared_prefix_rows"] += start > own
        counters["shared_prefix_tokens"] += start - own

    def fed(i: int) -> None:
        rows[i].stats.passes += 1

    done = _feed_together(net, layout, origins, [s[k:] for s, k in zip(sequences, starts)], True, prefill_chunk,
                          counters, lambda: all(row.cancelled for row in rows), fed)
    if done is None:
        _cancel(rows)
        return None
    states, last = done
    for i, (row, sequence) in enumerate(zip(rows, sequences)):
        counters["prompt_tokens"] += len(row.prompt_ids)
        row.stats.cached_tokens = min(starts[i], len(row.prompt_ids))
        if row.remember:
            prompt_cache.store(sequence, states[i])
        row.fed = list(row.feed)
        row.feed = []
        row.publish()
    return states, [x for x in last if x is not None]


def _prefill_stems(net: Any, layout: CacheLayout, stems: list[Stem], sequences: list[list[int]],
                   hits: list[CacheHit | None], rows: list[Row], prefill_chunk: int,
                   counters: dict[str, int]) -> list[list[LeafRow]] | None:
    """Each stem's state, prefilled level by level (a stem after the one it extends); None when every row was
    cancelled meanwhile."""
    states: list[list[LeafRow]] = [[] for _ in stems]
    for level in sorted({stem.level for stem in stems}):
        chosen = [k for k, stem in enumerate(stems) if stem.level == level]
        origins: list[Origin] = []
        for k in chosen:
            stem = stems[k]
            hit = hits[stem.hit_of] if stem.hit_of is not None else None
            start = states[stem.parent] if stem.parent is not None else hit.layers if hit is not None else None
            origins.append((start, stem.base))
        pending = [sequences[stems[k].riders[0]][stems[k].base : stems[k].length] for k in chosen]

        def fed(j: int) -> None:
            for i in stems[chosen[j]].riders:
                rows[i].stats.passes += 1

        done = _feed_together(net, layout, origins, pending, False, prefill_chunk, counters,
                              lambda: all(row.cancelled for row in rows), fed)
        if done is None:
            return None
        for k, state in zip(chosen, done[0]):
            states[k] = state
    return states


def _feed_together(net: Any, layout: CacheLayout, origins: Sequence[Origin], pending: list[list[int]], read: bool,
                   prefill_chunk: int, counters: dict[str, int], cancelled: Callable[[], bool],
                   fed: Callable[[int], None]) -> tuple[list[list[LeafRow]], list[mx.array | None]] | None:
    """Feed each sequence `pending[i]` after its origin, together in chunks; each one's state and (where `read`) its
    last logits, or None when `cancelled()` turns true between two chunks. `fed(i)` is told of each pass feeding i.

    On the CPU, sequences of `BESIDE_TOKENS` tokens or more in all feed as two groups of about equal tokens, each in
    caches of its own, the second on a worker thread's stream (`side_stream.beside`): two cores prefill at once.
    """
    states: list[list[LeafRow]] = [[] for _ in origins]
    last: list[mx.array | None] = [None] * len(origins)
    parts = _parts(pending)
    if len(parts) == 1:
        ended = _feed_group(net, layout, origins, pending, parts[0], read, prefill_chunk, counters, cancelled, fed,
                            states, last)
        return (states, last) if ended else None
    mx.eval(*(a for i in parts[1] for a in leaf_row_arrays(origins[i][0])))  # a lazy state cannot cross threads
    counted = dict.fromkeys(counters, 0)
    told: list[int] = []

    def second() -> bool:
        ended = _feed_group(net, layout, origins, pending, parts[1], read, prefill_chunk, counted, cancelled,
                            told.append, states, last)
        mx.eval(*(a for i in parts[1] for a in leaf_row_arrays(states[i])),
                *(logits for i in parts[1] if (logits := last[i]) is not None))
        return ended

    both = beside(lambda: _feed_group(net, layout, origins, pending, parts[0], read, prefill_chunk, counters,
                                      cancelled, fed, states, last), second)
    for key, count in counted.items():
        counters[key] += count
    for i in told:
        fed(i)
    return (states, last) if all(both) else None


BESIDE_TOKENS = 256
"""Tokens to feed, over two sequences or more, from which they feed as two groups on two cores (`_feed_together`)."""


def _parts(pending: Sequence[Sequence[int]]) -> list[list[int]]:
    """The sequences (by index) fed in each group: one group, or, on the CPU from `BESIDE_TOKENS`, two of about equal
    tokens (longest first, each to the lighter group)."""
    every = list(range(len(pending)))
    if side_stream() is None or len(pending) < 2 or sum(len(p) for p in pending) < BESIDE_TOKENS:
        return [every]
    parts: tuple[list[int], list[int]] = ([], [])
    tokens = [0, 0]
    for i in sorted(every, key=lambda i: -len(pending[i])):
        lighter = tokens.index(min(tokens))
        parts[lighter].append(i)
        tokens[lighter] += len(pending[i])
    return [sorted(parts[0]), sorted(parts[1])]


def _feed_group(net: Any, layout: CacheLayout, origins: Sequence[Origin], pending: list[list[int]], part: list[int],
                read: bool, prefill_chunk: int, counters: dict[str, int], cancelled: Callable[[], bool],
                fed: Callable[[int], None], states: list[list[LeafRow]], last: list[mx.array | None]) -> bool:
    """Feed the sequences `part` together in caches of their own, filling their `states` and `last` logits; False
    when cancelled first.

    Chunks are at most `prefill_chunk` wide and follow the drip rule over the sequences that still have tokens to
    feed: one that is done leaves the batch (its state kept aside), so one long prompt among short ones is prefilled
    alone after the short ones instead of padding them.
    """
    caches = layout.new()
    caches.append_rows([origins[i][0] for i in part], [origins[i][1] for i in part])
    active = list(part)
    """The sequences still feeding, in the order of the caches' rows."""
    while active:
        if cancelled():
            return False
        width = min(prefill_chunk, feed_width([len(pending[i]) for i in active]))
        chunk = [pending[i][:width] for i in active]
        logits = forward_rows(net, caches, chunk, [read and len(pending[i]) <= width for i in active])
        mx.eval(logits, *caches.arrays())
        counters["passes"] += 1
        done: list[int] = []
        for k, (i, piece) in enumerate(zip(active, chunk)):
            fed(i)
            counters["prefilled_tokens"] += len(piece)
            pending[i] = pending[i][len(piece) :]
            if not pending[i]:
                last[i] = logits[k] if read else None
                states[i] = caches.row(k)
                done.append(k)
        if done:
            stay = [k for k in range(len(active)) if k not in done]
            caches.keep(stay)
            caches.compact()
            active = [active[k] for k in stay]
    return True


def _cancel(rows: list[Row]) -> None:
    """End every row of a prefill whose rows were all cancelled."""
    for row in rows:
        row.cancel_now()
