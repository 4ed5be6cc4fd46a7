"""A state's next state per byte, read through the automaton's byte classes: what the planner and cover index.

The automaton stores states x classes (issue 13, item 2); expanding it to 256 columns per grammar
would undo that, so a planner reads one state's row at a time, the way it reads a pushdown
machine's configurations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stdsl.compiler.automata.automaton import Automaton


class ByteRows:
    """`rows[state]`: the (256,) next states of one state (-1 dead), expanded from the state's class row on demand."""

    def __init__(self, automaton: Automaton) -> None:
        self.automaton = automaton

    def __getitem__(self, state: int) -> np.ndarray:
        return self.automaton.class_row(int(state))[self.automaton.byte_class]


def byte_rows(automaton: Any) -> Any:
    """The planner's view of an automaton's transitions: `ByteRows` over an `Automaton`'s class rows, or
    the machine's own 256-column table when it has no class form (anything indexable by state gives a row)."""
    if isinstance(automaton, Automaton):
        return ByteRows(automaton)
    return np.asarray(automaton.transitions)


def live_counts(automaton: Any) -> np.ndarray:
    """Number of live bytes per state (the automaton's own count when it keeps one)."""
    if hasattr(automaton, "class_transitions") and hasattr(automaton, "live_count"):
        return np.asarray(automaton.live_count)
    return np.count_nonzero(np.asarray(automaton.transitions) >= 0, axis=1)
