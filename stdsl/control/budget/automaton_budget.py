"""Valid outputs under a token budget (Theorem 21): the shortest-completion table and the budget mask.

need(q) is the least number of emitted tokens (sampled or forced) that takes sampling state q
to acceptance under the table policy (a sampled token, then its whole forced chain split on its
own). A token t is admitted with r tokens left only if cost(q, t) = 1 + |φ(q')| + need(end(q')) ≤ r.

need is solved on demand, only over the states a question reaches, and a cheap upper bound on
it answers the common question (does every live token fit?) without solving anything: a new
grammar's first mask costs no step graph over all states.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from stdsl.compiler.automata.ops import step_edges
from stdsl.errors import BudgetError

UNREACHABLE = np.iinfo(np.int32).max // 4

Successors = Callable[[int], np.ndarray]
"""The distinct states one step (one token, or one byte token) after a state; empty when none."""


@dataclass(frozen=True)
class NeedBound:
    """An upper bound on need: `need[q]` ≥ need(q), and `through[q']` ≥ 1 + |φ(q')| + need(end(q'))."""

    need: np.ndarray
    through: np.ndarray


class BudgetTable:
    """need(q) by shortest paths over a step graph, solved on demand, and the budget mask M_r.

    `successors(q)` gives the states after q's steps: after its live tokens (the exact need), or
    after its bytes that are tokens themselves (an upper bound on need, since any path can be
    spelled one byte token at a time: still sound). `chain_count(q)` is |φ(q)| (tokens of q's
    forced chain), computed once per state when first needed, and `chain_end[q]` the state after it.
    A question about a state solves need on the states reachable from it that are not solved yet
    (Bellman–Ford rounds over their edges; accepting states are 0 and never expanded). `bound`, when
    given, decides admissions and feasibility whenever it already fits; the answers are those of need.
    """

    def __init__(
        self,
        accepting: np.ndarray,
        successors: Successors,
        chain_end: np.ndarray,
        chain_count: Callable[[int], int],
        bound: NeedBound | None = None,
    ) -> None:
        self.accepting = np.asarray(accepting, dtype=bool)
        self.chain_end = np.asarray(chain_end, dtype=np.int64)
        self.successors = successors
        self.chain_count = chain_count
        self.bound = bound
        num_states = self.accepting.shape[0]
        self._need = np.full(num_states, UNREACHABLE, dtype=np.int64)
        self._solved = np.zeros(num_states, dtype=bool)
        self._counts = np.full(num_states, -1, dtype=np.int64)
        self._largest_cost: dict[int, int] = {}
        self.rounds = 0
        """The most Bellman–Ford rounds one solve took (at most the states it solved, plus one)."""

    @property
    def num_states(self) -> int:
        """Number of automaton states."""
        return int(self.accepting.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the per-state arrays (need, solved, chain counts and ends, accepting); the successor graph is
        computed on demand and not kept here."""
        arrays = (self.accepting, self.chain_end, self._need, self._solved, self._counts)
        return sum(int(array.nbytes) for array in arrays)

    @property
    def solved_states(self) -> int:
        """How many states need has been solved for so far."""
        return int(np.count_nonzero(self._solved))

    # ------------------------------------------------------------------ need, solved on demand

    def need_at(self, state: int) -> int:
        """need(state), solving it (and what it depends on) on first use."""
        if not self._solved[state]:
            self._solve([state])
        return int(self._need[state])

    @property
    def need(self) -> np.ndarray:
        """need(q) for every state (solves them all: for oracles and device copies, not the decode path)."""
        self._solve(np.flatnonzero(~self._solved).tolist())
        return self._need

    @property
    def chain_tokens(self) -> np.ndarray:
        """|φ(q)| for every state (counts them all: for oracles and device copies)."""
        return self._chain_counts(np.arange(self.num_states))

    def _chain_counts(self, states: np.ndarray) -> np.ndarray:
        """|φ(q)| for each of `states`, counted once per state."""
        counts = self._counts
        for state in np.unique(states[counts[states] < 0]).tolist():
            counts[state] = self.chain_count(state)
        return counts[states]

    def _solve(self, roots: Iterable[int]) -> None:
        """Solve need on every unsolved state reachable from `roots`; solved states are constants."""
        solved = self._solved
        pending = [int(root) for root in roots if not solved[root]]
        seen = set(pending)
        sources: list[np.ndarray] = []
        targets: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        while pending:
            state = pending.pop()
            if self.accepting[state]:
                continue
            after = np.asarray(self.successors(state), dtype=np.int64)
            if after.size == 0:
                continue
            ends = self.chain_end[after]
            sources.append(np.full(after.shape[0], state, dtype=np.int64))
            targets.append(ends)
            weights.append(1 + self._chain_counts(after))
            for end in np.unique(ends).tolist():
                if not solved[end] and end not in seen:
                    seen.add(end)
                    pending.append(end)
        if not seen:
            return
        closure = np.fromiter(seen, dtype=np.int64, count=len(seen))
        need = self._need
        need[closure] = np.where(self.accepting[closure], 0, UNREACHABLE)
        if sources:
            self._relax(closure, np.concatenate(sources), np.concatenate(targets), np.concatenate(weights))
        solved[closure] = True

    def _relax(self, closure: np.ndarray, source: np.ndarray, dest: np.ndarray, weight: np.ndarray) -> None:
        """Least solution of need(q) = min over edges q→e of w + need(e) on `closure`."""
        self.rounds = max(self.rounds, relax(self._need, closure, source, dest, weight))

    # ------------------------------------------------------------------ questions the controller asks

    def through(self, states: np.ndarray) -> np.ndarray:
        """1 + |φ(q')| + need(end(q')) for each of `states` (UNREACHABLE when no ending exists)."""
        states = np.asarray(states, dtype=np.int64)
        ends = self.chain_end[states]
        unsolved = ends[~self._solved[ends]]
        if unsolved.size:
            self._solve(np.unique(unsolved).tolist())
        return np.minimum(1 + self._chain_counts(states) + self._need[ends], UNREACHABLE)

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
        limit: decided by the bound's costs when they fit, else by the costs themselves.
        """
        largest = self._largest_cost.get(state)
        if largest is None and self.bound is not None:
            targets = distinct_states(row[row >= 0], self.num_states)
            largest = int(self.bound.through[targets].max()) if targets.size else 0
            self._largest_cost[state] = largest
        if largest is not None and remaining >= largest:
            return None
        cost = self.cost(row)
        live = cost[row >= 0]
        largest = int(live.max()) if live.size else 0
        self._largest_cost[state] = largest
        return None if remaining >= largest else cost <= remaining

    def fits(self, state: int, spent: int, remaining: int) -> bool:
        """Whether `spent` tokens plus need(state) fit in `remaining` (the bound answers when it fits)."""
        if self.bound is not None and spent + int(self.bound.need[state]) <= min(remaining, UNREACHABLE - 1):
            return True
        need = self.need_at(state)
        return need < UNREACHABLE and spent + need <= remaining


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


def build_budget_table(
    table: np.ndarray,
    accepting: np.ndarray,
    chain_of: Callable[[int], tuple[int, int]],
) -> BudgetTable:
    """The budget table of an automaton from its token table and `chain_of(q) -> (|φ(q)|, end(q))`."""
    num_states = table.shape[0]
    chain_end = np.fromiter((chain_of(q)[1] for q in range(num_states)), dtype=np.int64, count=num_states)
    return BudgetTable(accepting, table_successors(table), chain_end, lambda q: chain_of(q)[0])


def check_feasible(least_tokens: int, max_tokens: int) -> None:
    """Raise BudgetError before decoding when no valid output fits in `max_tokens`."""
    if least_tokens >= UNREACHABLE:
        raise BudgetError("the constraint admits no output this tokenizer can spell")
    if least_tokens > max_tokens:
        raise BudgetError(
            f"no valid output fits in max_tokens={max_tokens}: the shortest valid output needs {least_tokens} tokens"
        )
