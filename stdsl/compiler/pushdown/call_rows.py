"""The call edge each state of a pushdown grammar takes on each byte class, kept for the states that call.

Most states of a grammar call nothing (a key's bytes, a string's loop, a number): a dense (states, classes) table
of -1 holding a few call edges was the largest fresh allocation of a large grammar's compile (MaskBench o9787:
139,581 states by 77 classes, 21 MB, for 309 calls; 0.04-0.15 s of its first compile in a forked process), and the
runtime copied it again to find its byte classes.  Here only the calling states' rows are kept, in state order, and
a state's row is found by binary search.
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler.automata.automaton import canonical_classes
from stdsl.compiler.automata.state_graph import distinct_values
from stdsl.compiler.deadline import check_deadline

CALLS_CHECKED = 2048
"""Call edges `call_rows` gathers between two deadline checks (a few milliseconds)."""


class CallRows:
    """`calls[q][c]`: the call edge state q takes on byte class c (-1 none), over `shape` (states, classes); rows
    are held for `states` (sorted, distinct) only, every other state's row is all -1."""

    def __init__(self, states: np.ndarray, rows: np.ndarray, num_states: int) -> None:
        if rows.ndim != 2 or len(rows) != len(states):
            raise ValueError(f"{len(states)} calling states need as many rows, got shape {rows.shape}")
        self.states = np.asarray(states, dtype=np.int64)
        self.rows = rows
        self.shape = (num_states, int(rows.shape[1]))
        self._none = np.full(rows.shape[1], -1, dtype=rows.dtype)
        self._none.flags.writeable = False

    def with_rows(self, rows: np.ndarray) -> CallRows:
        """The same calling states with other rows (the same edges over other classes)."""
        return CallRows(self.states, rows, self.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by the rows and their states."""
        return int(self.states.nbytes + self.rows.nbytes + self._none.nbytes)

    def __getitem__(self, state: int) -> np.ndarray:
        """The row of one state (read-only where the state calls nothing)."""
        at = int(np.searchsorted(self.states, state))
        if at < len(self.states) and self.states[at] == state:
            return self.rows[at]
        return self._none

    def of(self, states: np.ndarray) -> np.ndarray:
        """The rows of `states` (an int array), as a new (len(states), classes) array."""
        states = np.asarray(states, dtype=np.int64)
        out = np.full((len(states), self.shape[1]), -1, dtype=self.rows.dtype)
        if len(self.states):
            at = np.minimum(np.searchsorted(self.states, states), len(self.states) - 1)
            hit = self.states[at] == states
            out[hit] = self.rows[at[hit]]
        return out

    def dense(self) -> np.ndarray:
        """The whole (states, classes) table: for tests and small grammars."""
        table = np.full(self.shape, -1, dtype=self.rows.dtype)
        table[self.states] = self.rows
        return table


def _call_pairs(own: np.ndarray, first_classes: np.ndarray, call_state: np.ndarray, call_callee: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (state, class, edge) a call edge reads, in edge order, and whether the state reads that class itself;
    gathered `CALLS_CHECKED` edges at a time with a deadline check between (MaskBench o69209's table took 1 s of
    CPU in one stretch when it was filled at once)."""
    states, columns, edges, owned = [], [], [], []
    for lo in range(0, len(call_state), CALLS_CHECKED):
        if lo:
            check_deadline("the pushdown call table")
        edge, column = np.nonzero(first_classes[call_callee[lo:lo + CALLS_CHECKED]])
        state = call_state[lo:lo + CALLS_CHECKED][edge].astype(np.int64)
        states.append(state)
        columns.append(column)
        edges.append(edge + lo)
        owned.append(own[state, column] >= 0)
    if not states:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, np.zeros(0, dtype=bool)
    return np.concatenate(states), np.concatenate(columns), np.concatenate(edges), np.concatenate(owned)


def call_rows(own: np.ndarray, first_classes: np.ndarray, call_state: np.ndarray, call_callee: np.ndarray
              ) -> CallRows | None:
    """The rows of call edge e from `call_state[e]` on the classes its callee starts with (`first_classes`), or None
    where some edge clashes (L(1) condition 1): its state reads one of those classes itself (`own`) or by another
    call."""
    width = own.shape[1]
    dtype = np.int16 if len(call_state) < 2**15 else np.int32
    state, column, edge, owned = _call_pairs(own, first_classes, call_state, call_callee)
    if owned.any() or len(distinct_values(state * width + column)) < len(state):
        return None
    calling = distinct_values(np.asarray(call_state, dtype=np.int64))
    rows = np.full((len(calling), width), -1, dtype=dtype)
    if len(state):
        rows[np.searchsorted(calling, state), column] = edge
    return CallRows(calling, rows, len(own))


def first_call_clash(own: np.ndarray, first_classes: np.ndarray, call_state: np.ndarray, call_callee: np.ndarray
                     ) -> tuple[int, np.ndarray, np.ndarray] | None:
    """The first call edge (in edge order) that breaks L(1) condition 1, the classes it clashes on, and for each
    the earlier edge it clashes with (-1: the state reads the class itself; such clashes are named first), or None
    where no edge clashes.  All pairs at once, sorted by (state, class): a dense table filled edge by edge took
    1.5 s of CPU for o69209's refusal."""
    state, column, edge, owned = _call_pairs(own, first_classes, call_state, call_callee)
    check_deadline("the pushdown call clash")
    key = state * own.shape[1] + column
    order = np.argsort(key, kind="stable")
    key = key[order]
    repeated = np.flatnonzero(key[1:] == key[:-1]) + 1
    later, earlier = edge[order[repeated]], edge[order[repeated - 1]]
    clashing = np.concatenate([edge[owned], later])
    if not len(clashing):
        return None
    first = int(clashing.min())
    at_own = (edge == first) & owned
    if at_own.any():
        return first, column[at_own], np.full(int(at_own.sum()), -1, dtype=np.int64)
    at_call = later == first
    return first, column[order[repeated[at_call]]], earlier[at_call]


def classes_read_alike(own: np.ndarray, calls: CallRows, byte_class: np.ndarray
                       ) -> tuple[np.ndarray, CallRows, np.ndarray]:
    """A pushdown grammar's own moves (Q, C) and call rows over the coarsest byte classes every state reads alike
    by its moves and its calls, and each byte's class (256,): bytes of a class step every configuration alike.  Only
    the calling states' rows are compared (a state that calls nothing tells no bytes apart by its calls), both at one
    dtype wide enough for either."""
    dtype = np.result_type(own.dtype, calls.rows.dtype)
    both = np.concatenate([own.astype(dtype, copy=False), calls.rows.astype(dtype, copy=False)], axis=0)
    classes, merged = canonical_classes(both, byte_class)
    return classes[:len(own)], calls.with_rows(classes[len(own):]), merged
