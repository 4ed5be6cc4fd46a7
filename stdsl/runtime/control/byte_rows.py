"""A state's next state per byte, read through the automaton's byte classes: what the planner and cover index.

The automaton stores states x classes (issue 13, item 2); expanding it to 256 columns per grammar
would undo that, so a planner reads one state's row at a time, the way it reads a pushdown
machine's configurations.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ByteRows:
    """`rows[state]`: the (256,) next states of one state (-1 dead), expanded from the class table on demand."""

    def __init__(self, automaton: Any) -> None:
        self.class_transitions = np.asarray(automaton.class_transitions)
        self.byte_class = np.asarray(automaton.byte_class)

    def __getitem__(self, state: int) -> np.ndarray:
        return self.class_transitions[int(state)][self.byte_class]


def byte_rows(automaton: Any) -> Any:
    """The planner's view of an automaton's transitions: `ByteRows` over its byte classes, or its own
    256-column table when it has no class form (anything indexable by state gives a row)."""
    if hasattr(automaton, "class_transitions") and hasattr(automaton, "byte_class"):
        return ByteRows(automaton)
    return np.asarray(automaton.transitions)


def live_counts(automaton: Any) -> np.ndarray:
    """Number of live bytes per state (the automaton's own count when it keeps one)."""
    if hasattr(automaton, "class_transitions") and hasattr(automaton, "live_count"):
        return np.asarray(automaton.live_count)
    return np.count_nonzero(np.asarray(automaton.transitions) >= 0, axis=1)
