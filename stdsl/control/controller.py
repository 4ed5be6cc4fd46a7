"""The constraint controller: every decision of one constraint as pure functions of a frozen configuration.

At each step the mask of admissible tokens (live walks, the boundary cover, eos exactly at accepting states,
the budget mask of Theorem 21) and, given the sampled token, the tokens to feed in the next pass (the
planner's canonical plan, Theorem 20, then every token the mask leaves no choice about). The boundary cover
yields to the budget and to liveness: where it would leave no admissible token, the mask is taken without it.

A `Configuration` is frozen and hashable; `advance` returns the next one and the tokens to feed without
touching the one it was given (so a fork is just a kept configuration); masks are memoized per configuration
and filled for many rows at once into a preallocated bitmask (bool, or 32-bit words as XGrammar's and vLLM's
processors take). The DFA and the pushdown (`pushdown_controller.PushdownController`) are the same controller
over different tables; the budget, cover, canonical split and forced spans live here, once. A row is a
controller (its own, for its memo) plus the frozen log of what it emitted (`log.Log`): `started`, `taken`,
`row_mask` and `fill_row` read a log, and a move applied to it (`Log.apply`) is the only way it changes.

A reasoning model's thinking budget is a row policy over these masks (it reads the row's whole output): a row's
controller carries it (`with_reasoning`) and applies it to the log it is given, also inside the singleton loop.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol, Self

import numpy as np

from stdsl.compiler.byte_machine import ByteMachine
from stdsl.control.budget.automaton_budget import BudgetTable, check_feasible
from stdsl.control.log import Configuration, Log, Move
from stdsl.control.reasoning_budget import ReasoningPolicy
from stdsl.control.split.boundary_cover import BoundaryCover
from stdsl.control.split.planner import ForcedPlanner, Plan
from stdsl.control.split.window import Window
from stdsl.errors import GenerationError, StdslError
from stdsl.kernels.token_mask import TokenMask, bitmask_words, pack_words
from stdsl.kernels.vocabulary import Vocabulary

MAX_MASKS = 256
"""Masks a controller made for many configurations keeps, least recently used dropped first (each is a
vocabulary's worth of bools)."""
ROW_MASKS = 2
"""Masks a row's own controller keeps: the one its row samples with, asked again by the advance."""


class TokenRows(Protocol):
    """The token rows a controller reads (`kernels.rows.RowCache` for a DFA, `kernels.pushdown.rows.PushdownRows`)."""

    def token_mask(self, state: int) -> TokenMask: ...

    def fill_bitmask(self, state: int, out: np.ndarray) -> np.ndarray: ...

    def next_states(self, state: int) -> np.ndarray: ...

    def __len__(self) -> int: ...


class CostTable(Protocol):
    """The budget's cost table of Theorem 21 (`BudgetTable` for a DFA, `PushdownBudget`)."""

    def need_at(self, state: int) -> int: ...

    def fits(self, state: int, spent: int, remaining: int) -> bool: ...

    def admits(self, state: int, row: np.ndarray, remaining: int) -> np.ndarray | None: ...

    def admits_all_from(self, state: int) -> int | None: ...


UNWITHHELD = -1
"""The `remaining` of a mask's memo key where the budget withholds no token (`admits` is None at every remaining from
`admits_all_from` on), so one mask serves every such step rather than one per count of tokens left."""

Narrowing = Callable[[Move, np.ndarray], np.ndarray]
"""A row policy's narrowing of a mask (a reasoning budget): given the move so far and the mask at its configuration
(read-only), the tokens the row still admits. The controller's singleton loop takes what it leaves single."""


class Controller:
    """Pure moves and masks over the `Configuration`s of one constraint under one tokenizer and token budget.

    `planner` splits forced text (its tokenizer and healing), `rows` gives live token rows per state, `budget`
    the cost table of Theorem 21 (None: no budget; `max_tokens` is then None too). `masks` masks are memoized.
    """

    def __init__(self, machine: ByteMachine, vocab: Vocabulary, planner: ForcedPlanner, rows: TokenRows, *,
                 max_tokens: int | None = None, budget: CostTable | None = None, masks: int = MAX_MASKS) -> None:
        if (max_tokens is None) != (budget is None):
            raise StdslError("a controller has a budget table exactly when it has max_tokens")
        self.machine = machine
        """The byte machine stepped (a DFA, or a pushdown's configuration ids for a `PushdownController`)."""
        self.start_state = machine.start
        """The state every output starts in."""
        self.vocab = vocab
        self.planner = planner
        self.rows = rows
        """The automaton's token rows on demand (what a device walk reads on the host path)."""
        self.max_tokens = max_tokens
        self.budget = budget
        """The budget's cost table (None without a token budget)."""
        self._keep = masks
        self._masks: OrderedDict[tuple[Any, ...], tuple[np.ndarray, bool, bool]] = OrderedDict()
        """Masks by configuration: the mask, whether the budget shaped it, whether it is its state's live row."""
        self._words: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        """Packed words of the latest masks, by the identity of the mask they pack (kept with it)."""
        self._least: int | None = None
        self._ends_after: dict[int, bool] = {}
        """Per state, whether some live token ends the output there (`may_end_after`; shared by this controller's
        twins: it depends on the automaton and vocabulary alone)."""

    host_masks_only = False
    """Whether masks come only from `mask` (a pushdown's configurations: no token table walk stands in for them)."""
    reasoning: ReasoningPolicy | None = None
    """The thinking block of a reasoning model's output and its budget: a row policy that narrows this row's masks
    from its log (`row_mask`, `taken`), as a callback of the singleton loop (None: the output has no block)."""

    def with_masks(self, masks: int) -> Self:
        """This controller with a memo of its own that keeps `masks` masks."""
        twin = copy.copy(self)
        twin._keep, twin._masks, twin._words = masks, OrderedDict(), OrderedDict()
        return twin

    def with_live_masks(self, masks_of: Callable[[Any], Any]) -> Controller:
        """This controller taking its live masks from `masks_of(rows)` where its kind has another source of them
        than the host rows (a pushdown's device state vector; None: keep the host rows); a DFA's is itself."""
        return self

    def with_reasoning(self, policy: ReasoningPolicy) -> Self:
        """This controller (a row's own) narrowing its masks by a reasoning model's thinking budget."""
        twin = self.with_masks(self._keep)
        twin.reasoning = policy
        return twin

    def without_budget(self) -> Controller:
        """This controller without the token budget (certified drafts are capped by draws instead)."""
        twin = self.with_masks(self._keep)
        twin.max_tokens, twin.budget, twin._least = None, None, None
        return twin

    def initial(self) -> Configuration:
        """The configuration before `start`."""
        return Configuration(self.start_state, remaining=self.max_tokens)

    # ------------------------------------------------------------------ a row: this controller and its log

    def started(self) -> Log:
        """A row's log after its forced prefix φ(c0) (the log's tokens, fed with the prompt); BudgetError when no valid
        output fits."""
        log = Log(self.initial())
        return log.apply(self.start(self._narrowing(log)))

    def placed(self, state: int, log: Log) -> Log:
        """A row's log started over at `state` (`start_at`: a draft placed at a block's entry), recording as `log`
        was; its tokens are all forced."""
        return Log(self.initial(), sampled=log.sampled).apply(self.start_at(state))

    def taken(self, log: Log, token: int) -> Move:
        """The move on a sampled `token` from a row's log, narrowed by the row policy: its tokens to feed, and what
        `log.apply` makes the row's next log."""
        return self.advance(log.configuration, token, self._narrowing(log))

    def row_mask(self, log: Log) -> np.ndarray:
        """A row's admissible tokens at its log (bool (V,), read-only): the configuration's mask narrowed by the row
        policy; GenerationError once the output is finished."""
        if log.configuration.finished:
            raise GenerationError("the output is finished; no further token is admissible")
        allowed = self.mask(log.configuration)
        if self.reasoning is not None:
            allowed = self.reasoning.restrict(log, allowed, self.planner.spellings)
        return allowed

    def fill_row(self, log: Log, out: np.ndarray) -> None:
        """Write `row_mask(log)` into `out`, one int32 bitmask row (token t at bit t % 32 of word t // 32, later words
        cleared)."""
        if self.reasoning is not None:
            write_words(pack_words(self.row_mask(log)), out)
            return
        if log.configuration.finished:
            raise GenerationError("the output is finished; no further token is admissible")
        self._fill_words(log.configuration, out)

    def _narrowing(self, log: Log) -> Narrowing | None:
        """The row policy's narrowing of the masks the singleton loop asks, from `log` on (None: no policy)."""
        policy, spellings = self.reasoning, self.planner.spellings
        if policy is None:
            return None
        return lambda move, allowed: policy.restrict(log.apply(move), allowed, spellings)

    # ------------------------------------------------------------------ moves

    def start(self, narrow: Narrowing | None = None) -> Move:
        """The first configuration and the forced prefix φ(c0) to feed with the prompt (BudgetError: nothing fits).
        `narrow`: a row policy's narrowing of each mask the singleton loop asks (`Narrowing`)."""
        at = self.initial()
        plan = self.planner.plan(at.window, at.state, b"", None)
        remaining = at.remaining
        if remaining is not None and not self._fits(plan, remaining):
            at = replace(at, budget_shaped=True)
            plans = [plan, *self._fallbacks(at, None)]
            fitting = [p for p in plans[1:] if self._fits(p, remaining)]
            if not fitting:
                # The least output settles what the fit questions left to the bound; every plan is asked again.
                check_feasible(self.least_output_tokens(), remaining)
                fitting = [p for p in plans if self._fits(p, remaining)]
            if not fitting:
                raise GenerationError("no plan of the forced prefix fits although the shortest output does")
            plan = fitting[0]
        return self._moved(at, plan, None, narrow)

    def start_at(self, state: int) -> Move:
        """A fresh output placed at `state` (no tokens left counted): the forced tokens it begins with."""
        at = Configuration(state, remaining=self.max_tokens)
        return self._moved(at, self.planner.plan(at.window, state, b"", None), None, None)

    def advance(self, configuration: Configuration, token: int, narrow: Narrowing | None = None) -> Move:
        """The move on `token` from `configuration` (GenerationError: the token is not admissible there); the
        configuration given is left as it was. `narrow` as in `start`."""
        if configuration.finished:
            raise GenerationError("the output is finished; no further token can be taken")
        allowed, shaped = self._mask_of(configuration)
        if not 0 <= token < allowed.shape[0] or not allowed[token]:
            known = 0 <= token < self.vocab.size
            if known and self.vocab.eos[token]:
                raise GenerationError(f"eos token {token} sampled outside an accepting state")
            cover = self.cover_mask(configuration)
            if known and cover is not None and not cover[token]:
                raise GenerationError(f"token {token} breaks the tokenizer's split of the forced text "
                                      f"{configuration.pending!r}")
            raise GenerationError(f"token {token} is not admissible at this configuration")
        at = replace(configuration, budget_shaped=shaped)
        if self.vocab.eos[token]:
            return Move(replace(at, finished=True), (), 0, sampled=token)
        plan, at = self._plan_after(at, token)
        return self._moved(at, plan, token, narrow)

    def _moved(self, at: Configuration, plan: Plan, sampled: int | None, narrow: Narrowing | None) -> Move:
        """Take `plan` (after the sampled token, if any), then every token the mask (narrowed by `narrow`) leaves no
        choice about."""
        at = self._take(at, plan)
        feed = list(plan.tokens)
        forced = len(feed) - (1 if sampled is not None else 0)
        while not at.finished:
            allowed, shaped = self._mask_of(at)
            at = replace(at, budget_shaped=shaped)
            if narrow is not None:
                allowed = narrow(Move(at, tuple(feed), forced, self.spell(feed), sampled), allowed)
            if np.count_nonzero(allowed) != 1:  # counting is far cheaper than listing a whole vocabulary's ids
                break
            token = int(np.flatnonzero(allowed)[0])
            if self.vocab.eos[token]:
                at = replace(at, finished=True)
                break
            plan, at = self._plan_after(at, token)
            at = self._take(at, plan)
            feed += plan.tokens
            forced += len(plan.tokens)
        return Move(at, tuple(feed), forced, self.spell(feed), sampled)

    def may_end_after(self, state: int) -> bool:
        """Whether some token live at `state` finishes the output by itself: its walk, with the forced chain after it,
        reaches a state with no live byte (a pipelined step, which feeds a draw before reading it, would feed such a
        token to a pass its row never uses: `stdsl.runtime.batch.pipelining`); memoized per state."""
        found = self._ends_after.get(state)
        if found is None:
            after = self.rows.next_states(state)
            reached = np.unique(after[after >= 0]).tolist()
            found = any(self.planner.live_count[self.planner.chain(s)[1]] == 0 for s in reached)
            self._ends_after[state] = found
        return found

    def _plan_after(self, at: Configuration, token: int) -> tuple[Plan, Configuration]:
        """The canonical plan after `token`, or a fallback (`_fallbacks`) when the canonical one breaks the budget."""
        plan = self.planner.plan(at.window, at.state, at.pending, token)
        remaining = at.remaining
        if remaining is not None and not self._fits(plan, remaining):
            at = replace(at, budget_shaped=True)
            plan = next((p for p in self._fallbacks(at, token) if self._fits(p, remaining)), plan)
            if not self._fits(plan, remaining):
                raise GenerationError(f"token {token} leaves no valid ending within the budget")
        return plan, at

    def _fallbacks(self, at: Configuration, token: int | None) -> list[Plan]:
        """Plans to try in turn where the canonical one breaks the budget: the forced run split on its own, then (under
        a `BudgetTable`, whose need counts it) the run held back whole for the next sampled tokens to spell."""
        table = self.planner.table_plan(at.window, at.state, token)
        if not isinstance(self.budget, BudgetTable):
            return [table]
        return [table, held_plan(self.planner, at, token, table)]

    def _take(self, at: Configuration, plan: Plan) -> Configuration:
        """The sampling configuration a plan reaches."""
        remaining = None if at.remaining is None else at.remaining - len(plan.tokens)
        return Configuration(plan.state, plan.pending, plan.window, plan.cover, remaining,
                             plan.finished or remaining == 0, at.budget_shaped)

    # ------------------------------------------------------------------ the budget

    def least_tokens(self, plan: Plan) -> int:
        """Tokens the output needs at least if `plan` is taken now: its own plus need(next state)."""
        if self.budget is None:
            return len(plan.tokens)
        return len(plan.tokens) + self.budget.need_at(plan.state)

    def _fits(self, plan: Plan, remaining: int) -> bool:
        """Whether a valid ending still fits in `remaining` tokens if `plan` is taken now (the tokens that will spell
        its held-back bytes counted: `_fits_held`)."""
        if self.budget is None:
            return len(plan.tokens) <= remaining
        return self._fits_held(plan.state, plan.pending, remaining - len(plan.tokens))

    def _fits_held(self, state: int, pending: bytes, remaining: int) -> bool:
        """Whether a valid ending fits in `remaining` tokens from `state` whose next tokens must spell `pending`.

        need(state) counts any live token; where `pending` is more than the state's forced chain (a sampled token's
        tail healed into the held-back block), only tokens agreeing with it count: one spanning it costs 1 + need
        after it, one stopping inside it leaves the rest held back for the tokens after it.
        """
        assert self.budget is not None
        if remaining < 0:
            return False
        if not pending or self.planner.chain(state)[0].startswith(pending):
            return self.budget.fits(state, 0, remaining)
        if remaining == 0:
            return False
        after = self.rows.next_states(state)
        spellings = self.planner.spellings
        agreeing = np.flatnonzero((after >= 0) & spellings.agreeing_with(pending) & (spellings.lengths > 0))
        for token in agreeing.tolist():
            width = int(spellings.lengths[token])
            if width >= len(pending):
                if self.budget.fits(int(after[token]), 1, remaining):
                    return True
            elif self._fits_held(int(after[token]), pending[width:], remaining - 1):
                return True
        return False

    def least_output_tokens(self) -> int:
        """need(c1) counted from the start: the fewest tokens of a valid output."""
        if self._least is None:
            at = self.initial()
            plans = [self.planner.plan(at.window, self.start_state, b"", None), *self._fallbacks(at, None)]
            self._least = min(self.least_tokens(plan) for plan in plans)
        return self._least

    # ------------------------------------------------------------------ masks

    def mask(self, configuration: Configuration) -> np.ndarray:
        """The admissible tokens at `configuration` (bool (V,), read-only; eos iff the output may end, and only eos
        once it is finished), memoized per configuration."""
        return self._mask_of(configuration)[0]

    def shaped_mask(self, configuration: Configuration) -> tuple[np.ndarray, bool]:
        """The mask (read-only) and whether the budget has shaped the output once it is applied."""
        return self._mask_of(configuration)

    def _mask_of(self, configuration: Configuration) -> tuple[np.ndarray, bool]:
        allowed, shaped, _ = self._mask_entry(configuration)
        return allowed, shaped

    def _mask_entry(self, configuration: Configuration) -> tuple[np.ndarray, bool, bool]:
        """The memoized mask at `configuration`, whether the budget shaped it, and whether it is the state's live row
        untouched (nothing held back, no cover, nothing the budget withholds)."""
        _check(configuration)
        remaining = configuration.remaining
        if remaining is not None and self.budget is not None:
            unwithheld = self.budget.admits_all_from(configuration.state)
            if unwithheld is not None and remaining >= unwithheld:
                remaining = UNWITHHELD
        key = (configuration.state, configuration.pending, configuration.cover, remaining,
               configuration.finished, configuration.budget_shaped)  # not the window: the cover carries its effect
        found = self._masks.get(key)
        if found is not None:
            self._masks.move_to_end(key)
            return found
        if configuration.finished:
            allowed = np.zeros(self.vocab.size, dtype=bool)
            allowed[self.vocab.eos_ids] = True
            found = (allowed, configuration.budget_shaped, False)
        else:
            found = self._compute_mask(configuration)
        found[0].setflags(write=False)
        if self._keep:
            self._masks[key] = found
            if found[1] and not configuration.budget_shaped:  # the configuration the advance moves to: same mask
                self._masks[(*key[:-1], True)] = found
            while len(self._masks) > self._keep:
                self._masks.popitem(last=False)
        return found

    def _compute_mask(self, at: Configuration) -> tuple[np.ndarray, bool, bool]:
        """The mask at an unfinished configuration, whether the budget shaped it, whether it is the live row."""
        allowed = self._live_mask(at.state)
        allowed[self.vocab.eos_ids] = False  # eos is set below, iff the output may end here
        if at.pending:
            # Held-back bytes may hold the tail of a sampled token (healed into the forced block after it),
            # which the automaton at `state` does not force: the next token must spell them, or a prefix.
            allowed &= self.planner.spellings.agreeing_with(at.pending)
        ending = self.accepting(at)
        shaped = at.budget_shaped
        unbudgeted = within = None
        if self.budget is not None and at.remaining is not None:
            within = self._budget_mask(at.state, at.remaining)
            if within is not None:
                if not shaped:
                    unbudgeted = self._covered(allowed.copy(), ending, at.cover)
                allowed &= within
        allowed = self._covered(allowed, ending, at.cover)
        if unbudgeted is not None and not np.array_equal(unbudgeted, allowed):
            shaped = True
        return allowed, shaped, within is None and not at.pending and not at.cover

    def _live_mask(self, state: int) -> np.ndarray:
        """A fresh bool (V,) of the tokens with a live walk from `state` (the rows' memoized mask)."""
        return self.rows.token_mask(state).dense()

    def _budget_mask(self, state: int, remaining: int) -> np.ndarray | None:
        """The budget's mask at `state` (None: every live token leaves a valid ending within it)."""
        assert self.budget is not None
        return self.budget.admits(state, self.rows.next_states(state), remaining)

    def _covered(self, allowed: np.ndarray, ending: bool, cover: BoundaryCover | None) -> np.ndarray:
        """`allowed` under the boundary cover (which yields where it would leave no token), eos set iff ending."""
        if cover:
            covered = allowed & self.planner.cover_mask(cover)
            if covered.any() or (ending and cover.eos):
                allowed, ending = covered, ending and cover.eos
        allowed[self.vocab.eos_ids] = ending
        return allowed

    def cover_mask(self, configuration: Configuration) -> np.ndarray | None:
        """The boundary cover's token mask at `configuration` (None: no cover, any token), before eos and budget."""
        cover = configuration.cover
        return None if cover is None else self.planner.cover_mask(cover)

    def words(self, configuration: Configuration) -> np.ndarray:
        """The mask at `configuration` as int32 bitmask words (read-only, ceil(V / 32),): token t at bit t % 32 of word
        t // 32, the bits past the vocabulary 0; packed once per memoized mask."""
        allowed = self.mask(configuration)
        key = id(allowed)  # the memo holds `allowed` while its words are kept, so the id names no other array
        found = self._words.get(key)
        if found is None or found[0] is not allowed:
            words = pack_words(allowed)
            words.setflags(write=False)
            found = (allowed, words)
            self._words[key] = found
            if len(self._words) > max(self._keep, 1):
                self._words.popitem(last=False)
        else:
            self._words.move_to_end(key)
        return found[1]

    def fill(self, configurations: list[Configuration], out: np.ndarray) -> np.ndarray:
        """Write each configuration's mask into row i of `out`: bool (B, ≥ V), or int32 words (B, ≥ ceil(V / 32))
        with token t at bit t % 32 of word t // 32 (as XGrammar's and vLLM's bitmasks); columns past the vocabulary
        are cleared. Returns `out`."""
        if out.ndim != 2 or out.shape[0] < len(configurations):
            raise StdslError(f"the bitmask must be 2-D with a row per configuration, got shape {out.shape}")
        for row, configuration in enumerate(configurations):
            if out.dtype == np.bool_:
                allowed = self.mask(configuration)
                if out.shape[1] < allowed.shape[0]:
                    raise StdslError(f"a bool bitmask needs {allowed.shape[0]} columns, got {out.shape[1]}")
                out[row, : allowed.shape[0]] = allowed
                out[row, allowed.shape[0] :] = False
            elif out.dtype == np.int32:
                self._fill_words(configuration, out[row])
            else:
                raise StdslError(f"the bitmask must be bool or int32, got {out.dtype}")
        return out

    def _fill_words(self, configuration: Configuration, out: np.ndarray) -> None:
        """Write the mask's words into one int32 bitmask row: where the mask is its state's live row (nothing held
        back, covered or withheld by the budget: most steps), straight from the rows' packed words, shared by every
        row and step at that state; else packed from the mask."""
        allowed, _, live = self._mask_entry(configuration)
        if live and self._rows_give_live_masks():
            width = bitmask_words(allowed.shape[0])
            if out.shape[0] < width:
                raise StdslError(f"an int32 bitmask needs {width} words, got {out.shape[0]}")
            self.rows.fill_bitmask(configuration.state, out[:width])
            out[width:] = 0
        else:
            write_words(self.words(configuration), out)

    def _rows_give_live_masks(self) -> bool:
        """Whether the live masks are the rows' (whose packed words a live-row mask then is)."""
        return True

    # ------------------------------------------------------------------ the output

    def spell(self, tokens: Sequence[int]) -> bytes:
        """The bytes `tokens` spell (an output's committed text; add the configuration's `pending` for all it
        decided)."""
        return bytes(self.planner.spell(tokens))

    def accepting(self, configuration: Configuration) -> bool:
        """Whether the output may end at `configuration` (nothing held back, an accepting state)."""
        return not configuration.pending and bool(self.machine.accepting[configuration.state])

    def finish_reason(self, configuration: Configuration, eos_sampled: bool, stopped: bool = False) -> str:
        """'length' when the token budget shaped the output (or ran out where the constraint admits more), 'stop' when
        a stop string ended it (`stopped`), 'eos' when the model drew eos, 'stop' when the constraint admits nothing
        more: no byte, or none the tokenizer's own split can write after the tokens so far (after "b" under "b" |
        "bc", where the vocabulary spells "bc" as one token, only the end is left). The one finish rule: every
        surface asks it here."""
        if configuration.budget_shaped:
            return "length"
        if stopped:
            return "stop"
        if eos_sampled:
            return "eos"
        if self.planner.live_count[configuration.state] == 0:
            return "stop"
        ran_out = configuration.remaining is not None and configuration.remaining <= 0
        return "length" if ran_out else "stop"


def write_words(words: np.ndarray, out: np.ndarray) -> None:
    """Copy a mask's bitmask `words` into `out`, one int32 bitmask row at least as wide, clearing the words past
    them (StdslError naming both widths when `out` is narrower)."""
    if out.shape[0] < words.shape[0]:
        raise StdslError(f"an int32 bitmask needs {words.shape[0]} words, got {out.shape[0]}")
    out[: words.shape[0]] = words
    out[words.shape[0] :] = 0


def held_plan(planner: ForcedPlanner, at: Configuration, token: int | None, table: Plan) -> Plan:
    """`token` alone (nothing at the start), the whole forced run after it held back: the next sampled tokens spell
    it, merged with what follows (the fewest tokens need counts). `table` is the table plan of the same step."""
    spelled = b"" if token is None else (planner.token_bytes[token] or b"")
    fed = () if token is None else (token,)
    window = at.window
    window = Window(window.text + spelled, window.starts + ((len(window.text),) if fed else ()), window.tokens + fed,
                    window.forced_end)
    pending = table.decided[len(spelled):]
    return replace(table, tokens=fed, state=planner.machine.step(at.state, spelled), pending=pending, cover=None,
                   window=window, finished=table.finished and not pending)


def _check(configuration: Any) -> None:
    if not isinstance(configuration, Configuration):
        raise StdslError(f"expected a Configuration, got {type(configuration).__name__}")
