"""An automaton's (states, 256) byte table as an `ir.Embedded` leaf holds it, expanded from its classes only when
its cells are read.

`build.embedded_leaf` makes a leaf of every large array item the schema compiler builds (`to_ir._compact`); the
compilers mostly ask such a leaf its shape, or find its automaton by the leaf, and never read its cells: expanding
`o9787`'s 40,313-state item to 256 columns up front wrote 41 MB (0.03 s) for nothing.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from stdsl.compiler.automata.automaton import Automaton


class TableOnRead:
    """`automaton.transitions`, expanded (once) on the first read of anything but its shape, its length or its
    bytes held; numpy reads it as that array (`np.asarray`), and every other public attribute is the array's."""

    __slots__ = ("shape", "_automaton", "_table")

    def __init__(self, automaton: Automaton) -> None:
        self.shape = (automaton.num_states, 256)
        self._automaton = copy.copy(automaton)
        """A copy sharing its arrays: the leaf (which the cache of leaves keeps per automaton) holds no reference
        to the automaton that keys it, which then dies as before."""
        self._table: np.ndarray | None = None

    def expanded(self) -> np.ndarray:
        """The (states, 256) table, read-only."""
        if self._table is None:
            table = self._automaton.transitions
            table.flags.writeable = False
            self._table = table
        return self._table

    @property
    def nbytes(self) -> int:
        """Bytes held: the automaton's class form, and the table once expanded."""
        return self._automaton.nbytes + (0 if self._table is None else int(self._table.nbytes))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        table = self.expanded()
        if dtype is not None and np.dtype(dtype) != table.dtype:
            return table.astype(dtype)
        return table.copy() if copy else table

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> Any:
        return self.expanded()[index]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)  # pickle and copy look up protocol names: this object's own, not the array's
        return getattr(self.expanded(), name)
