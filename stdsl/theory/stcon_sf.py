"""The capped stack traversal (Theorem 8, Theorem 17): total deciders for STCON_sf, RootBudget and PairBudget.

A depth-first traversal of the tree of walks keeps only a stack of return points (a vertex and the
index of its next successor) and aborts once more nodes are entered than the total budget allows
(Lemma 1). Every traversal therefore stops, even on a cyclic graph, and the per-target recounts run
only after every traversal has bounded its tree, so a bad input cannot force a long recount.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stdsl.theory.graph import (
    Adjacency,
    GraphError,
    validate_adjacency,
    validate_bound,
    validate_vertex,
)


@dataclass(frozen=True)
class TraversalResult:
    """One capped traversal: whether it finished within its caps, nodes entered (root included), target hits."""

    completed: bool
    entered: int
    target_count: int


@dataclass(frozen=True)
class Decision:
    """A decider's answer with the reason and its work counters (node cap per traversal, nodes entered)."""

    accepted: bool
    reason: str
    node_cap: int
    traversals: int
    max_entered: int
    total_entered: int


class _Meter:
    """Accumulates the entered-node counters of the traversals one decision runs."""

    def __init__(self, node_cap: int) -> None:
        self.node_cap = node_cap
        self.traversals = 0
        self.max_entered = 0
        self.total_entered = 0

    def run(
        self, graph: list[list[int]], source: int, target: int | None = None, target_cap: int = 0
    ) -> TraversalResult:
        result = capped_traversal(graph, source, self.node_cap, target, target_cap)
        self.traversals += 1
        self.max_entered = max(self.max_entered, result.entered)
        self.total_entered += result.entered
        return result

    def decide(self, accepted: bool, reason: str) -> Decision:
        return Decision(accepted, reason, self.node_cap, self.traversals, self.max_entered, self.total_entered)


def capped_traversal(
    graph: list[list[int]],
    source: int,
    node_cap: int,
    target: int | None = None,
    target_cap: int = 0,
) -> TraversalResult:
    """Depth-first traversal of the walk tree from `source` (Algorithm 3), aborting on node `node_cap`+1.

    In target mode it also counts the entered nodes that end at `target` and aborts at `target_cap`+1.
    The stack holds (vertex, index of next successor) frames; the node cap also bounds its depth.
    """
    current, next_index = source, 0
    stack: list[tuple[int, int]] = []
    entered = 1
    target_count = 1 if source == target else 0
    if entered > node_cap or (target is not None and target_count > target_cap):
        return TraversalResult(False, entered, target_count)
    while True:
        successors = graph[current]
        if next_index >= len(successors):
            if not stack:
                return TraversalResult(True, entered, target_count)
            current, next_index = stack.pop()
            continue
        child = successors[next_index]
        stack.append((current, next_index + 1))
        current, next_index = child, 0
        entered += 1
        if entered > node_cap:
            return TraversalResult(False, entered, target_count)
        if target is not None and current == target:
            target_count += 1
            if target_count > target_cap:
                return TraversalResult(False, entered, target_count)


def decide_stcon_sf(adjacency: Adjacency, s: int, t: int, k: int) -> Decision:
    """Theorem 8: accept iff the graph is k-strongly few (at most k walks between every ordered pair) and s reaches t.

    Every vertex is a source, so a directed cycle anywhere (not only one reachable from s) rejects:
    a vertex on a cycle has infinitely many walks to itself.
    """
    graph = validate_adjacency(adjacency)
    n = len(graph)
    s = validate_vertex("s", s, n)
    t = validate_vertex("t", t, n)
    k = validate_bound("k", k, 1)
    meter = _Meter(n * k)
    for a in range(n):
        if not meter.run(graph, a).completed:
            return meter.decide(
                False,
                f"the walk tree from {a} has more than n*k = {n * k} nodes: a directed cycle or more than k walks",
            )
    st_count = 0
    for a in range(n):
        for b in range(n):
            result = meter.run(graph, a, b, k)
            if not result.completed:
                return meter.decide(False, f"more than k = {k} walks from {a} to {b}")
            if (a, b) == (s, t):
                st_count = result.target_count
    if st_count == 0:
        return meter.decide(False, f"{s} does not reach {t}")
    return meter.decide(True, f"{k}-strongly few with {st_count} walk(s) from {s} to {t}")


def stcon_sf(adjacency: Adjacency, s: int, t: int, k: int) -> bool:
    """Whether `adjacency` is k-strongly few and s reaches t (total: rejects cycles and many-walk graphs)."""
    return decide_stcon_sf(adjacency, s, t, k).accepted


def decide_root_budget(adjacency: Adjacency, root: int, budgets: Sequence[int], finals: Iterable[int]) -> Decision:
    """Theorem 17 (RootBudget): accept iff N(root, q) <= budgets[q] for every q and N(root, f) >= 1 for some final f.

    One traversal capped at the total budget B = sum(budgets) bounds the walk tree (Lemma 1), then one
    recount per vertex compares its exact count with its budget.
    """
    graph = validate_adjacency(adjacency)
    n = len(graph)
    root = validate_vertex("root", root, n)
    if len(budgets) != n:
        raise GraphError(f"budgets has {len(budgets)} entries for {n} vertices")
    kappa = [validate_bound(f"budgets[{q}]", b, 0) for q, b in enumerate(budgets)]
    final_set = {validate_vertex("final vertex", f, n) for f in finals}
    total = sum(kappa)
    meter = _Meter(total)
    if total == 0:
        return meter.decide(False, "the total budget is 0")
    if not meter.run(graph, root).completed:
        return meter.decide(
            False, f"the walk tree from {root} has more than B = {total} nodes, so some count exceeds its budget"
        )
    reached_final = False
    for q in range(n):
        result = meter.run(graph, root, q, kappa[q])
        if not result.completed:
            return meter.decide(False, f"more than {kappa[q]} walks from {root} to {q}")
        reached_final = reached_final or (q in final_set and result.target_count >= 1)
    if not reached_final:
        return meter.decide(False, f"{root} reaches no final vertex")
    return meter.decide(True, "every count is within its budget and a final vertex is reached")


def root_budget(adjacency: Adjacency, root: int, budgets: Sequence[int], finals: Iterable[int]) -> bool:
    """Whether every walk count from `root` is within its vertex budget and some final vertex is reached."""
    return decide_root_budget(adjacency, root, budgets, finals).accepted


def universal_source(graph: list[list[int]]) -> list[list[int]]:
    """Lemma 2's graph U(G): root 0 and a copy (a, v) -> 1 + a*n + v of G per source a, entered at (a, a)."""
    n = len(graph)
    universal: list[list[int]] = [[1 + a * n + a for a in range(n)]]
    for a in range(n):
        for u in range(n):
            universal.append([1 + a * n + v for v in graph[u]])
    return universal


def decide_pair_budget(adjacency: Adjacency, budgets: Sequence[Sequence[int]], s: int, t: int) -> Decision:
    """PairBudget (Theorem 3): accept iff N(u, v) <= budgets[u][v] for all pairs and N(s, t) >= 1.

    Reduces to RootBudget on the universal source U(G) (Lemma 2), budget 1 at its root.
    """
    graph = validate_adjacency(adjacency)
    n = len(graph)
    s = validate_vertex("s", s, n)
    t = validate_vertex("t", t, n)
    if len(budgets) != n or any(len(row) != n for row in budgets):
        raise GraphError(f"budgets must be an {n}x{n} matrix")
    kappa = [1] + [validate_bound(f"budgets[{a}][{v}]", budgets[a][v], 0) for a in range(n) for v in range(n)]
    return decide_root_budget(universal_source(graph), 0, kappa, [1 + s * n + t])


def pair_budget(adjacency: Adjacency, budgets: Sequence[Sequence[int]], s: int, t: int) -> bool:
    """Whether every pair's walk count is within its budget and s reaches t."""
    return decide_pair_budget(adjacency, budgets, s, t).accepted
