"""Counted repetition `B{m,n}` built directly from the body's DFA: a product of B with a counter.

Expanding `B{m,n}` into n copies of B's NFA and determinizing them costs Python work per copy and per
subset; when B's end is deterministic the DFA of the repetition is B's table repeated once per count,
built here with NumPy in one step.  B's end is deterministic when, at every accepting state, the classes
that continue the current item and the classes that start the next one (the start's live classes) are
disjoint (so a prefix-free B always qualifies: a JSON string character, an item after its comma): then a
state is (item index, state of B), and an accepting state of B reads its own row, or the start's row into
the next item.  Otherwise (`None`) the caller expands the copies as before.  An unbounded tail `B{m,}`
caps the counter at m-1, where the language no longer depends on it.

The table is trim: a body whose start no move enters (a prefix-free one, as a JSON string character) has no copy
of its start in an item (an item begins with the start's moves), so none is laid out; every other state is reached
and reaches acceptance (the body is trim, and an item that is not the last may be followed by the next one).
Those copies were 5,000 of the 105,001 rows of a 5,000-character length bound, which a trim then searched the whole
table to drop (0.02 s).
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.deadline import check_deadline

LAYER_ROWS = 1 << 16
"""Rows of a counted table laid out between two deadline checks (whole copies of the body at a time)."""


def counted_table(body: Automaton, low: int, high: int | None,
                  max_states: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The trim DFA of `body{low,high}` (high None: unbounded) as (class table, accepting, byte_class), start 0;
    `body` must be trim (as `build_automaton` returns it).

    None when the body's end is not deterministic (see the module) or the table would pass `max_states`
    rows (counted with a copy of the start in each item); the caller then expands the copies.  `high` must be at
    least 1 and at least `low`.
    """
    table = np.asarray(body.class_transitions, dtype=np.int64)
    accepting = np.asarray(body.accepting, dtype=bool)
    start_live = table[0] >= 0
    if accepting[0]:
        if start_live.any():
            return None
        low = 0
    if (high is None or high > 1) and (table[accepting][:, start_live] >= 0).any():
        return None
    layers = max(low - 1, 0) + 1 if high is None else high
    size = table.shape[0]
    if 1 + layers * size > max_states:
        return None
    skipped = 0 if (table == 0).any() else 1  # the start has no copy in an item when no move enters it
    kept = size - skipped
    index = np.arange(layers)
    dtype = np.int32 if 1 + layers * kept < 2**31 else np.int64
    inner = table[skipped:] >= 0
    jumps = accepting[skipped:, None] & start_live[None, :]
    within = 1 - skipped + table[skipped:]
    ahead = 1 - skipped + kept + table[0]
    first = np.where(inner, within, np.where(jumps, ahead, -1)).astype(dtype)
    """Item 0's rows: its own moves, and an accepting state's moves into item 1; item i's are these plus i * kept."""
    last = np.where(inner, within, np.where(jumps, ahead - kept, -1) if high is None else -1).astype(np.int64)
    """The last item's rows before their shift: a bounded repetition ends there, an unbounded one reads on in it."""
    counted = np.empty((1 + layers * kept, table.shape[1]), dtype=dtype)
    counted[0] = np.where(start_live, 1 + table[0] - skipped, -1)
    items = counted[1:].reshape(layers, kept, table.shape[1])
    live = np.greater_equal(first, 0).astype(dtype)
    step = max(1, LAYER_ROWS // size)
    for lo in range(0, layers - 1, step):
        check_deadline("counted repetition")
        block = items[lo:min(lo + step, layers - 1)]
        np.multiply(live[None], (np.arange(lo, lo + len(block), dtype=dtype) * kept)[:, None, None], out=block)
        block += first
    items[layers - 1] = np.where(last >= 0, last + (layers - 1) * kept, -1)
    check_deadline("counted repetition")
    accepts = np.concatenate([[low == 0], (accepting[None, skipped:] & (index + 1 >= low)[:, None]).reshape(-1)])
    return counted, accepts, np.asarray(body.byte_class)
