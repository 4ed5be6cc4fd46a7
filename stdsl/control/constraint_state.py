"""The per-request token-level controller: automaton state, held-back bytes, cover, mask, budget.

It owns one output: at each step it gives the mask of admissible tokens (live walks, the
boundary cover, eos exactly at accepting states, the budget mask of Theorem 21) and, given the
sampled token, the tokens to feed in the next pass (the planner's canonical plan, Theorem 20).
The boundary cover yields to the budget and to liveness: where it would leave no admissible
token, the mask is taken without it. `stdsl.control.controller` gives the same decisions as pure functions of a
frozen configuration (the row's state without its log).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stdsl.caches import CacheKind
from stdsl.control.budget.automaton_budget import BudgetTable, check_feasible
from stdsl.control.budget.need_graphs import byte_token_successors, chain_bound, forced_chains, row_successors
from stdsl.control.reasoning_budget import ReasoningPolicy
from stdsl.control.split.planner import BoundaryCover, ForcedPlanner, Plan, PreTokenizingTokenizer, Window
from stdsl.errors import GenerationError
from stdsl.kernels.rows import RowCache
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
    """One output under one automaton: the sampling configuration and the tokens emitted so far.

    `max_tokens=None` decodes without a budget. `start()` must be called first: it returns the
    forced prefix φ(c0) (fed with the prompt) and raises BudgetError when nothing valid fits;
    with a budget, `least_output_tokens` is then need(c1) counted from the start.
    """

    cover: BoundaryCover | None = None
    budget_shaped = False
    """Whether the token budget changed this output: at some step its mask withheld a token the mask without
    it admitted, or a forced span was split on its own to fit. Until then the output is, token for token,
    what decoding without `max_tokens` gives (the finish reason is then "length", never "stop")."""
    _masked_at = -1
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
        self.automaton = automaton
        self.vocab = vocab
        shared = shared_tables(automaton, vocab)
        self.planner = shared.planner(tokenizer, healing)
        self.rows = rows if rows is not None else shared.rows
        self.max_tokens = max_tokens
        self.budget = budget
        if max_tokens is not None and budget is None:
            self.budget = shared.budget(self.planner)
        self.remaining: int | None = max_tokens
        self.state = 0
        self.pending = b""
        self.cover = None
        self.window = Window()
        self.committed = bytearray()
        self.tokens: list[int] = []
        self.forced_count = 0
        self.finished = False
        self.started = False
        self._start_plans: tuple[Plan, Plan] | None = None
        self._least_output_tokens: int | None = None

    # ------------------------------------------------------------------ queries

    @property
    def accepting(self) -> bool:
        """Whether the output so far is in the language."""
        return not self.pending and bool(self.automaton.accepting[self.state])

    @property
    def decided(self) -> bytes:
        """All output bytes decided so far: fed tokens plus held-back forced bytes."""
        return bytes(self.committed) + self.pending

    def mask(self) -> np.ndarray:
        """Admissible tokens at the current sampling configuration (bool (V,), eos included iff accepting)."""
        if self.finished:
            raise GenerationError("the output is finished; no further token is admissible")
        allowed = self._live_mask()
        allowed[self.vocab.eos_ids] = False  # eos is set below, iff the output may end here
        if self.pending:
            # Held-back bytes may hold the tail of a sampled token (healed into the forced block after it),
            # which the automaton at `state` does not force: the next token must spell them, or a prefix.
            allowed &= self.planner.spellings.agreeing_with(self.pending)
        ending = self.accepting
        unbudgeted = None
        if self.budget is not None and self.remaining is not None:
            within = self._budget_mask()
            if within is not None:
                if not self.budget_shaped:
                    unbudgeted = self._covered(allowed.copy(), ending)
                allowed &= within
        allowed = self._covered(allowed, ending)
        if unbudgeted is not None and not np.array_equal(unbudgeted, allowed):
            self.budget_shaped = True
        self._masked_at = len(self.tokens)
        if self.reasoning is not None:
            allowed = self.reasoning.restrict(self, allowed)
        return allowed

    def _live_mask(self) -> np.ndarray:
        """A fresh bool (V,) of the tokens with a live walk from the current state (the rows' memoized mask)."""
        return self.rows.token_mask(self.state).dense()

    def _budget_mask(self) -> np.ndarray | None:
        """The budget's mask at the current state (None: every live token leaves a valid ending within it)."""
        assert self.budget is not None and self.remaining is not None
        return self.budget.admits(self.state, self.rows.next_states(self.state), self.remaining)

    def _covered(self, allowed: np.ndarray, ending: bool) -> np.ndarray:
        """`allowed` under the boundary cover (which yields where it would leave no token), eos set iff ending."""
        if self.cover:
            covered = allowed & self.planner.cover_mask(self.cover)
            if covered.any() or (ending and self.cover.eos):
                allowed, ending = covered, ending and self.cover.eos
        allowed[self.vocab.eos_ids] = ending
        return allowed

    def least_tokens(self, plan: Plan) -> int:
        """Tokens the output needs at least if `plan` is taken now: its own plus need(next state)."""
        if self.budget is None:
            return len(plan.tokens)
        return len(plan.tokens) + self.budget.need_at(plan.state)

    def _fits(self, plan: Plan) -> bool:
        """Whether a valid ending still fits in the tokens left if `plan` is taken now."""
        assert self.remaining is not None
        if self.budget is None:
            return len(plan.tokens) <= self.remaining
        return self.budget.fits(plan.state, len(plan.tokens), self.remaining)

    @property
    def least_output_tokens(self) -> int | None:
        """need(c1) counted from the start: the fewest tokens of a valid output (None before a budgeted start)."""
        if self._least_output_tokens is None and self._start_plans is not None:
            self._least_output_tokens = min(self.least_tokens(plan) for plan in self._start_plans)
        return self._least_output_tokens

    # ------------------------------------------------------------------ moves

    def start(self) -> list[int]:
        """Plan the forced prefix φ(c0) and return its tokens; BudgetError if no valid output fits."""
        if self.started:
            raise GenerationError("start() was already called for this output")
        self.started = True
        plan = self.planner.plan(self.window, 0, b"", None)
        if self.remaining is not None:
            plan = self._budgeted_start(plan)
        return self._take(plan, sampled=False) + self._take_singletons()

    def _budgeted_start(self, plan: Plan) -> Plan:
        """The first plan under the budget: the canonical one, else the chain split on its own when only that
        fits (the least output length is counted only when asked, or to report that nothing fits)."""
        assert self.remaining is not None
        fallback = self.planner.table_plan(self.window, 0, None)
        self._start_plans = (plan, fallback)
        fits = self._fits(plan)
        if not fits and not self._fits(fallback):
            least = self.least_output_tokens
            assert least is not None
            check_feasible(least, self.remaining)
        self.budget_shaped = self.budget_shaped or not fits
        return plan if fits else fallback

    def advance(self, token: int) -> list[int]:
        """Take the sampled `token`; return the tokens to feed in one pass (empty after eos)."""
        if not self.started:
            raise GenerationError("call start() before advance()")
        if self.finished:
            raise GenerationError("the output is finished; no further token can be taken")
        if self.vocab.eos[token]:
            if not self.accepting:
                raise GenerationError(f"eos token {token} sampled outside an accepting state")
            self.finished = True
            return []
        if self.budget is not None and not self.budget_shaped and self._masked_at != len(self.tokens):
            self.mask()  # a caller that chose `token` without asking (certified drafts): the budget is checked here
        if self.cover and not self.planner.cover_mask(self.cover)[token] and not self.mask()[token]:
            raise GenerationError(f"token {token} breaks the tokenizer's split of the forced text {self.pending!r}")
        return self._take(self._plan_after(token), sampled=True) + self._take_singletons()

    def _plan_after(self, token: int) -> Plan:
        """The canonical plan after `token`, or the plain chain split when the canonical one breaks the budget."""
        plan = self.planner.plan(self.window, self.state, self.pending, token)
        if self.remaining is not None and not self._fits(plan):
            self.budget_shaped = True
            plan = self.planner.table_plan(self.window, self.state, token)
            if not self._fits(plan):
                raise GenerationError(f"token {token} leaves no valid ending within the budget")
        return plan

    def _take_singletons(self) -> list[int]:
        """Take every next token the mask leaves no choice about, without asking the model.

        A sampling configuration whose mask admits a single token (e.g. a held-back `":` that the
        tokenizer splits off whatever digit follows) is forced: the policy commits it, so it rides in the same
        pass as what came before. An accepting state whose only admissible token is eos ends here.
        """
        tokens: list[int] = []
        while not self.finished:
            allowed = np.flatnonzero(self.mask())
            if len(allowed) != 1:
                break
            token = int(allowed[0])
            if self.vocab.eos[token]:
                self.finished = True
                break
            tokens += self._take(self._plan_after(token), sampled=False)
        return tokens

    def _take(self, plan: Plan, sampled: bool) -> list[int]:
        """Commit a plan: record its tokens and move to its sampling configuration."""
        tokens = list(plan.tokens)
        self.tokens.extend(tokens)
        self.committed += self.planner.spell(tokens)
        self.forced_count += len(tokens) - (1 if sampled else 0)
        self.state, self.pending, self.window = plan.state, plan.pending, plan.window
        self.cover = plan.cover
        if self.remaining is not None:
            self.remaining -= len(tokens)
        if plan.finished or self.remaining == 0:
            self.finished = True
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


MAX_BUDGET_TABLE_ENTRIES = 50_000_000


def budget_table_for(automaton: Any, vocab: Vocabulary, planner: ForcedPlanner) -> BudgetTable:
    """need(q) for the automaton under the table policy, solved on demand over token rows (exact).

    When states x vocabulary exceeds `MAX_BUDGET_TABLE_ENTRIES` need is bounded from above over the
    byte moves whose byte is a token on its own instead (sound, a little early to close). Either
    way the table starts with the byte bound of `chain_bound`, which settles every question far
    from the limit, so a new grammar's first mask walks no token row for its budget.
    """
    chain_end, chain_bytes = forced_chains(automaton, planner.chain)
    bound = chain_bound(automaton, vocab, chain_end, chain_bytes, planner.chain_token_count)
    if automaton.num_states * vocab.size <= MAX_BUDGET_TABLE_ENTRIES:
        successors = row_successors(automaton, vocab)
    else:
        successors = byte_token_successors(automaton, vocab)
    return BudgetTable(np.asarray(automaton.accepting), successors, chain_end, planner.chain_token_count, bound)
