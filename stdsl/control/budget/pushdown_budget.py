"""Exact token budgets on a pushdown (Theorem 21 on configurations): need(c) by A* search, memoized by configuration.

need(c) is the least number of emitted tokens (sampled or forced) that takes configuration c to
acceptance under the table policy the DFA budget counts: a sampled token, then its whole forced
chain split on its own, so a step from c through token t costs 1 + |φ(c')| and lands on end(c').
A token may push and pop any number of return states; the search steps concrete configurations,
so tokens and forced chains that span pops are counted exactly.

The configuration graph is finite (the stack is capped) but far too large to solve whole, so each
question is answered by A* from its configuration, over the distinct configurations one token
reaches (read from the symbolic rows of Theorem 22: one entry per outcome, not per token), with
a heuristic of proven lower bounds that every search sharpens (Adaptive A*): after a search that
found need(root) = D, each configuration u it reached has need(u) >= D - g(u), and those on the
found path get their exact value; a search cut at threshold T proves need(u) > T - g(u). Far from
the limit, Proposition 2's byte bound (bytes of the shortest completion, when every byte the grammar
reads is a token of its own) answers without a search. Every configuration starts with the lower bound
ceil(shortest completion bytes / longest token an output can hold) (`live_token_length`): no token spells
more, so the search is led straight to the closing tokens. A search that expands more than
`max_expansions` configurations gives up; the answer is then that bound (sound: never below the truth),
and `bounded_answers` counts it. One mask shares one budget of expansions across its searches
(`max_mask_expansions`): a token still unanswered when it runs out is refused (sound) and counted likewise;
tokens answered without a search come first, so the ones on a proven path stay admitted. The guards count
work, not time, so a mask never depends on the machine's load: the same questions get the same answers.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from stdsl.caches import CacheKind
from stdsl.compiler.pushdown.grammar import completions_over
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.control.budget.automaton_budget import UNREACHABLE
from stdsl.control.budget.live_token_length import longest_live_token
from stdsl.control.budget.need_graphs import single_byte_tokens
from stdsl.control.split.planner import ForcedPlanner
from stdsl.kernels.pushdown.context_rows import CONTEXT_SYMBOLS, ContextRows, SymbolicRow
from stdsl.kernels.vocabulary import Vocabulary

MAX_EXPANSIONS = 20_000
"""Configurations one search may expand before it gives up and answers with the byte bound."""
MAX_MASK_EXPANSIONS = 20_000
"""Configurations the searches of one budget mask may expand together before the tokens left unanswered are
refused: about 0.1-0.3 s of search on this CPU, counted in work so that a mask does not change with the
machine's load."""
MAX_MEMO = 2_000_000
"""Memoized configurations (steps, bounds) kept before the memo is emptied; exact values are kept longest."""


@dataclass(frozen=True)
class Step:
    """One token step from a configuration: its cost 1 + |φ(c')| and the chain end end(c') it lands on."""

    cost: int
    end: int


MEMO_ENTRY_NBYTES = 100
"""About what one int -> int entry of a dict holds (the slot, the key and value objects)."""
MEMO_STEPS_NBYTES = 400
"""About what one configuration's remembered steps hold (a dict slot and a short tuple of `Step`s)."""


class _GaveUp(Exception):
    """A search reached its expansion guard."""


_PRESENT: CacheKind[np.ndarray] = CacheKind("present codes", max_entries=65_536)
"""Each symbolic row's present codes (a `stdsl.caches` entry that dies with its row); the entry bound keeps the
registry's per-entry bookkeeping, which the byte count leaves out, small beside these small arrays."""


def present_codes(row: SymbolicRow, vocab_size: int) -> np.ndarray:
    """The outcome codes some token of a symbolic row has (codes 2 and up), once per row: counting a dense row's
    codes costs a pass over the vocabulary, and a search asks at every configuration it expands."""
    return _PRESENT.get((row,), lambda: _present(row))


def _present(row: SymbolicRow) -> np.ndarray:
    counts = np.bincount(np.asarray(row.codes, dtype=np.int64), minlength=2 + len(row.outcomes))
    codes = np.flatnonzero(counts)
    return codes[codes >= 2]


def next_configurations(rows: ContextRows, config: int) -> np.ndarray:
    """The distinct live configurations one token takes `config` to (as `ContextRows.next_states`, without a row
    over the vocabulary: the free row's outcomes composed with the stack, the context row's, concrete steps)."""
    machine = rows.machine
    state = machine.state_of(config)
    free = rows.free_row(state)
    found = [free.table(machine, config)[present_codes(free, rows.vocab.size)]]
    if free.needs.size:
        known, below_empty = machine.stack_top(config, CONTEXT_SYMBOLS)
        context = rows.context_row(free, state, known, below_empty)
        found.append(context.table(machine, config)[present_codes(context, rows.vocab.size)])
        token_bytes = rows.vocab.token_bytes
        found.append(np.array([machine.step(config, token_bytes[t] or b"") for t in context.needs.tolist()],
                              dtype=np.int64))
    out = np.unique(np.concatenate([np.asarray(f, dtype=np.int64) for f in found]))
    return out[out >= 0]


class PushdownNeed:
    """need(c) on a machine's configurations under one planner's table policy, solved on demand and memoized.

    `exact[c]` holds solved values, `lower[c]` proven lower bounds. `byte_bound` is Proposition 2's need+ where it
    bounds tokens from above (every byte the grammar reads is a single-byte token), else None.
    """

    def __init__(self, machine: PushdownMachine, rows: ContextRows, planner: ForcedPlanner, vocab: Vocabulary,
                 max_expansions: int = MAX_EXPANSIONS) -> None:
        self.machine = machine
        self.rows = rows
        self.planner = planner
        self.max_expansions = max_expansions
        self.single_bytes = single_byte_tokens(vocab)
        grammar = machine.grammar
        read = np.asarray((np.asarray(grammar.own_classes) >= 0).any(axis=0))[grammar.byte_class]
        self.spells_every_byte = bool((self.single_bytes | ~read).all())
        self._vocab = vocab
        self._spellable: np.ndarray | None = None
        self._bounds: dict[int, int | None] = {}
        self.exact: dict[int, int] = {}
        self.lower: dict[int, int] = {}
        self._steps: dict[int, tuple[Step, ...]] = {}
        self._chains: dict[int, Step] = {}
        self.searches = 0
        self.expansions = 0
        self.bounded_answers = 0
        """Questions answered by the byte bound because a search gave up (0: every answer was exact)."""

    @cached_property
    def longest_token(self) -> int:
        """The longest token an output can hold (`longest_live_token`), found on the first search's first bound: a
        budget that never binds (most requests' first tokens) never pays its walk over the vocabulary's bytes."""
        return longest_live_token(self.machine.grammar, self._vocab)

    # ------------------------------------------------------------------ the graph

    def chain_step(self, after: int) -> Step:
        """1 + |φ(after)| and end(after) for the configuration a token reaches."""
        found = self._chains.get(after)
        if found is None:
            forced, end = self.planner.chain(after)
            count = len(self.planner.encode_segment(forced)) if forced else 0
            found = self._chains[after] = Step(1 + count, int(end))
        return found

    def steps(self, config: int) -> tuple[Step, ...]:
        """The token steps from `config`: the cheapest per distinct chain end."""
        found = self._steps.get(config)
        if found is None:
            successors = next_configurations(self.rows, config).tolist()
            best: dict[int, int] = {}
            for after in successors:
                step = self.chain_step(after)
                if step.end >= 0 and step.cost < best.get(step.end, UNREACHABLE):
                    best[step.end] = step.cost
            found = tuple(Step(cost, end) for end, cost in best.items())
            if len(self._steps) >= MAX_MEMO:
                self._steps.clear()
                self._chains.clear()
                self.lower.clear()
            self._steps[config] = found
        return found

    def byte_bound(self, config: int) -> int | None:
        """Proposition 2's need+ (bytes of the shortest completion one single-byte token at a time, forced chains
        split on their own), an upper bound on need; None where no such completion exists."""
        if self.spells_every_byte:
            bound = self.machine.need(config)
            return bound if bound < UNREACHABLE else None
        if config not in self._bounds:
            if len(self._bounds) >= MAX_MEMO:
                self._bounds.clear()
            self._bounds[config] = self._spelled_bound(config)
        return self._bounds[config]

    def _spelled_bound(self, config: int) -> int | None:
        """need+ over the bytes that are tokens of their own: the state's completion with the room left above the
        stack, plus each return state's with the room it has once popped (as `PushdownMachine.need`)."""
        if self._spellable is None:
            self._spellable = completions_over(self.machine.grammar, self.single_bytes)
        levels, cap = self._spellable, self.machine.max_depth
        state, stack = self.machine.configuration(config)
        total = int(levels[min(cap - len(stack), len(levels) - 1), state])
        for below, returned in enumerate(stack):
            total += int(levels[min(cap - below, len(levels) - 1), returned])
        return total if total < UNREACHABLE else None

    def _known(self, config: int) -> int | None:
        if self.machine.config_accepts(config):
            return 0
        return self.exact.get(config)

    def lower_bound(self, config: int) -> int:
        """A proven lower bound on need(config) of a configuration that does not accept: the search's own, or the
        shortest completion's bytes over the longest token that may spell them."""
        spread = -(-self.machine.need(config) // self.longest_token)
        return max(1, spread, self.lower.get(config, 1))

    # ------------------------------------------------------------------ questions

    def need_at(self, config: int) -> int:
        """need(config) (UNREACHABLE when no completion exists; the byte bound when a search gave up)."""
        known = self._known(config)
        if known is not None:
            return known
        try:
            found = self._search(config, None)
        except _GaveUp:
            self.bounded_answers += 1
            bound = self.byte_bound(config)
            return UNREACHABLE if bound is None else bound
        return UNREACHABLE if found is None else found

    def settled(self, config: int, limit: int) -> bool | None:
        """Whether need(config) <= limit where that is known without a search (a solved value, a byte bound within
        it, a lower bound above it: lower <= need <= byte bound, so at most one holds and the byte bound, cheaper on
        a new grammar, is asked first), else None."""
        if limit < 0:
            return False
        known = self._known(config)
        if known is not None:
            return known <= limit
        bound = self.byte_bound(config)
        if bound is not None and bound <= limit:
            return True
        if self.lower_bound(config) > limit:
            return False
        return None

    def within(self, config: int, limit: int, last_expansion: int | None = None) -> bool:
        """Whether need(config) <= limit (a search cut at `limit`; False when a search gives up or the solver's
        expansion count reaches `last_expansion`: refusing is sound)."""
        answer = self.settled(config, limit)
        if answer is not None:
            return answer
        try:
            if last_expansion is not None and self.expansions >= last_expansion:
                raise _GaveUp
            return self._search(config, limit, last_expansion) is not None
        except _GaveUp:
            self.bounded_answers += 1
            return False

    def _search(self, root: int, threshold: int | None, last_expansion: int | None = None) -> int | None:
        """A* from `root`: need(root), or None when it exceeds `threshold` (or no completion exists). Ties go to
        the configuration further from the root (its estimate leans on less of the heuristic)."""
        self.searches += 1
        stop = self.expansions + self.max_expansions
        if last_expansion is not None:
            stop = min(stop, last_expansion)
        cost_to = {root: 0}
        came_from: dict[int, tuple[int, int]] = {}
        heap = [(self.lower_bound(root), 0, root)]
        while heap:
            estimate, spent, config = heapq.heappop(heap)
            cost = -spent
            if cost > cost_to[config]:
                continue
            if threshold is not None and estimate > threshold:
                break
            known = self._known(config)
            if known is not None:
                if estimate == cost + known:
                    return self._solved(root, config, cost + known, cost_to, came_from)
                heapq.heappush(heap, (cost + known, -cost, config))
                continue
            if self.expansions >= stop:
                raise _GaveUp
            self.expansions += 1
            for step in self.steps(config):
                reached = cost + step.cost
                if reached >= cost_to.get(step.end, UNREACHABLE):
                    continue
                known = self._known(step.end)
                estimate = reached + (known if known is not None else self.lower_bound(step.end))
                if threshold is None or estimate <= threshold:
                    cost_to[step.end] = reached
                    came_from[step.end] = (config, step.cost)
                    heapq.heappush(heap, (estimate, -reached, step.end))
        bound = UNREACHABLE - 1 if threshold is None else threshold
        for config, cost in cost_to.items():
            self.lower[config] = max(self.lower.get(config, 1), bound + 1 - cost)
        return None

    def _solved(self, root: int, goal: int, total: int, cost_to: dict[int, int],
                came_from: dict[int, tuple[int, int]]) -> int:
        """Record what a search that found need(root) = total proves: exact values along the path, lower bounds."""
        for config, cost in cost_to.items():
            if config not in self.exact:
                self.lower[config] = max(self.lower.get(config, 1), total - cost)
        rest = total - cost_to[goal]
        config = goal
        while True:
            if config not in self.exact and not self.machine.config_accepts(config):
                self.exact[config] = rest
            if config == root:
                return total
            config, weight = came_from[config]
            rest += weight


class PushdownBudget:
    """The budget mask M_r on configurations (what a controller asks of a budget), from exact need.

    A token t at c is admitted with r tokens left iff 1 + |φ(c')| + need(end(c')) <= r. Far from the limit
    the byte bound of every successor fits and the mask is inactive without a search (cached per configuration).
    """

    def __init__(self, need: PushdownNeed, max_mask_expansions: int = MAX_MASK_EXPANSIONS) -> None:
        self.solver = need
        self.max_mask_expansions = max_mask_expansions
        self._largest: dict[int, int] = {}

    @property
    def nbytes(self) -> int:
        """An estimate of the memo's bytes (what `stdsl.caches` counts): `MEMO_ENTRY_NBYTES` per configuration
        remembered in each of the need, bound and chain tables, `MEMO_STEPS_NBYTES` per configuration's steps."""
        solver = self.solver
        entries = (len(self._largest) + len(solver.exact) + len(solver.lower) + len(solver._bounds)
                   + len(solver._chains))
        return entries * MEMO_ENTRY_NBYTES + len(solver._steps) * MEMO_STEPS_NBYTES

    @property
    def exact(self) -> bool:
        """Whether every answer so far was exact (no search gave up for the byte bound)."""
        return self.solver.bounded_answers == 0

    def need_at(self, config: int) -> int:
        """need(config)."""
        return self.solver.need_at(int(config))

    def fits(self, config: int, spent: int, remaining: int) -> bool:
        """Whether `spent` tokens plus need(config) fit in `remaining`."""
        return self.solver.within(int(config), remaining - spent)

    def through_fits(self, after: int, remaining: int) -> bool:
        """Whether a token that reaches `after` leaves a valid ending within `remaining` tokens (its own included)."""
        step = self.solver.chain_step(after)
        return self.solver.within(step.end, remaining - step.cost)

    def largest_bound(self, config: int) -> int | None:
        """The most 1 + |φ(c')| + need+(end(c')) over config's successors c' (None: no byte bound)."""
        found = self._largest.get(config)
        if found is None:
            solver = self.solver
            largest = 0
            for after in next_configurations(solver.rows, config).tolist():
                step = solver.chain_step(after)
                bound = solver.byte_bound(step.end)
                if bound is None:
                    return None
                largest = max(largest, step.cost + bound)
            if len(self._largest) >= MAX_MEMO:
                self._largest.clear()
            found = self._largest[config] = largest
        return found

    def admits_all_from(self, config: int) -> int | None:
        """The least `remaining` from which `admits` at `config` is None (every live token fits), where its bound is
        kept already (None: not found yet, or no byte bound)."""
        return self._largest.get(config)

    def admits(self, config: int, row: np.ndarray, remaining: int) -> np.ndarray | None:
        """Tokens after which a valid ending still fits in `remaining` tokens (None: every live token does).

        Tokens answered without a search come first, then searches, most promising first, until the mask's
        expansions (`max_mask_expansions`) run out: the rest are refused and counted in `bounded_answers`."""
        largest = self.largest_bound(int(config))
        if largest is not None and largest <= remaining:
            return None
        solver = self.solver
        last_expansion = solver.expansions + self.max_mask_expansions
        live = row >= 0
        configs, inverse = np.unique(row[live], return_inverse=True)
        steps = [solver.chain_step(c) for c in configs.tolist()]
        answers = [solver.settled(step.end, remaining - step.cost) for step in steps]
        open_ = sorted((i for i, a in enumerate(answers) if a is None),
                       key=lambda i: steps[i].cost + solver.lower_bound(steps[i].end))
        for i in open_:
            answers[i] = solver.within(steps[i].end, remaining - steps[i].cost, last_expansion)
        fits = np.array(answers, dtype=bool)
        if fits.all():
            return None
        out = np.zeros(row.shape, dtype=bool)
        out[live] = fits[inverse.reshape(-1)]
        return out
