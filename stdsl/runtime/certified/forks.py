"""Logs for certified decoding's drafts: unbudgeted twins of a row, drafts placed at a block's entry.

A fork of a row is its log kept (a log is frozen: moving a copy makes a new one). A draft row's log records
the token it sampled at each output offset: where the forced-span policy re-splits a sampled token (`:"`
sampled, `:` + `":` fed), the replay must take the sampled one to follow the row's path.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from stdsl.control.controller import Controller
from stdsl.control.log import Log


def unbudgeted(controller: Controller, log: Log) -> tuple[Controller, Log]:
    """A row's controller without the token budget and its log recording, no tokens left counted (drafts are capped
    by draws instead; the replay applies the budget)."""
    recording = log.recording()
    return controller.without_budget(), replace(recording, configuration=replace(recording.configuration,
                                                                                   remaining=None))


def start_at(controller: Controller, log: Log, state: int) -> tuple[Controller, Log, list[int]]:
    """A fresh unbudgeted row of the same automaton placed at `state`: its controller, its recording log, and the
    forced tokens it begins with."""
    free, recording = unbudgeted(controller, log)
    placed = free.placed(state, recording)
    return free, placed, list(placed.tokens)


def masked_argmax(logits: np.ndarray, allowed: np.ndarray) -> int:
    """The highest-scoring admissible token (the sequential greedy choice)."""
    width = min(len(logits), len(allowed))
    return int(np.argmax(np.where(allowed[:width], logits[:width], -np.inf)))
