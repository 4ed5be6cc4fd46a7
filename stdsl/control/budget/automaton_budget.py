"""Valid outputs under a token budget (Theorem 21): the fewest tokens to an ending, and the budget mask.

need(q) is the least number of tokens that spell a path from q to acceptance: 0 at an accepting
state, else 1 + the least need(q') over q's live tokens t (q' = q after t). Forced bytes cost no
token of their own: the planner holds forced bytes back and merges them into the next sampled token
(after "ab" under "(ab|cd) (the|a) (cat|dog)s?", " the" spells the forced space and the next word),
and where its plan does not fit the controller holds the whole forced run back (`Controller`), so
every token counted here is one a decode can take. A token t is admitted with r tokens left only
if cost(q, t) = 1 + need(q') ≤ r.

need is never solved over all states on the decode path. Each state carries an interval lo ≤ need ≤ hi:
hi starts at the byte bound (`need_graphs.chain_bound`, shortest paths over single-byte tokens), lo at
1 outside acceptance. A question the interval cannot settle is
searched over token rows from the state asked, only as deep as the budget left, led by hi and pruned
by lo; what a search proves narrows the interval of every state it passed, and each state's
successors are walked once, so questions near the limit get cheaper as decoding goes on. On a large
automaton a question walks at most `MAX_QUESTION_ROWS` new rows (a few milliseconds each on a 49k
vocabulary); one that would need more is answered by hi (a token is refused, a need is reported from
above), as sound as the byte bound alone and never slower than a step can afford.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stdsl.compiler.automata.ops import step_edges
from stdsl.errors import BudgetError

UNREACHABLE = np.iinfo(np.int32).max // 4
MAX_QUESTION_ROWS = 8
"""New token rows one question (a fit, a budget mask, a least output) may walk before hi answers it."""

Successors = Callable[[int], np.ndarray]
"""The distinct states one step (one token, or one byte token) after a state; empty when none."""


@dataclass(frozen=True)
class NeedBound:
    """Upper bounds on need from the bytes alone: `need[q]` ≥ need(q) and `through[q']` ≥ 1 + need(q')."""

    need: np.ndarray
    through: np.ndarray


class BudgetTable:
    """need(q) over a step graph, searched on demand inside per-state bounds, and the budget mask M_r.

    `successors(q)` gives the distinct states q's live tokens reach (a state's row, walked once and
    kept as its distinct successors). `bound`, when given, starts every state's interval; without it
    hi starts unknown (UNREACHABLE) and every question is searched. `need` solves every state at once
    (for oracles and device copies, not the decode path).
    """

    def __init__(self, accepting: np.ndarray, successors: Successors, bound: NeedBound | None = None,
                 max_rows: int = MAX_QUESTION_ROWS) -> None:
        self.max_rows = max_rows
        self._rows_left = max_rows
        self.accepting = np.asarray(accepting, dtype=bool)
        self.successors = successors
        self.bound = bound
        self._lo = np.where(self.accepting, 0, 1).astype(np.int64)
        self._hi = np.where(self.accepting, 0, UNREACHABLE).astype(np.int64)
        if bound is not None:
            through = np.asarray(bound.through, dtype=np.int64)
            after_one = np.where(through >= UNREACHABLE, UNREACHABLE, np.maximum(through - 1, 0))
            self._hi = np.minimum(self._hi, np.minimum(np.asarray(bound.need, dtype=np.int64), after_one))
        self._after: dict[int, np.ndarray] = {}
        self._largest_cost: dict[int, int] = {}
        self.rounds = 0
        """Bellman–Ford rounds of the last whole solve (`need`; at most the states plus one)."""

    @property
    def num_states(self) -> int:
        """Number of automaton states."""
        return int(self.accepting.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the per-state intervals and accepting flags, and of the successors walked so far."""
        arrays = (self.accepting, self._lo, self._hi, *self._after.values())
        return sum(int(array.nbytes) for array in arrays)

    @property
    def expanded_states(self) -> int:
        """How many states' successors (token rows) have been walked so far."""
        return len(self._after)

    # ------------------------------------------------------------------ need, searched on demand

    def need_at(self, state: int) -> int:
        """need(state) exactly (UNREACHABLE when no ending exists): each search asks for one token fewer than the
        best ending known (found at once where the bound is close), until one fails and proves the rest."""
        lo, hi = self._lo, self._hi
        self._rows_left = self.max_rows
        try:
            while lo[state] < hi[state]:
                self._search(state, int(hi[state]) - 1)
        except _OutOfRows:
            return int(hi[state])
        return int(hi[state]) if lo[state] < UNREACHABLE else UNREACHABLE

    def within(self, state: int, limit: int) -> bool:
        """Whether need(state) ≤ `limit` (`_search`, with a question's rows; False where they run out)."""
        self._rows_left = self.max_rows
        return self._answer(state, limit)

    def _answer(self, state: int, limit: int) -> bool:
        """`_search` within the rows left to this question; False (hi's answer) where they run out."""
        try:
            return self._search(state, limit)
        except _OutOfRows:
            return False

    def _search(self, state: int, limit: int) -> bool:
        """Whether need(state) ≤ `limit`: settled by the state's interval, else searched from it over token rows.

        Best first by depth plus hi (an ending the bound already knows ends the search), no deeper than
        `limit`, skipping states whose lo leaves no room. A success caps hi along the path found; an
        exhausted search proves need(p) > limit - depth(p) for every state p it reached (lo rises), or
        that none of them ends at all when no state was skipped. `_OutOfRows` where the question's rows run out.
        """
        lo, hi = self._lo, self._hi
        if limit < 0 or lo[state] > limit:
            return False
        if hi[state] <= limit:
            return True
        depth = {state: 0}
        parent: dict[int, int] = {}
        frontier = [(int(hi[state]), 0, state)]
        skipped = False
        while frontier:
            _, spent, at = heapq.heappop(frontier)
            if spent != depth[at]:
                continue
            after = self._expand(at)
            step = spent + 1
            room = after[step + lo[after] <= limit]
            skipped = skipped or room.shape[0] < after.shape[0]
            if room.size == 0:
                continue
            ends = step + hi[room]
            if int(ends.min()) <= limit:
                best = int(room[int(ends.argmin())])
                parent[best] = at
                depth[best] = step
                self._cap_path(parent, depth, best, int(ends.min()))
                return True
            for nxt, through in zip(room.tolist(), ends.tolist(), strict=True):
                if step < depth.get(nxt, UNREACHABLE):
                    depth[nxt] = step
                    parent[nxt] = at
                    heapq.heappush(frontier, (through, step, nxt))
        reached = np.fromiter(depth.keys(), dtype=np.int64, count=len(depth))
        if skipped:
            spent_at = np.fromiter(depth.values(), dtype=np.int64, count=len(depth))
            lo[reached] = np.maximum(lo[reached], limit - spent_at + 1)
        else:
            lo[reached] = UNREACHABLE
        return False

    def _expand(self, state: int) -> np.ndarray:
        """The distinct successors of `state` (walked once), narrowing its interval by one step of need's
        equation."""
        after = self._after.get(state)
        if after is None:
            if self._rows_left <= 0:
                raise _OutOfRows
            self._rows_left -= 1
            after = self._after[state] = np.asarray(self.successors(state), dtype=np.int64)
        if not self.accepting[state]:
            if after.size == 0:
                self._lo[state] = UNREACHABLE
            else:
                self._hi[state] = min(int(self._hi[state]), min(UNREACHABLE, 1 + int(self._hi[after].min())))
                self._lo[state] = max(int(self._lo[state]), min(UNREACHABLE, 1 + int(self._lo[after].min())))
        return after

    def _cap_path(self, parent: dict[int, int], depth: dict[int, int], end: int, total: int) -> None:
        """hi along a path a search found: `total` tokens from its root, so total - depth(p) from each p on it."""
        at: int | None = end
        while at is not None:
            self._hi[at] = min(int(self._hi[at]), total - depth[at])
            at = parent.get(at)

    @property
    def need(self) -> np.ndarray:
        """need(q) for every state (`solve_all`)."""
        return self.solve_all()

    def solve_all(self) -> np.ndarray:
        """need(q) for every state: every state's successors walked, then Bellman–Ford rounds over them all."""
        states = np.arange(self.num_states)
        self._rows_left = UNREACHABLE
        afters = [self._expand(int(state)) for state in states]
        source = np.repeat(states, [after.shape[0] for after in afters]).astype(np.int64)
        dest = np.concatenate(afters).astype(np.int64) if afters else np.zeros(0, dtype=np.int64)
        keep = ~self.accepting[source]
        need = np.where(self.accepting, 0, UNREACHABLE).astype(np.int64)
        self.rounds = relax(need, np.flatnonzero(~self.accepting), source[keep], dest[keep], np.ones(int(keep.sum()),
                                                                                                    dtype=np.int64))
        self._lo, self._hi = need.copy(), need.copy()
        return need

    # ------------------------------------------------------------------ questions the controller asks

    def through(self, states: np.ndarray) -> np.ndarray:
        """1 + need(q') for each of `states` (UNREACHABLE when no ending exists)."""
        states = np.asarray(states, dtype=np.int64)
        unsettled = np.unique(states[self._lo[states] < self._hi[states]])
        if unsettled.size > self.num_states // 2:
            self.solve_all()
        for state in unsettled.tolist():
            self.need_at(state)
        return np.minimum(1 + np.where(self._lo[states] >= UNREACHABLE, UNREACHABLE, self._hi[states]), UNREACHABLE)

    def cost(self, row: np.ndarray) -> np.ndarray:
        """cost(q, t) for every token t given q's row of next states (UNREACHABLE where dead)."""
        live = row >= 0
        safe = np.where(live, row, 0).astype(np.int64)
        targets = distinct_states(row[live], self.num_states)
        through = np.full(self.num_states, UNREACHABLE, dtype=np.int64)
        through[targets] = self.through(targets)
        return np.where(live, through[safe], UNREACHABLE)

    def admits(self, state: int, row: np.ndarray, remaining: int) -> np.ndarray | None:
        """The budget mask M_r at `state`: tokens after which a valid ending still fits in `remaining` tokens.

        None when every live token's cost fits (the mask is inactive), the common case far from the
        limit, decided by hi; else each successor hi cannot settle is searched no deeper than `remaining` - 1.
        """
        largest = self._largest_cost.get(state)
        if largest is not None and remaining >= largest:
            return None
        live = row >= 0
        targets = distinct_states(row[live], self.num_states)
        largest = int(np.minimum(1 + self._hi[targets], UNREACHABLE).max()) if targets.size else 0
        self._largest_cost[state] = largest
        if remaining >= largest:
            return None
        fitting = np.zeros(self.num_states, dtype=bool)
        self._rows_left = self.max_rows
        for target in targets[np.argsort(self._hi[targets], kind="stable")].tolist():
            fitting[target] = self._answer(target, remaining - 1)
        return live & fitting[np.where(live, row, 0)]

    def admits_all_from(self, state: int) -> int | None:
        """The least `remaining` from which `admits` at `state` is None (every live token fits), once an `admits` there
        has found it (None before)."""
        return self._largest_cost.get(state)

    def fits(self, state: int, spent: int, remaining: int) -> bool:
        """Whether `spent` tokens plus need(state) fit in `remaining`."""
        return self.within(state, remaining - spent)


class _OutOfRows(Exception):
    """A question walked all the new rows it may (`MAX_QUESTION_ROWS`): hi answers it."""


def relax(need: np.ndarray, closure: np.ndarray, source: np.ndarray, dest: np.ndarray, weight: np.ndarray) -> int:
    """Bellman–Ford rounds of need(q) = min(need(q), min over edges q→e of w + need(e)) on `closure`, in place.

    Every edge's source is in `closure`; states outside it are constants. Returns the rounds taken
    (at most the closure's size plus one: weights are positive).
    """
    for rounds in range(1, closure.shape[0] + 2):
        through = np.minimum(weight + need[dest], UNREACHABLE)
        candidate = np.full(need.shape[0], UNREACHABLE, dtype=np.int64)
        np.minimum.at(candidate, source, through)
        updated = np.minimum(need[closure], candidate[closure])
        if np.array_equal(updated, need[closure]):
            return rounds
        need[closure] = updated
    return closure.shape[0] + 1


def distinct_states(states: np.ndarray, num_states: int) -> np.ndarray:
    """The distinct values of `states` (all in 0..num_states-1), sorted; linear in their number."""
    if states.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.bincount(states.astype(np.int64), minlength=num_states))


def table_successors(table: np.ndarray) -> Successors:
    """The successors of a (num_states, k) step table with -1 for dead steps (all distinct edges found once)."""
    source, dest = step_edges(table)
    starts = np.searchsorted(source, np.arange(table.shape[0] + 1))

    def successors(state: int) -> np.ndarray:
        return dest[starts[state] : starts[state + 1]]

    return successors


def build_budget_table(table: np.ndarray, accepting: np.ndarray) -> BudgetTable:
    """The budget table of an automaton from its whole token table."""
    return BudgetTable(accepting, table_successors(table))


def check_feasible(least_tokens: int, max_tokens: int) -> None:
    """Raise BudgetError before decoding when no valid output fits in `max_tokens`."""
    if least_tokens >= UNREACHABLE:
        raise BudgetError("the constraint admits no output this tokenizer can spell")
    if least_tokens > max_tokens:
        raise BudgetError(
            f"no valid output fits in max_tokens={max_tokens}: the shortest valid output needs {least_tokens} tokens"
        )
