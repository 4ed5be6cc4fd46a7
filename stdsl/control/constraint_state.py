"""A row's constraint state: the configuration its controller moved it to, plus the log of what it emitted.

Every decision (masks, the canonical split, forced spans, the budget) is the controller's
(`stdsl.control.controller`), a pure function of the frozen configuration; a row state keeps the
configuration it samples at and the output so far (tokens, bytes, forced count), which the engine
and certified drafts read. Also the tables every row of an automaton shares (rows on demand, the
planner, the budget table) and the vocabulary of a runtime tokenizer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from stdsl.control.controller import ROW_MASKS, Controller, Move, TokenRows
from stdsl.control.reasoning_budget import ReasoningPolicy
from stdsl.control.split.planner import BoundaryCover, ForcedPlanner, Plan, PreTokenizingTokenizer, Window
from stdsl.control.tables import Tables
from stdsl.errors import GenerationError
from stdsl.kernels.vocabulary import Vocabulary


class ConstraintState:
    """One output under one constraint: its controller, the configuration it samples at, and the log of what it
    emitted (tokens, their bytes, how many were forced).

    `max_tokens=None` decodes without a budget. `start()` must be called first: it returns the
    forced prefix φ(c0) (fed with the prompt) and raises BudgetError when nothing valid fits;
    with a budget, `least_output_tokens` is then need(c1) counted from the start. Every decision is the
    controller's (`stdsl.control.controller`); a row policy (a reasoning model's thinking budget) narrows
    its masks here.
    """

    reasoning: ReasoningPolicy | None = None
    """The thinking block of a reasoning model's output, and its budget (None: the output has no block)."""

    def __init__(
        self,
        machine: Any,
        tokenizer: PreTokenizingTokenizer,
        vocab: Vocabulary,
        *,
        max_tokens: int | None = None,
        healing: bool = True,
        budget: Any = None,
        masks: str | None = None,
    ) -> None:
        self._begin(Tables.of(machine, vocab).controller(tokenizer, max_tokens=max_tokens, healing=healing,
                                                         budget=budget, pushdown_masks=masks))

    def _begin(self, controller: Controller) -> None:
        """Start the log empty before `start`, at the controller's initial configuration."""
        self.controller = controller
        self.fresh = len(controller.rows) == 0
        """Whether its automaton's rows were all still to compute when this state was made (a new grammar)."""
        self.configuration = controller.initial()
        self.committed = bytearray()
        self.tokens: list[int] = []
        self.forced_count = 0
        self.started = False

    # ------------------------------------------------------------------ the controller's parts

    @property
    def automaton(self) -> Any:
        return self.controller.machine

    @property
    def vocab(self) -> Vocabulary:
        return self.controller.vocab

    @property
    def planner(self) -> ForcedPlanner:
        return self.controller.planner

    @property
    def rows(self) -> TokenRows:
        return self.controller.rows

    @property
    def max_tokens(self) -> int | None:
        return self.controller.max_tokens

    @property
    def budget(self) -> Any:
        """The budget's cost table (None without a budget); setting it before `start` swaps the table."""
        return self.controller.budget

    @budget.setter
    def budget(self, table: Any) -> None:
        twin = self.controller.with_masks(ROW_MASKS)
        twin.budget = table
        self.controller = twin

    # ------------------------------------------------------------------ the configuration, by field

    @property
    def state(self) -> int:
        return self.configuration.state

    @state.setter
    def state(self, value: int) -> None:
        self.configuration = replace(self.configuration, state=value)

    @property
    def pending(self) -> bytes:
        return self.configuration.pending

    @property
    def window(self) -> Window:
        return self.configuration.window

    @property
    def cover(self) -> BoundaryCover | None:
        return self.configuration.cover

    @property
    def remaining(self) -> int | None:
        return self.configuration.remaining

    @remaining.setter
    def remaining(self, value: int | None) -> None:
        self.configuration = replace(self.configuration, remaining=value)

    @property
    def finished(self) -> bool:
        return self.configuration.finished

    @finished.setter
    def finished(self, value: bool) -> None:
        self.configuration = replace(self.configuration, finished=value)

    @property
    def budget_shaped(self) -> bool:
        """Whether the token budget changed this output (`Configuration.budget_shaped`)."""
        return self.configuration.budget_shaped

    # ------------------------------------------------------------------ queries

    @property
    def accepting(self) -> bool:
        """Whether the output so far is in the language."""
        return self.controller.accepting(self.configuration)

    @property
    def decided(self) -> bytes:
        """All output bytes decided so far: fed tokens plus held-back forced bytes."""
        return bytes(self.committed) + self.pending

    def mask(self) -> np.ndarray:
        """Admissible tokens at the current sampling configuration (bool (V,), a fresh array; eos included iff
        accepting), narrowed by the row's reasoning policy if it has one."""
        if self.finished:
            raise GenerationError("the output is finished; no further token is admissible")
        allowed, shaped = self.controller.shaped_mask(self.configuration)
        if shaped and not self.budget_shaped:
            self.configuration = replace(self.configuration, budget_shaped=True)
        allowed = allowed.copy()
        if self.reasoning is not None:
            allowed = self.reasoning.restrict(self, allowed)
        return allowed

    def least_tokens(self, plan: Plan) -> int:
        """Tokens the output needs at least if `plan` is taken now: its own plus need(next state)."""
        return self.controller.least_tokens(plan)

    @property
    def least_output_tokens(self) -> int | None:
        """need(c1) counted from the start: the fewest tokens of a valid output (None before a budgeted start)."""
        if not self.started or self.max_tokens is None:
            return None
        return self.controller.least_output_tokens()

    # ------------------------------------------------------------------ moves

    def start(self) -> list[int]:
        """Plan the forced prefix φ(c0) and return its tokens; BudgetError if no valid output fits."""
        if self.started:
            raise GenerationError("start() was already called for this output")
        self.started = True
        move = self.controller.start(singletons=self.reasoning is None)
        return self._record(move) + self._narrowed_singletons()

    def advance(self, token: int) -> list[int]:
        """Take the sampled `token`; return the tokens to feed in one pass (empty after eos)."""
        if not self.started:
            raise GenerationError("call start() before advance()")
        if self.finished:
            raise GenerationError("the output is finished; no further token can be taken")
        move = self.controller.advance(self.configuration, token, singletons=self.reasoning is None)
        return self._record(move) + self._narrowed_singletons()

    def place(self, move: Move) -> list[int]:
        """Start the log over with a move from elsewhere (`Controller.start_at`: a draft placed at a block's entry);
        the move's tokens, all forced."""
        self.committed, self.tokens, self.forced_count, self.started = bytearray(), [], 0, True
        return self._record(move)

    def _record(self, move: Move, forced: bool = False) -> list[int]:
        """Log a move's tokens and take its configuration (`forced`: its first token was decided, not sampled)."""
        feed = list(move.feed)
        self.tokens.extend(feed)
        self.committed += self.planner.spell(feed)
        self.forced_count += move.forced + (1 if forced and feed else 0)
        self.configuration = move.configuration
        return feed

    def _narrowed_singletons(self) -> list[int]:
        """Under a reasoning policy, take every next token its narrowed mask leaves no choice about (the controller
        takes its own singletons for every other row), so they ride in the same pass as what came before."""
        tokens: list[int] = []
        while self.reasoning is not None and not self.finished:
            allowed = np.flatnonzero(self.mask())
            if len(allowed) != 1:
                break
            token = int(allowed[0])
            if self.vocab.eos[token]:
                self.finished = True
                break
            tokens += self._record(self.controller.advance(self.configuration, token, singletons=False), forced=True)
        return tokens
