"""Automaton tables as the kernels use them: `WalkTable` (one table prepared once for walks) and
`CombinedTable` (D.2: block i is automaton i with its states offset to global ids, so one kernel
launch serves rows under different constraints).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np

from stdsl.errors import StdslError
from stdsl.kernels.token_table import automaton_arrays, scaled_table, state_dtype


class CombinedTable:
    """Concatenated transition tables with global state ids; `offset(i)` is automaton i's state 0."""

    def __init__(
        self, transitions: np.ndarray, accepting: np.ndarray, offsets: np.ndarray
    ) -> None:
        self.transitions = transitions
        self.accepting = accepting
        self.offsets = offsets
        self._walk_table: Any = None

    @classmethod
    def from_automata(cls, automata: Sequence[Any]) -> CombinedTable:
        """Stack automata (objects with .transitions/.accepting, or (transitions, accepting) pairs)."""
        if not automata:
            raise StdslError("CombinedTable: no automata given")
        parts = [
            automaton_arrays(*a) if isinstance(a, tuple) else automaton_arrays(a)
            for a in automata
        ]
        sizes = np.asarray([t.shape[0] for t, _ in parts], dtype=np.int64)
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        total = int(offsets[-1])
        dtype = state_dtype(total)
        transitions = np.empty((total, 256), dtype=dtype)
        for (table, _), start in zip(parts, offsets[:-1].tolist()):
            block = table.astype(np.int64)
            transitions[start : start + table.shape[0]] = np.where(
                block < 0, -1, block + start
            )
        accepting = np.concatenate([acc for _, acc in parts])
        return cls(transitions, accepting, offsets)

    @property
    def num_states(self) -> int:
        """Total number of global states."""
        return int(self.transitions.shape[0])

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
        """Bytes of the combined table and accepting vector."""
        return self.transitions.nbytes + self.accepting.nbytes + self.offsets.nbytes


@dataclass
class WalkTable:
    """An automaton table (one or several automata with global ids) prepared once for walks."""

    transitions: np.ndarray
    accepting: np.ndarray
    scaled: np.ndarray = field(init=False, repr=False)
    _device: dict[str, mx.array] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.transitions, self.accepting = automaton_arrays(
            self.transitions, self.accepting
        )
        self.transitions = self.transitions.astype(
            state_dtype(self.num_states), copy=False
        )
        self.scaled = scaled_table(self.transitions)

    @property
    def num_states(self) -> int:
        """Number of (global) states."""
        return int(self.transitions.shape[0])

    @property
    def sink(self) -> int:
        """The scaled dead state: `num_states * 256`."""
        return self.num_states * 256

    def device(self, name: str) -> mx.array:
        """MLX copy of `table` (flat, -1 dead) or `accepting`, made once."""
        if name not in self._device:
            source = {
                "table": self.transitions.reshape(-1),
                "accepting": self.accepting,
            }[name]
            self._device[name] = mx.array(source)
        return self._device[name]

    @staticmethod
    def of(table: Any) -> WalkTable:
        """The WalkTable of an automaton, CombinedTable or (transitions, accepting)-bearing object, cached on it."""
        if isinstance(table, WalkTable):
            return table
        cached = getattr(table, "_walk_table", None)
        if isinstance(cached, WalkTable):
            return cached
        if isinstance(table, np.ndarray):
            return WalkTable(table, np.zeros(table.shape[0], dtype=bool))
        prepared = WalkTable(table.transitions, table.accepting)
        try:
            table._walk_table = prepared
        except (AttributeError, TypeError):
            pass
        return prepared
