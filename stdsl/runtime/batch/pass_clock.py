"""How long the running model pass is expected to take, and what new grammars' rows do in it (issue 36, item 4).

The core queues a pass, computes the masks of the rows that sample after it, then waits for its logits. What
is left of the pass's expected time goes to the lookaheads of rows whose grammar is new
(`stdsl.control.lookahead`): the tables those rows read next are filled on the runner while it would otherwise
wait, one unit of work at a time, so a step is late by at most one unit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import mlx.core as mx

AHEAD_FRACTION: float | None = None
"""Of a pass's expected seconds, the part after it was queued that new grammars' lookaheads may use; None: by
backend (`ahead_fraction`)."""
GPU_AHEAD_FRACTION = 0.8
"""The part where the pass runs on a GPU and the host waits idle."""
MAX_PASS_SECONDS = 0.5
"""The most a pass is expected to take, whatever was measured (a stall must not open a long lookahead)."""
READY_SECONDS = 1e-3
"""A wait for logits shorter than this found them ready: the pass took less than the time since it was queued."""


class PassClock:
    """The expected seconds from queueing a pass to its logits, learnt from the waits for them."""

    def __init__(self) -> None:
        self.queued: float | None = None
        """When the pass in flight was queued (None: the logits at hand are not one clean pass's)."""
        self.expected = 0.0
        """Expected seconds of a pass, at most `MAX_PASS_SECONDS`."""

    def waited(self, waited_from: float) -> None:
        """The logits arrived now after a wait begun at `waited_from`: a real wait measures the pass, logits ready
        at once shrink the estimate (the time between was not the pass's)."""
        now, queued, self.queued = time.perf_counter(), self.queued, None
        if queued is None:
            return
        if now - waited_from > READY_SECONDS:
            self.expected = min(MAX_PASS_SECONDS, 0.5 * self.expected + 0.5 * (now - queued))
        else:
            self.expected *= 0.5

    def deadline(self) -> float:
        """Until when lookaheads may run during the pass in flight (now where none was timed)."""
        if self.queued is None:
            return time.perf_counter()
        return self.queued + ahead_fraction() * self.expected


def ahead_fraction() -> float:
    """`AHEAD_FRACTION` where set, else `GPU_AHEAD_FRACTION` on a GPU and none on MLX's CPU backend: there the
    pass's threads share the cores with the runner's Python, so work during a pass slows it (a busy Python thread
    took a SmolLM2 pass from 433 to 736 ms on 2 cores), and a first request measured slower with the lookahead
    (benchmarks/results/first_token.md)."""
    if AHEAD_FRACTION is not None:
        return AHEAD_FRACTION
    return GPU_AHEAD_FRACTION if mx.default_device() == mx.gpu else 0.0


def look_ahead(rows: Sequence[Any], deadline: float) -> float:
    """Until `deadline`, warm the tables the rows with a lookahead may read next, a unit of work per row in turn;
    the seconds spent (none once `deadline` has passed)."""
    began = time.perf_counter()
    if began >= deadline:
        return 0.0
    ahead = []
    for row in rows:
        if row.ahead is not None and not row.cancelled:
            row.ahead.follow(row.log.configuration)
            ahead.append(row.ahead)
    while ahead and time.perf_counter() < deadline:
        ahead = [lookahead for lookahead in ahead if lookahead.step()]
    return time.perf_counter() - began
