"""How much of the runner a row's constraint may take: its control share, and what a row past it does.

Every row's mask and advance work is timed twice: in wall-clock seconds, what it takes of the runner from the
other rows, for its share; in the runner thread's CPU seconds, what the constraint costs whatever else the machine
runs, for its limit (wall-clock time would fail rows on a machine loaded by other processes). A row's share is
`CONTROL_GRACE` seconds plus, per sampled token, `CONTROL_FLOOR` seconds or `SHARE_FACTOR` times the per-token work
of the cheapest other row, whichever is more (the cheapest, so two costly rows cannot vouch for each other). While
other rows run, a row past its share rests `REST_FACTOR` times the excess: it stays in the passes, fed nothing, keeps
the logits it had and neither samples nor computes masks, so a grammar whose masks are costly (first visits of many
pushdown configurations under a token budget) takes about 1 / (1 + REST_FACTOR) of the runner's time beyond its
share from the others. Resting changes no token. A row whose control work exceeds `max_control_seconds` of CPU in
all fails.
"""

from __future__ import annotations

import time

import mlx.core as mx

from stdsl.errors import ControlBudgetError
from stdsl.runtime.batch.row import Row

CONTROL_GRACE = 0.02
"""Seconds of mask and advance work every row may take beyond its per-token share (a grammar's first masks)."""
CONTROL_FLOOR = 0.001
"""Seconds of mask and advance work per sampled token a row may take whatever the other rows take."""
SHARE_FACTOR = 2.0
"""A row's per-token share: this many times the per-token control work of the cheapest other row."""
REST_FACTOR = 10.0
"""A row past its share rests this many times the excess (the others' steps meanwhile)."""
DEFAULT_MAX_CONTROL_SECONDS = 60.0
"""CPU seconds of mask and advance work a row may take in all before it fails (`max_control_seconds`)."""


def awake(rows: list[Row], logits: mx.array, ready: list[int]) -> list[int]:
    """The ready rows that may sample now: not resting, unless every running row rests (then none does). A
    resting row keeps the logits of the pass that fed it, since later passes feed it nothing."""
    now = time.perf_counter()
    if all(row.rest_until > now for row in rows):
        for row in rows:
            row.rest_until = 0.0
    sampling = []
    for i in ready:
        row = rows[i]
        if row.rest_until <= now:
            sampling.append(i)
        elif row.held is None:
            row.held = logits[i]
    return sampling


def weigh(rows: list[Row], drawing: list[int], finished: list[int], max_control_seconds: float) -> int:
    """Weigh each drawing row's control work against its share: past it, the row rests (when others run); past
    `max_control_seconds` of CPU in all, it fails (added to `finished`). How many rows began to rest."""
    rates = {i: row.control_seconds / row.stats.sampled_tokens
             for i, row in enumerate(rows) if row.stats.sampled_tokens}
    now = time.perf_counter()
    rests = 0
    for i in drawing:
        if i in finished:
            continue
        row = rows[i]
        if row.control_cpu_seconds > max_control_seconds:
            row.fail(ControlBudgetError(
                f"the constraint took {row.control_cpu_seconds:.1f} s of CPU in mask and advance work, over the "
                f"engine's max_control_seconds ({max_control_seconds:g} s): its grammar is too costly to decode"))
            finished.append(i)
            continue
        others = [rate for j, rate in rates.items() if j != i]
        share = max(CONTROL_FLOOR, SHARE_FACTOR * min(others)) if others else CONTROL_FLOOR
        excess = row.control_seconds - CONTROL_GRACE - share * row.stats.sampled_tokens - row.control_excused
        if excess > 0:
            row.control_excused += excess
            if len(rows) > 1:
                row.rest_until = now + REST_FACTOR * excess
                rests += 1
    return rests
