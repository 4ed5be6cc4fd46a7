"""Ragged feeds as passes of one width, for models whose recurrent layers scan a shorter row's padding into its state.

The engine right-pads the rows of a pass to its longest feed. mlx-lm's Mamba 2, Qwen3.5 and LFM2 layers read
`cache.lengths` and leave padded positions out of their states; Mamba, Jamba, Nemotron-H, RWKV-7, RecurrentGemma and
others scan every position they are given. For those the load probe (`load_probe.py`) chooses uniform feeds: one
ragged pass becomes one model pass per distinct feed length, in which every row that feeds, feeds the same number
of positions (no padding after a real token), and a row that feeds nothing keeps the state it had (`RowStatesCache`
puts it back after the pass). A pass of k distinct feed lengths costs k model passes; a pass whose rows feed
alike (one token each, the common decoding step) costs one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mlx.core as mx


def uniform_parts(feeds: Sequence[Sequence[int]]) -> list[list[Sequence[int]]]:
    """`feeds` split into consecutive passes in each of which every row feeds the same count or nothing: one pass
    per distinct non-zero feed length, shortest first (a row takes part until its feed is spent)."""
    parts: list[list[Sequence[int]]] = []
    start = 0
    for end in sorted({len(feed) for feed in feeds if feed}):
        parts.append([feed[start:end] if len(feed) > start else [] for feed in feeds])
        start = end
    return parts


def run_uniform(one_pass: Callable[[list[Sequence[int]], list[bool]], mx.array], feeds: Sequence[Sequence[int]],
                read: Sequence[bool] | None = None) -> mx.array:
    """Each row's logits (B, V) at its last fed position, from `one_pass(part, reads)` run on each part of
    `uniform_parts`: a row's come from the last part it feeds in, which alone is asked to read it (`reads`) when
    `read` names it (None: every row)."""
    read = [True] * len(feeds) if read is None else read
    logits: mx.array | None = None
    parts = uniform_parts(feeds)
    for k, part in enumerate(parts):
        ends = [bool(feed) and not (k + 1 < len(parts) and parts[k + 1][i]) for i, feed in enumerate(part)]
        out = one_pass(part, [r and e for r, e in zip(read, ends)])
        if logits is None:
            logits = out
        else:
            fed = mx.array([bool(feed) for feed in part])[:, None]
            logits = mx.where(fed, out, logits)
    if logits is None:
        raise ValueError("a pass needs at least one row with a token to feed")
    return logits
