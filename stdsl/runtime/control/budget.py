"""Valid outputs under a token budget (Theorem 21): the shortest-completion table and the budget mask.

need(q) is the least number of emitted tokens (sampled or forced) that takes sampling state q
to acceptance under the table policy (a sampled token, then its whole forced chain split on its
own). A token t is admitted with r tokens left only if cost(q, t) = 1 + |φ(q')| + need(end(q')) ≤ r.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stdsl.compiler.automata.ops import step_edges
from stdsl.errors import BudgetError

UNREACHABLE = np.iinfo(np.int32).max // 4


class BudgetTable:
    """need(q) for every automaton state, by vectorized Bellman–Ford over a step graph.

    `table` is a (num_states, k) step table with -1 for dead steps: the all-state token table
    (exact need), or the byte table restricted to bytes that are tokens themselves (an upper
    bound on need, since any path can be spelled one byte token at a time: still sound).
    `chain_tokens[q]` is |φ(q)| (tokens of q's forced chain) and `chain_end[q]` the state after it.
    """

    def __init__(
        self,
        table: np.ndarray,
        accepting: np.ndarray,
        chain_tokens: np.ndarray,
        chain_end: np.ndarray,
    ) -> None:
        num_states = table.shape[0]
        self.accepting = np.asarray(accepting, dtype=bool)
        self.chain_tokens = np.asarray(chain_tokens, dtype=np.int64)
        self.chain_end = np.asarray(chain_end, dtype=np.int64)
        source, dest = step_edges(table)
        self.rounds = 0
        self.need = self._bellman_ford(num_states, source, dest)
        self._largest_cost: dict[int, int] = {}

    def _bellman_ford(self, num_states: int, source: np.ndarray, dest: np.ndarray) -> np.ndarray:
        """Least solution of need(q) = min over edges q→q' of 1 + |φ(q')| + need(end(q')); 0 on accepting states."""
        need = np.full(num_states, UNREACHABLE, dtype=np.int64)
        need[self.accepting] = 0
        for _ in range(num_states + 1):
            self.rounds += 1
            through = np.minimum(1 + self.chain_tokens + need[self.chain_end], UNREACHABLE)
            candidate = np.full(num_states, UNREACHABLE, dtype=np.int64)
            np.minimum.at(candidate, source, through[dest])
            updated = np.where(self.accepting, 0, np.minimum(need, candidate))
            if np.array_equal(updated, need):
                break
            need = updated
        return need

    def cost(self, row: np.ndarray) -> np.ndarray:
        """cost(q, t) for every token t given q's row of next states (UNREACHABLE where dead)."""
        live = row >= 0
        safe = np.where(live, row, 0).astype(np.int64)
        through = 1 + self.chain_tokens[safe] + self.need[self.chain_end[safe]]
        return np.where(live, np.minimum(through, UNREACHABLE), UNREACHABLE)

    def admits(self, state: int, row: np.ndarray, remaining: int) -> np.ndarray | None:
        """The budget mask M_r at `state`: tokens after which a valid ending still fits in `remaining` tokens.

        None when the mask is inactive (every live token's cost fits), the common case far from the limit.
        """
        largest = self._largest_cost.get(state)
        if largest is not None and remaining >= largest:
            return None
        cost = self.cost(row)
        finite = cost[cost < UNREACHABLE]
        self._largest_cost[state] = int(finite.max()) if finite.size else 0
        return cost <= remaining


def build_budget_table(
    table: np.ndarray,
    accepting: np.ndarray,
    chain_of: Callable[[int], tuple[int, int]],
) -> BudgetTable:
    """The budget table of an automaton from its token table and `chain_of(q) -> (|φ(q)|, end(q))`."""
    num_states = table.shape[0]
    pairs = [chain_of(q) for q in range(num_states)]
    chain_tokens = np.array([p[0] for p in pairs], dtype=np.int64)
    chain_end = np.array([p[1] for p in pairs], dtype=np.int64)
    return BudgetTable(table, accepting, chain_tokens, chain_end)


def check_feasible(least_tokens: int, max_tokens: int) -> None:
    """Raise BudgetError before decoding when no valid output fits in `max_tokens`."""
    if least_tokens >= UNREACHABLE:
        raise BudgetError("the constraint admits no output this tokenizer can spell")
    if least_tokens > max_tokens:
        raise BudgetError(
            f"no valid output fits in max_tokens={max_tokens}: the shortest valid output needs {least_tokens} tokens"
        )
