"""The per-request controller for a recursive constraint: `ConstraintState` over pushdown configurations.

Configuration ids of the `PushdownMachine` stand in for automaton states, so the forced planner
(canonical split, forced spans across calls and returns), the boundary cover and the decode loop
are reused unchanged; rows are composed from symbolic rows walked once per state and top of stack
(Theorem 22; shared by every request on the machine, eos and acceptance read from the concrete
stack), and the budget rule is the sound byte-level bound of Proposition 2: a token is admitted
only if 1 + need+(c') ≤ tokens left.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stdsl.compiler.pushdown.grammar import PushdownGrammar
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.errors import BudgetError, GenerationError
from stdsl.kernels.pushdown_context_rows import DEFAULT_MAX_BYTES
from stdsl.kernels.pushdown_rows import PushdownRows
from stdsl.kernels.vocabulary import Vocabulary
from stdsl.runtime.control.budget import UNREACHABLE, check_feasible
from stdsl.runtime.control.constraint_state import ConstraintState
from stdsl.runtime.control.identity_cache import IdentityCache
from stdsl.runtime.control.planner import ForcedPlanner, Plan, PreTokenizingTokenizer, Window


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


class _Need:
    """need+(c) by configuration id (what `ConstraintState.least_tokens` indexes)."""

    def __init__(self, machine: PushdownMachine) -> None:
        self.machine = machine

    def __getitem__(self, config: Any) -> int:
        return self.machine.need(int(config))


class PushdownBudget:
    """The budget mask of Proposition 2 on configurations: byte lengths bound token counts from above."""

    def __init__(self, machine: PushdownMachine) -> None:
        self.machine = machine
        self.need = _Need(machine)

    def need_at(self, config: int) -> int:
        """need+(config): the bytes of its shortest completion, which bound its tokens from above."""
        return self.machine.need(int(config))

    def cost(self, row: np.ndarray) -> np.ndarray:
        """1 + need+(c') per token (UNREACHABLE where the token is refused)."""
        return np.where(row >= 0, 1 + self.machine.needs(row.astype(np.int64)), UNREACHABLE)

    def admits(self, state: int, row: np.ndarray, remaining: int) -> np.ndarray | None:
        """Tokens after which the shortest completion still fits in `remaining` tokens (None: all do)."""
        cost = self.cost(row)
        within = cost <= remaining
        return None if within[row >= 0].all() else within


class PushdownTables:
    """Per (grammar, vocabulary) state shared by every request: the machine, rows and planners.

    The symbolic rows behind `rows` are bounded by `max_row_bytes`.
    """

    def __init__(self, machine: PushdownMachine, vocab: Vocabulary, max_row_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.machine = machine
        self.vocab = vocab
        self.rows = PushdownRows(machine, vocab, max_bytes=max_row_bytes)
        self.budget = PushdownBudget(machine)
        self._planners: IdentityCache[PushdownPlanner] = IdentityCache()

    def planner(self, tokenizer: PreTokenizingTokenizer, healing: bool) -> PushdownPlanner:
        """The forced planner for a tokenizer, built once."""
        return self._planners.get(
            (tokenizer,), lambda: PushdownPlanner(self.machine, tokenizer, self.vocab.token_bytes, healing), (healing,))


MAX_TABLES = 16
_TABLES: IdentityCache[PushdownTables] = IdentityCache(MAX_TABLES)


def pushdown_tables(machine: PushdownMachine, vocab: Vocabulary) -> PushdownTables:
    """The shared tables of a machine under a vocabulary (kept for the last few constraints used)."""
    return _TABLES.get((machine, vocab), lambda: PushdownTables(machine, vocab))


def machine_of(constraint: Any) -> PushdownMachine | None:
    """The pushdown machine of a constraint (a PushdownConstraint, grammar or machine), or None for a DFA one."""
    if isinstance(constraint, PushdownMachine):
        return constraint
    if isinstance(constraint, PushdownGrammar):
        return PushdownMachine(constraint)
    machine = getattr(constraint, "machine", None)
    return machine if isinstance(machine, PushdownMachine) else None


class PushdownState(ConstraintState):
    """One output under a recursive constraint; the same protocol as `ConstraintState` (start, mask, advance).

    A configuration whose mask admits nothing (e.g. the nesting cap leaves no way on) raises
    GenerationError instead of letting an invalid output through.
    """

    def __init__(self, machine: PushdownMachine, tokenizer: PreTokenizingTokenizer, vocab: Vocabulary, *,
                 max_tokens: int | None = None, healing: bool = True) -> None:
        tables = pushdown_tables(machine, vocab)
        self.automaton = machine
        self.vocab = vocab
        self.planner = tables.planner(tokenizer, healing)
        self.rows = tables.rows  # type: ignore[assignment]
        self.max_tokens = max_tokens
        self.budget = tables.budget if max_tokens is not None else None  # type: ignore[assignment]
        self.remaining = max_tokens
        self.state = machine.start
        self.pending = b""
        self.cover = None
        self.window = Window()
        self.committed = bytearray()
        self.tokens = []
        self.forced_count = 0
        self.finished = False
        self.started = False
        self._start_plans = None
        self._least_output_tokens = None

    @property
    def depth(self) -> int:
        """Stack depth of the current sampling configuration."""
        return self.automaton.depth(self.state)

    def _stuck(self) -> GenerationError:
        return GenerationError(
            f"no admissible token at nesting depth {self.depth} (cap {self.automaton.max_depth}); "
            "the output cannot be completed within the stack cap and budget")

    def start(self) -> list[int]:
        """As `ConstraintState.start`; the BudgetError says that the pushdown's least budget is a bound."""
        try:
            return super().start()
        except BudgetError:
            least = self.least_output_tokens
            if least is None or least >= UNREACHABLE:
                raise
            raise BudgetError(
                f"no valid output fits in max_tokens={self.max_tokens} under the pushdown budget rule: it admits a "
                f"first token from {least} tokens on. This is an upper bound on the shortest valid output, which may "
                "need fewer tokens (Proposition 2 counts the shortest completion in bytes; tokens may span several)"
            ) from None

    def least_tokens(self, plan: Plan) -> int:
        """Tokens that suffice after `plan` under the budget rule: its own plus need+ (bytes) of its configuration,
        or, when that does not fit, the least 1 + need+ over the tokens admissible there (the tightest one-step
        bound of Proposition 2: the budget mask there is not empty)."""
        loose = super().least_tokens(plan)
        if self.budget is None or self.remaining is None or loose <= self.remaining:
            return loose
        if not plan.pending and self.automaton.config_accepts(plan.state):
            return len(plan.tokens)
        cost = self.budget.cost(self.rows.next_states(plan.state))
        return min(loose, len(plan.tokens) + int(cost.min()))

    def _fits(self, plan: Plan) -> bool:
        """Whether `least_tokens(plan)` fits in the tokens left (it reads them, so it is counted now)."""
        assert self.remaining is not None
        return self.least_tokens(plan) <= self.remaining

    def _budgeted_start(self, plan: Plan) -> Plan:
        """As `ConstraintState._budgeted_start`, with the least output length counted now: the budget rule's
        tightening depends on the tokens left, which the forced prefix then spends."""
        assert self.remaining is not None
        fallback = self.planner.table_plan(self.window, 0, None)
        self._start_plans = (plan, fallback)
        least = self.least_output_tokens
        assert least is not None
        check_feasible(least, self.remaining)
        fits = self.least_tokens(plan) <= self.remaining
        self.budget_shaped = self.budget_shaped or not fits
        return plan if fits else fallback

    def mask(self) -> np.ndarray:
        """Admissible tokens; GenerationError when none is (never an invalid output)."""
        allowed = super().mask()
        if not allowed.any():
            raise self._stuck()
        return allowed

    def _take(self, plan: Plan, sampled: bool) -> list[int]:
        """Commit a plan; a plan that ends at a dead end outside acceptance raises GenerationError."""
        tokens = super()._take(plan, sampled)
        if plan.finished and not self.accepting:
            raise self._stuck()
        return tokens
