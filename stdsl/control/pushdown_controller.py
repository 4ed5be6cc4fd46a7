"""The controller of a recursive constraint: `Controller` over a pushdown machine's configuration ids.

Configuration ids of the `PushdownMachine` are its states (it implements `compiler.byte_machine.ByteMachine`),
so the forced planner (canonical split, forced spans across calls and returns), the boundary cover and the
decode loop read it unchanged; rows are composed from symbolic rows walked once per state and top of stack
(Theorem 22; shared by every request on the machine, eos and acceptance read from the concrete stack), and
the budget rule is Theorem 21's, exact on configurations (`pushdown_budget`): a token is admitted only if
1 + |φ(c')| + need(end(c')) ≤ tokens left.  The live mask comes from the host rows, or from live masks the
runtime hands over (`with_device_masks`: the device state vector, which only the runtime picks and builds, on its
runner thread), so nothing here runs or imports MLX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.control.budget.pushdown_budget import PushdownBudget
from stdsl.control.controller import ROW_MASKS, Configuration, Controller, Move, Narrowing
from stdsl.control.split.planner import ForcedPlanner, Plan
from stdsl.errors import BudgetError, GenerationError
from stdsl.kernels.pushdown.rows import PushdownRows
from stdsl.kernels.vocabulary import Vocabulary


class LiveMasks(Protocol):
    """Live masks of a machine's configurations from elsewhere than the host rows (the runtime's device masks)."""

    def mask(self, config: int) -> np.ndarray:
        """Admissible tokens at `config` (a fresh bool (V,)): live runs within the stack cap, eos iff it accepts."""
        ...


class PushdownController(Controller):
    """The controller over a pushdown machine's configurations (see the module docstring).

    A configuration whose mask admits nothing (e.g. the nesting cap leaves no way on) raises GenerationError
    instead of letting an invalid output through; `device_masks` (None: host rows) gives the live masks.
    """

    host_masks_only = True

    def __init__(self, machine: PushdownMachine, vocab: Vocabulary, planner: ForcedPlanner, rows: PushdownRows, *,
                 max_tokens: int | None, budget: PushdownBudget | None, device_masks: LiveMasks | None = None,
                 masks: int = ROW_MASKS) -> None:
        super().__init__(machine, vocab, planner, rows, max_tokens=max_tokens, budget=budget, masks=masks)
        self.pushdown_machine = machine
        self.pushdown_rows = rows
        self.device_masks = device_masks

    def with_device_masks(self, device_masks: LiveMasks) -> PushdownController:
        """This controller taking its live masks from `device_masks` (equal to the host rows' on every
        configuration), with a memo of its own."""
        twin = self.with_masks(self._keep)
        twin.device_masks = device_masks
        return twin

    def with_live_masks(self, masks_of: Callable[[PushdownRows], LiveMasks | None]) -> Controller:
        """This controller on `masks_of(rows)` (the runtime's device masks) unless it has live masks already or
        `masks_of` gives None (a stack cap past the device vector's slots)."""
        if self.device_masks is not None:
            return self
        masks = masks_of(self.pushdown_rows)
        return self if masks is None else self.with_device_masks(masks)

    @property
    def pushdown_budget(self) -> PushdownBudget | None:
        """The exact budget (None without a token budget), as its own type: its bounds are read here."""
        budget = self.budget
        return budget if isinstance(budget, PushdownBudget) else None

    def depth(self, state: int) -> int:
        """Stack depth of a configuration."""
        return self.pushdown_machine.depth(state)

    def stuck(self, state: int) -> GenerationError:
        """The error of a configuration from which no valid output can be completed."""
        return GenerationError(
            f"no admissible token at nesting depth {self.depth(state)} (cap {self.pushdown_machine.max_depth}); "
            "the output cannot be completed within the stack cap and budget")

    def start(self, narrow: Narrowing | None = None) -> Move:
        """As `Controller.start`; where a search gave up for the byte bound, the BudgetError says so."""
        try:
            return super().start(narrow)
        except BudgetError as error:
            budget = self.pushdown_budget
            if budget is None or budget.exact:
                raise
            raise BudgetError(f"{error} (an upper bound: the exact search gave up on this grammar, and Proposition 2 "
                              "counts the shortest completion in bytes, which bound its tokens)") from None

    def _compute_mask(self, at: Configuration) -> tuple[np.ndarray, bool, bool]:
        found = super()._compute_mask(at)
        if not found[0].any():
            raise self.stuck(at.state)
        return found

    def _live_mask(self, state: int) -> np.ndarray:
        """The live mask at a configuration, from the device vector or the host rows."""
        if self.device_masks is not None:
            return self.device_masks.mask(state)
        return super()._live_mask(state)

    def _rows_give_live_masks(self) -> bool:
        """Not under device masks (a host row's packed words would compose the row they spare)."""
        return self.device_masks is None

    def _budget_mask(self, state: int, remaining: int) -> np.ndarray | None:
        """The exact budget's mask, on the host; under device masks, None without composing a host row where every
        successor's byte bound fits (as `PushdownBudget.admits` answers there)."""
        budget = self.pushdown_budget
        if self.device_masks is not None and budget is not None:
            largest = budget.largest_bound(state)
            if largest is not None and largest <= remaining:
                return None
        return super()._budget_mask(state, remaining)

    def _take(self, at: Configuration, plan: Plan) -> Configuration:
        """The configuration a plan reaches; a plan that ends at a dead end outside acceptance raises."""
        reached = super()._take(at, plan)
        if plan.finished and not self.accepting(reached):
            raise self.stuck(reached.state)
        return reached
