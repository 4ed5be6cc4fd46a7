"""The controller of a recursive constraint: `Controller` over pushdown configurations, and its row state.

Configuration ids of the `PushdownMachine` stand in for automaton states, so the forced planner
(canonical split, forced spans across calls and returns), the boundary cover and the decode loop
are reused unchanged; rows are composed from symbolic rows walked once per state and top of stack
(Theorem 22; shared by every request on the machine, eos and acceptance read from the concrete
stack), and the budget rule is Theorem 21's, exact on configurations (`pushdown_budget`): a token is
admitted only if 1 + |φ(c')| + need(end(c')) ≤ tokens left.  The live mask comes from the host rows, or from
live masks the runtime hands over (`with_device_masks`: the device state vector, which only the runtime picks and
builds, on its runner thread), so nothing here runs or imports MLX.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from stdsl.caches import CacheKind
from stdsl.compiler.pushdown.grammar import PushdownGrammar
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.control.budget.pushdown_budget import PushdownBudget, PushdownNeed
from stdsl.control.constraint_state import ConstraintState
from stdsl.control.controller import ROW_MASKS, Configuration, Controller, Move
from stdsl.control.split.planner import ForcedPlanner, Plan, PreTokenizingTokenizer
from stdsl.errors import BudgetError, GenerationError
from stdsl.kernels.pushdown_context_rows import DEFAULT_MAX_BYTES
from stdsl.kernels.pushdown_rows import PushdownRows
from stdsl.kernels.vocabulary import Vocabulary


class LiveMasks(Protocol):
    """Live masks of a machine's configurations from elsewhere than the host rows (the runtime's device masks)."""

    def mask(self, config: int) -> np.ndarray:
        """Admissible tokens at `config` (a fresh bool (V,)): live runs within the stack cap, eos iff it accepts."""
        ...


class _NoAutomaton:
    """Stands in for a DFA while `ForcedPlanner.__init__` runs; the planner is then pointed at the machine."""

    transitions = np.full((1, 256), -1, dtype=np.int32)


class PushdownPlanner(ForcedPlanner):
    """The forced planner of Theorem 20 reading a pushdown machine: states are configuration ids.

    `transitions` and `live_count` are the machine's per-configuration views, indexed like the DFA's arrays.
    """

    def __init__(self, machine: PushdownMachine, tokenizer: PreTokenizingTokenizer,
                 token_bytes: Any, healing: bool = True) -> None:
        super().__init__(_NoAutomaton(), tokenizer, token_bytes, healing)
        self.automaton = machine
        self.transitions = machine.transitions  # type: ignore[assignment]
        self.live_count = machine.live_count  # type: ignore[assignment]


class PushdownTables:
    """Per (grammar, vocabulary) state shared by every request: the machine, rows and planners (host only).

    The symbolic rows behind `rows` are bounded by `max_row_bytes`.
    """

    def __init__(self, machine: PushdownMachine, vocab: Vocabulary, max_row_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.machine = machine
        self.vocab = vocab
        self.rows = PushdownRows(machine, vocab, max_bytes=max_row_bytes)

    def planner(self, tokenizer: PreTokenizingTokenizer, healing: bool) -> PushdownPlanner:
        """The forced planner for a tokenizer, built once (a `stdsl.caches` entry that goes with these tables)."""
        return _PLANNERS.get((self, tokenizer),
                             lambda: PushdownPlanner(self.machine, tokenizer, self.vocab.token_bytes, healing),
                             (healing,))

    def budget(self, planner: PushdownPlanner) -> PushdownBudget:
        """The exact budget under a planner's table policy (need is memoized across requests), built once (a
        `stdsl.caches` entry that goes with these tables and the planner)."""
        return _BUDGETS.get((self, planner), lambda: PushdownBudget(
            PushdownNeed(self.machine, self.rows.symbolic, planner, self.vocab)))

    @property
    def nbytes(self) -> int:
        """Bytes of the rows (concrete, symbolic, masks)."""
        return self.rows.nbytes


_PLANNERS: CacheKind[PushdownPlanner] = CacheKind("pushdown planners")
_BUDGETS: CacheKind[PushdownBudget] = CacheKind("pushdown budgets")
_TABLES: CacheKind[PushdownTables] = CacheKind("pushdown tables")


def pushdown_tables(machine: PushdownMachine, vocab: Vocabulary) -> PushdownTables:
    """The shared tables of a machine under a vocabulary (a `stdsl.caches` entry: least recently used go first
    past the registry's byte budget)."""
    return _TABLES.get((machine, vocab), lambda: PushdownTables(machine, vocab))


def machine_of(constraint: Any) -> PushdownMachine | None:
    """The pushdown machine of a constraint (a PushdownConstraint, grammar or machine), or None for a DFA one."""
    if isinstance(constraint, PushdownMachine):
        return constraint
    if isinstance(constraint, PushdownGrammar):
        return PushdownMachine(constraint)
    machine = getattr(constraint, "machine", None)
    return machine if isinstance(machine, PushdownMachine) else None


class PushdownController(Controller):
    """The controller over a pushdown machine's configurations (see the module docstring).

    A configuration whose mask admits nothing (e.g. the nesting cap leaves no way on) raises GenerationError
    instead of letting an invalid output through; `device_masks` (None: host rows) gives the live masks.
    """

    device_masks: LiveMasks | None

    pushdown = True

    def __init__(self, machine: PushdownMachine, vocab: Vocabulary, planner: PushdownPlanner, rows: PushdownRows, *,
                 max_tokens: int | None, budget: PushdownBudget | None, device_masks: LiveMasks | None = None,
                 masks: int = ROW_MASKS) -> None:
        super().__init__(machine, vocab, planner, rows, max_tokens=max_tokens, budget=budget,  # type: ignore[arg-type]
                         masks=masks)
        self.start_state = machine.start
        self.device_masks = device_masks

    def with_device_masks(self, device_masks: LiveMasks) -> PushdownController:
        """This controller taking its live masks from `device_masks` (equal to the host rows' on every
        configuration), with a memo of its own."""
        twin = self.with_masks(self._keep)
        assert isinstance(twin, PushdownController)
        twin.device_masks = device_masks
        return twin

    def depth(self, state: int) -> int:
        """Stack depth of a configuration."""
        return int(self.automaton.depth(state))

    def stuck(self, state: int) -> GenerationError:
        """The error of a configuration from which no valid output can be completed."""
        return GenerationError(
            f"no admissible token at nesting depth {self.depth(state)} (cap {self.automaton.max_depth}); "
            "the output cannot be completed within the stack cap and budget")

    def start(self, singletons: bool = True) -> Move:
        """As `Controller.start`; where a search gave up for the byte bound, the BudgetError says so."""
        try:
            return super().start(singletons)
        except BudgetError as error:
            budget = self.budget
            if budget is None or budget.exact:  # type: ignore[attr-defined]
                raise
            raise BudgetError(f"{error} (an upper bound: the exact search gave up on this grammar, and Proposition 2 "
                              "counts the shortest completion in bytes, which bound its tokens)") from None

    def _compute_mask(self, at: Configuration) -> tuple[np.ndarray, bool]:
        allowed, shaped = super()._compute_mask(at)
        if not allowed.any():
            raise self.stuck(at.state)
        return allowed, shaped

    def _live_mask(self, state: int) -> np.ndarray:
        """The live mask at a configuration, from the device vector or the host rows."""
        if self.device_masks is not None:
            return self.device_masks.mask(state)
        return super()._live_mask(state)

    def _budget_mask(self, state: int, remaining: int) -> np.ndarray | None:
        """The exact budget's mask, on the host; under device masks, None without composing a host row where every
        successor's byte bound fits (as `PushdownBudget.admits` answers there)."""
        if self.device_masks is not None:
            budget: PushdownBudget = self.budget  # type: ignore[assignment]
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


class PushdownState(ConstraintState):
    """One output under a recursive constraint: a `ConstraintState` moved by a `PushdownController`.

    Its live masks come from the host rows until the runtime hands its controller device masks
    (`PushdownController.with_device_masks`); `device_masks` says which.
    """

    def __init__(self, machine: PushdownMachine, tokenizer: PreTokenizingTokenizer, vocab: Vocabulary, *,
                 max_tokens: int | None = None, healing: bool = True) -> None:
        tables = pushdown_tables(machine, vocab)
        planner = tables.planner(tokenizer, healing)
        self._begin(PushdownController(
            machine, vocab, planner, tables.rows, max_tokens=max_tokens,
            budget=tables.budget(planner) if max_tokens is not None else None))

    @property
    def device_masks(self) -> LiveMasks | None:
        """Where the live masks come from (None: the host rows)."""
        return self.controller.device_masks  # type: ignore[attr-defined, no-any-return]

    @property
    def depth(self) -> int:
        """Stack depth of the current sampling configuration."""
        return self.controller.depth(self.state)  # type: ignore[attr-defined, no-any-return]
