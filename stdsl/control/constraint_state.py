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

from stdsl.caches import CacheKind
from stdsl.control.budget.automaton_budget import MAX_QUESTION_ROWS, UNREACHABLE, BudgetTable
from stdsl.control.budget.need_graphs import chain_bound, forced_chains, row_successors
from stdsl.control.controller import ROW_MASKS, Controller, Move, write_words
from stdsl.control.reasoning_budget import ReasoningPolicy
from stdsl.control.split.planner import BoundaryCover, ForcedPlanner, Plan, PreTokenizingTokenizer, Window
from stdsl.errors import GenerationError
from stdsl.kernels.rows import RowCache
from stdsl.kernels.token_mask import pack_words
from stdsl.kernels.vocabulary import TokenBytes, Vocabulary

_VOCABULARIES: CacheKind[Vocabulary] = CacheKind("vocabularies")


def vocabulary_of(tokenizer: Any) -> Vocabulary:
    """The kernels' `Vocabulary` of a runtime `Tokenizer` (specials carry no bytes), built once per tokenizer
    (a `stdsl.caches` entry)."""
    return _VOCABULARIES.get((tokenizer,), lambda: _build_vocabulary(tokenizer))


def _build_vocabulary(tokenizer: Any) -> Vocabulary:
    if getattr(tokenizer, "hf", None) is not None:
        from stdsl.kernels.vocab_sources import vocabulary_from_hf

        return vocabulary_from_hf(tokenizer.hf, eos_ids=tokenizer.eos_ids)
    specials = getattr(tokenizer, "special_tokens", {}).values()
    return Vocabulary(TokenBytes(tokenizer.token_bytes, specials), tokenizer.eos_ids)


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
        automaton: Any,
        tokenizer: PreTokenizingTokenizer,
        vocab: Vocabulary,
        *,
        max_tokens: int | None = None,
        healing: bool = True,
        rows: RowCache | None = None,
        budget: BudgetTable | None = None,
    ) -> None:
        shared = shared_tables(automaton, vocab)
        planner = shared.planner(tokenizer, healing)
        if max_tokens is not None and budget is None:
            budget = shared.budget(planner)
        self._begin(Controller(automaton, vocab, planner, rows if rows is not None else shared.rows,
                               max_tokens=max_tokens, budget=budget if max_tokens is not None else None,
                               masks=ROW_MASKS))

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
        return self.controller.automaton

    @property
    def vocab(self) -> Vocabulary:
        return self.controller.vocab

    @property
    def planner(self) -> ForcedPlanner:
        return self.controller.planner

    @property
    def rows(self) -> RowCache:
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
        allowed = self._sampling_mask().copy()
        if self.reasoning is not None:
            allowed = self.reasoning.restrict(self, allowed)
        return allowed

    def fill(self, out: np.ndarray) -> None:
        """Write `mask()` into `out`, one int32 bitmask row (token t at bit t % 32 of word t // 32, later words
        cleared): the controller's packed words, kept per configuration, unless a reasoning policy narrows them."""
        if self.reasoning is not None:
            write_words(pack_words(self.mask()), out)
            return
        configuration = self.configuration
        self._sampling_mask()
        self.controller.fill([configuration], out[None])

    def _sampling_mask(self) -> np.ndarray:
        """The controller's mask at the sampling configuration (read-only), noting when the budget shapes it."""
        if self.finished:
            raise GenerationError("the output is finished; no further token is admissible")
        allowed, shaped = self.controller.shaped_mask(self.configuration)
        if shaped and not self.budget_shaped:
            self.configuration = replace(self.configuration, budget_shaped=True)
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


class SharedTables:
    """Per (automaton, vocabulary) state shared by every request: rows on demand and the budget table."""

    def __init__(self, automaton: Any, vocab: Vocabulary) -> None:
        self.automaton = automaton
        self.vocab = vocab
        self.rows = RowCache(automaton, vocab)
        self._budget: BudgetTable | None = None

    def planner(self, tokenizer: PreTokenizingTokenizer, healing: bool) -> ForcedPlanner:
        """The forced planner for a tokenizer (its caches of stable tails and covers are shared too; a
        `stdsl.caches` entry that goes with these tables)."""
        return _PLANNERS.get((self, tokenizer),
                             lambda: ForcedPlanner(self.automaton, tokenizer, self.vocab.token_bytes, healing),
                             (healing,))

    def budget(self, planner: ForcedPlanner) -> BudgetTable:
        """The budget table, built on first use."""
        if self._budget is None:
            self._budget = budget_table_for(self.automaton, self.vocab, planner)
        return self._budget

    @property
    def nbytes(self) -> int:
        """Bytes of the rows on demand and the budget table (the automaton and vocabulary are counted where they
        are kept)."""
        budget = self._budget
        return self.rows.nbytes + (budget.nbytes if budget is not None else 0)


_PLANNERS: CacheKind[ForcedPlanner] = CacheKind("forced planners")
_SHARED: CacheKind[SharedTables] = CacheKind("shared tables")


def shared_tables(automaton: Any, vocab: Vocabulary) -> SharedTables:
    """The shared tables of an automaton under a vocabulary (a `stdsl.caches` entry: least recently used go first
    past the registry's byte budget)."""
    return _SHARED.get((automaton, vocab), lambda: SharedTables(automaton, vocab))


MAX_UNCAPPED_ENTRIES = 50_000_000
"""States x vocabulary up to which a budget question may walk every row it reaches (at most the whole table once);
past it each question walks at most `MAX_QUESTION_ROWS` new rows."""


def budget_table_for(automaton: Any, vocab: Vocabulary, planner: ForcedPlanner) -> BudgetTable:
    """need(q) for the automaton, searched on demand over token rows behind the byte bound of `chain_bound`, which
    settles every question far from the limit: a new grammar's first mask walks no token row for its budget, and near
    the limit only the rows of states a search reaches are walked. Exact up to `MAX_UNCAPPED_ENTRIES`; past it, exact
    wherever a question settles within its rows, else answered by the bound (sound, at most a little early to close).
    """
    chain_end, chain_bytes = forced_chains(automaton, planner.chain)
    bound = chain_bound(automaton, vocab, chain_end, chain_bytes, planner.chain_token_count)
    rows = UNREACHABLE if automaton.num_states * vocab.size <= MAX_UNCAPPED_ENTRIES else MAX_QUESTION_ROWS
    return BudgetTable(np.asarray(automaton.accepting), row_successors(automaton, vocab), bound, rows)
