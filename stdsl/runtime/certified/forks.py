"""Copies of a row state for certified decoding: forks that share tables, drafts placed at a block's entry.

A draft row's state records the token it sampled at each output offset: where the forced-span policy
re-splits a sampled token (`:"` sampled, `:` + `":` fed), the replay must take the sampled one to follow
the row's path.
"""

from __future__ import annotations

import copy

import numpy as np

from stdsl.control.constraint_state import ConstraintState


def fork(control: ConstraintState) -> ConstraintState:
    """An independent copy of a row state: the same controller and its log, kept (a log is frozen: moving the copy
    replaces its own), so a replay never touches the original."""
    return copy.copy(control)


def recording(control: ConstraintState) -> ConstraintState:
    """A fork of a row state (DFA or pushdown) whose log records its sampled tokens from here on."""
    twin = fork(control)
    twin.log = control.log.recording()
    return twin


def sampled_tokens(control: ConstraintState) -> dict[int, int]:
    """The tokens a recording state sampled, by output offset (empty for any other state)."""
    return control.log.sampled_tokens()


def unbudgeted(control: ConstraintState) -> ConstraintState:
    """A recording fork without the token budget (drafts are capped by draws instead; the replay applies it)."""
    twin = recording(control)
    twin.controller = control.controller.without_budget()
    twin.remaining = None
    return twin


def start_at(template: ConstraintState, state: int) -> tuple[ConstraintState, list[int]]:
    """A fresh unbudgeted state of the same automaton placed at `state`, and the forced tokens it begins with."""
    control = unbudgeted(template)
    return control, control.place(control.controller.start_at(state))


def masked_argmax(logits: np.ndarray, allowed: np.ndarray) -> int:
    """The highest-scoring admissible token (the sequential greedy choice)."""
    width = min(len(logits), len(allowed))
    return int(np.argmax(np.where(allowed[:width], logits[:width], -np.inf)))
