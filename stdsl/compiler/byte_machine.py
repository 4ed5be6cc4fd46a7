"""What every compiled constraint's machine shows the runtime: byte steps over integer states.

A DFA (`automata.automaton.Automaton`: its states) and a pushdown (`pushdown.machine.PushdownMachine`: its
interned configuration ids) both implement it, so the forced planner, the controller and the certified blocks
read either one directly; only `stdsl.control.tables.Tables.of` tells the two apart.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class ByteMachine(Protocol):
    """Byte steps from `start` over integer states (-1 dead), with the per-state tables the planner reads."""

    @property
    def start(self) -> int:
        """The state every output starts in."""
        ...

    @property
    def accepting(self) -> Any:
        """Indexed by state: whether an output may end there."""
        ...

    @property
    def live_count(self) -> Any:
        """Indexed by state: how many bytes have a live step."""
        ...

    def byte_row(self, state: int) -> np.ndarray:
        """The next state on each of the 256 bytes (-1 dead)."""
        ...

    def next_state(self, state: int, byte: int) -> int:
        """The state after one byte (-1 dead)."""
        ...

    def live_bytes(self, state: int) -> bytes:
        """The bytes with a live step, in increasing order."""
        ...

    def step(self, state: int, data: bytes) -> int:
        """The state after `data` (-1 once dead)."""
        ...

    def forced_chain(self, state: int) -> bytes:
        """The bytes forced from `state` (one live byte, not accepting) up to a decision point."""
        ...

    def chain_end(self, state: int) -> int:
        """The state after `forced_chain(state)`."""
        ...

    def single_visit_cuts(self) -> list[int]:
        """States every accepted output passes through once, in the order it meets them (certified blocks)."""
        ...

    def shortest_completion(self, state: int) -> int:
        """Bytes of the shortest accepted completion from `state`."""
        ...
