"""A row's constraint state: its controller and the frozen log of what it emitted (`log.Log`).

Every decision (masks, the canonical split, forced spans, the budget, the finish reason) is the controller's
(`stdsl.control.controller`), a pure function of the frozen configuration; a row state holds the controller
and the log (the configuration it samples at, tokens, bytes, forced count), which each move replaces; the
engine and certified drafts read them. A reasoning model's thinking budget narrows the masks as a callback
of the controller's singleton loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from stdsl.control.controller import ROW_MASKS, Configuration, Controller, Move, Narrowing, TokenRows, write_words
from stdsl.control.log import Log
from stdsl.control.reasoning_budget import ReasoningPolicy
from stdsl.control.special_vocabulary import vocabulary_for
from stdsl.control.split.planner import BoundaryCover, ForcedPlanner, Plan, PreTokenizingTokenizer, Window
from stdsl.control.tables import Tables
from stdsl.errors import GenerationError
from stdsl.kernels.token_mask import pack_words
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
    ) -> None:
        self._begin(Tables.of(machine, vocab).controller(tokenizer, max_tokens=max_tokens, healing=healing,
                                                         budget=budget))

    @classmethod
    def of(cls, compiled: Any, tokenizer: PreTokenizingTokenizer, *, max_tokens: int | None,
           healing: bool = True) -> ConstraintState:
        """A fresh (not started) row state of a compiled constraint for a runtime tokenizer, over the vocabulary it
        needs (the shared one, or the variant spelling its special tokens); StdslError naming anything else."""
        return cls(compiled, tokenizer, vocabulary_for(tokenizer, compiled), max_tokens=max_tokens, healing=healing)

    def _begin(self, controller: Controller) -> None:
        """Start the log empty before `start`, at the controller's initial configuration."""
        self.controller = controller
        self.fresh = len(controller.rows) == 0
        """Whether its automaton's rows were all still to compute when this state was made (a new grammar)."""
        self.log = Log(controller.initial())
        """What the output emitted (a frozen `Log`: each move replaces it, so a fork keeps the one it copied)."""
        self.started = False

    # ------------------------------------------------------------------ the log

    @property
    def configuration(self) -> Configuration:
        """The configuration the row samples at."""
        return self.log.configuration

    @configuration.setter
    def configuration(self, value: Configuration) -> None:
        self.log = replace(self.log, configuration=value)

    @property
    def tokens(self) -> list[int]:
        """The tokens fed so far (a copy)."""
        return list(self.log.tokens)

    @property
    def committed(self) -> bytes:
        """The bytes the fed tokens spell."""
        return self.log.data

    @property
    def forced_count(self) -> int:
        """How many of the fed tokens were forced."""
        return self.log.forced

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
        return self.log.decided

    def mask(self) -> np.ndarray:
        """Admissible tokens at the current sampling configuration (bool (V,), a fresh array; eos included iff
        accepting), narrowed by the row's reasoning policy if it has one."""
        allowed = self._sampling_mask().copy()
        if self.reasoning is not None:
            allowed = self.reasoning.restrict(self.log, allowed, self.planner.spellings)
        return allowed

    def fill(self, out: np.ndarray) -> None:
        """Write `mask()` into `out`, one int32 bitmask row (token t at bit t % 32 of word t // 32, later words
        cleared): the controller's packed words, kept per configuration, unless a reasoning policy narrows them."""
        if self.reasoning is not None:
            write_words(pack_words(self.mask()), out)
            return
        if self.finished:
            raise GenerationError("the output is finished; no further token is admissible")
        self.controller.fill([self.configuration], out[None])

    def _sampling_mask(self) -> np.ndarray:
        """The controller's mask at the sampling configuration (read-only)."""
        if self.finished:
            raise GenerationError("the output is finished; no further token is admissible")
        allowed: np.ndarray = self.controller.mask(self.configuration)
        return allowed

    def _narrowing(self) -> Narrowing | None:
        """The row policy's narrowing of the masks the controller's singleton loop asks, from this log on."""
        policy, log, spellings = self.reasoning, self.log, self.planner.spellings
        if policy is None:
            return None
        return lambda move, allowed: policy.restrict(log.apply(move), allowed, spellings)

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
        return self._record(self.controller.start(self._narrowing()))

    def advance(self, token: int) -> list[int]:
        """Take the sampled `token`; return the tokens to feed in one pass (empty after eos)."""
        if not self.started:
            raise GenerationError("call start() before advance()")
        if self.finished:
            raise GenerationError("the output is finished; no further token can be taken")
        return self._record(self.controller.advance(self.configuration, token, self._narrowing()))

    def place(self, move: Move) -> list[int]:
        """Start the log over with a move from elsewhere (`Controller.start_at`: a draft placed at a block's entry);
        the move's tokens, all forced."""
        self.log, self.started = Log(self.controller.initial(), sampled=self.log.sampled), True
        return self._record(move)

    def _record(self, move: Move) -> list[int]:
        """Apply a move to the log; its tokens to feed."""
        self.log = self.log.apply(move)
        return list(move.feed)
