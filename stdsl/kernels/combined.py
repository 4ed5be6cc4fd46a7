"""Automaton tables as the kernels use them: `WalkTable` (one table prepared once for walks) and
`CombinedTable` (D.2: block i is automaton i with its states offset to global ids, so one kernel
launch serves rows under different constraints).  Both hold the class form: a byte→class map and
states × classes; a stack of automata takes as classes the distinct tuples of their classes.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from stdsl.compiler.automata.automaton import Automaton, ByteClassTable
from stdsl.errors import StdslError
from stdsl.kernels.token_table import ScaledTable, class_arrays, scaled_split_rows, state_dtype


def stacked_classes(
    parts: Sequence[tuple[np.ndarray, np.ndarray]], offsets: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """One class table for automata stacked with global ids: (class_transitions, byte_class).

    `parts` are (class table, byte_class) per automaton; the stacked classes are the distinct
    tuples (class_1[b], ..., class_n[b]) over the 256 bytes.
    """
    keys = np.stack([np.asarray(byte_class, dtype=np.int64) for _, byte_class in parts], axis=1)
    tuples, byte_class = np.unique(keys, axis=0, return_inverse=True)
    total = sum(int(table.shape[0]) for table, _ in parts)
    out = np.empty((total, tuples.shape[0]), dtype=state_dtype(total))
    for i, ((table, _), start) in enumerate(zip(parts, offsets)):
        block = table[:, tuples[:, i]].astype(np.int64)
        out[start : start + table.shape[0]] = np.where(block < 0, -1, block + start)
    return out, np.asarray(byte_class).reshape(-1).astype(np.uint8)


class CombinedTable:
    """Concatenated class tables with global state ids; `offset(i)` is automaton i's state 0."""

    def __init__(
        self, class_transitions: np.ndarray, byte_class: np.ndarray, accepting: np.ndarray, offsets: np.ndarray
    ) -> None:
        self.class_transitions = class_transitions
        self.byte_class = byte_class
        self.accepting = accepting
        self.offsets = offsets

    @classmethod
    def from_automata(cls, automata: Sequence[Any]) -> CombinedTable:
        """Stack automata: objects with the class form or .transitions/.accepting, or (transitions, accepting) pairs."""
        if not automata:
            raise StdslError("CombinedTable: no automata given")
        parts = [class_arrays(*a) if isinstance(a, tuple) else class_arrays(a) for a in automata]
        sizes = np.asarray([t.shape[0] for t, _, _ in parts], dtype=np.int64)
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        table, byte_class = stacked_classes([(t, b) for t, b, _ in parts], offsets[:-1].tolist())
        accepting = np.concatenate([acc for _, _, acc in parts])
        return cls(table, byte_class, accepting, offsets)

    @property
    def num_states(self) -> int:
        """Total number of global states."""
        return int(self.class_transitions.shape[0])

    @property
    def num_automata(self) -> int:
        """Number of stacked automata."""
        return int(self.offsets.shape[0] - 1)

    def offset(self, i: int) -> int:
        """Global id of automaton i's start state (its local state s is global offset(i) + s)."""
        if not 0 <= i < self.num_automata:
            raise StdslError(
                f"CombinedTable: automaton index {i} outside 0..{self.num_automata - 1}"
            )
        return int(self.offsets[i])

    def block_of(self, global_state: int) -> tuple[int, int]:
        """(automaton index, local state) of a global state id."""
        if not 0 <= global_state < self.num_states:
            raise StdslError(
                f"CombinedTable: state {global_state} outside 0..{self.num_states - 1}"
            )
        i = int(np.searchsorted(self.offsets, global_state, side="right")) - 1
        return i, global_state - int(self.offsets[i])

    @property
    def nbytes(self) -> int:
        """Bytes of the combined class table, byte map, accepting vector and offsets."""
        return int(self.class_transitions.nbytes + self.byte_class.nbytes + self.accepting.nbytes + self.offsets.nbytes)


class WalkTable(ByteClassTable):
    """An automaton table (one or several automata with global ids) in class form, prepared once for walks.

    It keeps only the scaled table the walks step through (`scaled`), the byte→class map and the
    accepting mask; `class_transitions` is read back from the scaled table when a device copy or an
    oracle asks for it.  `WalkTable(transitions, accepting)` takes a (Q, 256) table and finds its
    classes; `WalkTable.of(x)` reads an automaton's class form and keeps the result in a cache keyed by x.
    """

    def __init__(self, transitions: np.ndarray, accepting: np.ndarray) -> None:
        classes, byte_class, accept = class_arrays(transitions, accepting)
        self._prepare(classes, byte_class, accept)

    def _prepare(self, classes: np.ndarray, byte_class: np.ndarray, accepting: np.ndarray) -> None:
        self._keep(ScaledTable.of(classes, byte_class), byte_class, accepting)

    def _keep(self, scaled: ScaledTable, byte_class: np.ndarray, accepting: np.ndarray) -> None:
        self._num_states = int(accepting.shape[0])
        self.state_dtype: np.dtype = state_dtype(self._num_states)
        self.byte_class: np.ndarray = byte_class
        self.accepting: np.ndarray = accepting
        self.scaled = scaled

    @classmethod
    def from_classes(cls, class_transitions: np.ndarray, byte_class: np.ndarray, accepting: np.ndarray) -> WalkTable:
        """A walk table from the class form directly (no 256-column table is made)."""
        table = cls.__new__(cls)
        table._prepare(np.asarray(class_transitions), np.asarray(byte_class), np.asarray(accepting, dtype=bool))
        return table

    @classmethod
    def from_split_rows(cls, automaton: Automaton) -> WalkTable:
        """A walk table from an `Automaton`'s split rows (`scaled_split_rows`): no dense class table is made, and the
        cost is the states and the branching rows rather than passes over states × classes."""
        table = cls.__new__(cls)
        scaled = scaled_split_rows(automaton.sole_class, automaton.sole_target, automaton.branch_rows,
                                   automaton.num_classes)
        byte_class = np.asarray(automaton.byte_class)
        table._keep(ScaledTable.of_flat(scaled, byte_class, automaton.num_classes), byte_class,
                    np.asarray(automaton.accepting, dtype=bool))
        return table

    @property
    def num_states(self) -> int:
        """Number of states (global ids for stacked automata)."""
        return self._num_states

    @property
    def num_classes(self) -> int:
        """Number of byte classes (the scaled table's stride)."""
        return self.scaled.stride

    @property
    def class_transitions(self) -> np.ndarray:
        """The dense (num_states, num_classes) table, read back from the scaled one afresh on each call."""
        body = self.scaled.flat[: self.scaled.sink].reshape(self._num_states, self.scaled.stride)
        return self.scaled.states_of(body).astype(self.state_dtype)

    def live_byte_count(self, state: int) -> int:
        """Number of bytes with a live transition from `state`."""
        row = self.scaled.flat[state * self.scaled.stride + self.scaled.byte_class]
        return int(np.count_nonzero(row != self.scaled.sink))

    @property
    def sink(self) -> int:
        """The scaled dead state."""
        return self.scaled.sink

    @staticmethod
    def of(table: Any) -> WalkTable:
        """The WalkTable of an automaton, CombinedTable or (transitions, accepting)-bearing object, cached by it.

        The cache is keyed weakly by the object, which is never written to.
        """
        if isinstance(table, WalkTable):
            return table
        if isinstance(table, np.ndarray):
            return WalkTable(table, np.zeros(table.shape[0], dtype=bool))
        try:
            cached = _WALK_TABLES.get(table)
        except TypeError:
            cached = None
        if cached is not None:
            return cached
        if isinstance(table, Automaton):
            prepared = WalkTable.from_split_rows(table)
        else:
            classes, byte_class, accepting = class_arrays(table)
            prepared = WalkTable.from_classes(classes, byte_class, accepting)
        try:
            _WALK_TABLES[table] = prepared
        except TypeError:
            pass
        return prepared


_WALK_TABLES: weakref.WeakKeyDictionary[Any, WalkTable] = weakref.WeakKeyDictionary()
