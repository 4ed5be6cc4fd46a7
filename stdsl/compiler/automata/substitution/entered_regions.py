"""The states of a piece reached from the states its start moves to, found without a search where its shape proves
them all: a long string's chain entered at its first character reaches every state but its start.

`subsets` searches each piece's region breadth first (a level at a time; a chain of 20,000 states has
thousands of levels, 13 ms of `o9787`'s 0.5 s each, six times over).  A piece whose every state past the start has a
move into it from a lower-numbered state (a table in breadth-first order has one) reaches each of them from the start
by a path of falling numbers read backwards; when its accepting states have no move, every state on such a path but
its last is one that is not accepting, so a non-accepting state is reached from the start's non-accepting
successors, and an accepting one exactly where a state past the start moves into it.
"""

from __future__ import annotations

import numpy as np


def moved_into_past_start(table: np.ndarray, accepting: np.ndarray) -> np.ndarray | None:
    """Which states of `table` (states × classes, -1 dead) a state past 0 moves into, where every state past 0 has a
    move into it from a lower-numbered state and no accepting state has a move (the shape under which
    `entered_region` answers); else None."""
    if (table[accepting] >= 0).any():
        return None
    rows = np.arange(len(table), dtype=np.int64)[:, None]
    forward = np.zeros(len(table), dtype=bool)
    forward[table[table > rows]] = True
    if not forward[1:].all():
        return None
    inner = table[1:]
    moved_into = np.zeros(len(table), dtype=bool)
    moved_into[inner[inner >= 0]] = True
    return moved_into


def entered_region(table: np.ndarray, accepting: np.ndarray, moved_into: np.ndarray, states: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """`subsets`'s region of a piece entered at `states` (sorted, distinct), given its
    `moved_into_past_start`: the states reached from them through non-accepting states (`states` among them) and the
    accepting ones reached, as sorted arrays; None unless `states` holds every non-accepting successor of state 0
    and not 0 itself (a search decides then).  Every non-accepting state past 0 is reached, and so is each other
    state that a state past 0 moves into, and the start's successors where the start is one of those."""
    if not len(states) or states[0] == 0:
        return None
    first = table[0]
    successors = first[first >= 0]
    if not np.isin(successors[~accepting[successors]], states).all():
        return None
    given = np.zeros(len(table), dtype=bool)
    given[states] = True
    reached = moved_into | given | ~accepting
    reached[0] = moved_into[0]
    reached[successors] |= reached[0]
    closing = reached & accepting & ~given
    inside = reached & ~closing
    return np.flatnonzero(inside).astype(np.int64), np.flatnonzero(closing).astype(np.int64)
