"""Shortest completions over a pushdown grammar's moves reversed: per state, the fewest bytes to acceptance when
a call edge costs its callee's own completion (the searches behind `bn` and `bn_within`, `pushdown.grammar`)."""

from __future__ import annotations

import heapq
from typing import Protocol

import numpy as np

from stdsl.compiler.automata.state_graph import csr_gather, distinct_values, predecessor_lists, reversed_lists
from stdsl.compiler.deadline import check_deadline

UNREACHABLE = np.iinfo(np.int64).max // 4


class GrammarMoves(Protocol):
    """What a completion graph reads of a grammar (`pushdown.grammar.PushdownGrammar`)."""

    @property
    def num_states(self) -> int: ...
    @property
    def accepting(self) -> np.ndarray: ...
    @property
    def starts(self) -> np.ndarray: ...
    @property
    def own_classes(self) -> np.ndarray: ...
    @property
    def call_state(self) -> np.ndarray: ...
    @property
    def call_callee(self) -> np.ndarray: ...
    @property
    def call_return(self) -> np.ndarray: ...


SMALL_GRAPH_STATES = 2000
"""Below this many states shortest completions run as a heap Dijkstra over lists (numpy calls would cost more
than the moves); above, as Dial's buckets, each settled with a few numpy calls."""
NARROW_ROUNDS = 64
NARROW_FRONTIER = 32
"""Dial's buckets hand the search over to the heap once `NARROW_ROUNDS` rounds have settled fewer than
`NARROW_FRONTIER` states a round on average: a graph of long chains (a long string's states) has one distance
per state, and a round's numpy calls cost more than its few moves (Github_hard---o16060: 0.42 -> 0.12 s)."""


class CompletionGraph:
    """The moves of a grammar reversed, for shortest completions: a byte move costs 1, a call edge from its
    caller to its return state costs the callee's own completion (given per call).  `moves` is some of the grammar's
    own moves over byte classes (only which state moves to which matters); None: all of them, whose successor lists
    (`state_graph.successor_lists` of `own_classes`) are `successors` where the grammar has them already."""

    def __init__(self, grammar: GrammarMoves, moves: np.ndarray | None = None,
                 successors: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        num = grammar.num_states
        self.num_states = num
        self.accepting = np.flatnonzero(grammar.accepting)
        self.callee_starts = grammar.starts[grammar.call_callee].astype(np.int64)
        self.callers = grammar.call_state.astype(np.int64)
        self.returns = grammar.call_return.astype(np.int64)
        self.before = (reversed_lists(*successors) if moves is None and successors is not None
                       else predecessor_lists(grammar.own_classes if moves is None else moves))
        self.calls_returning = _grouped(grammar.call_return.astype(np.int64),
                                        np.arange(len(grammar.call_state), dtype=np.int64), num)
        self._lists: tuple[list[int], list[int], list[int], list[int], list[int]] | None = None

    def shortest(self, call_cost: np.ndarray, after: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Per state, the fewest bytes to an accepting state, a call edge e costing `call_cost[e]` (UNREACHABLE:
        not taken): Dijkstra from the accepting states along the reversed moves (a breadth-first search where no
        call can be taken).  `after` is a search already made
        (its distances and call costs): where no call costs more now, its distances are still reachable, so the
        search goes on from them through the calls that became cheaper (a level of `bn_within` from the one before
        it, which usually differs in a few states: 27 of sp_371's 100,000).  A large graph's search goes on only
        from a search that took some call: the first level with calls differs from the one without in many (10,000
        of sp_371's), which a whole search settles faster."""
        if self.num_states >= SMALL_GRAPH_STATES:
            going_on = after is not None and bool((call_cost <= after[1]).all() and (after[1] < UNREACHABLE).any())
            return self._shortest_bucketed(call_cost, after if going_on else None)
        if not (call_cost < UNREACHABLE).any():
            return self._byte_distances()
        if after is None or not (call_cost <= after[1]).all():
            return self._shortest_listed(call_cost)
        known, known_cost = after
        dist_list = known.tolist()
        heap: list[tuple[int, int]] = []
        cheaper = np.flatnonzero(call_cost < known_cost)
        for caller, back, cost in zip(self.callers[cheaper].tolist(), self.returns[cheaper].tolist(),
                                      call_cost[cheaper].tolist()):
            through = dist_list[back] + cost
            if through < dist_list[caller] and through < UNREACHABLE:
                dist_list[caller] = through
                heap.append((through, caller))
        return self._shortest_listed(call_cost, dist_list, heap)

    def _listed(self) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
        """`before` and `calls_returning` (CSR cuts and values) and `callers` as lists, made on first use."""
        if self._lists is None:
            self._lists = (self.before[0].tolist(), self.before[1].tolist(), self.calls_returning[0].tolist(),
                           self.calls_returning[1].tolist(), self.callers.tolist())
        return self._lists

    def _byte_distances(self) -> np.ndarray:
        """`shortest` where no call can be taken: breadth-first from the accepting states along reversed byte moves."""
        before_cuts, before = self._listed()[:2]
        dist = [UNREACHABLE] * self.num_states
        queue = self.accepting.tolist()
        for state in queue:
            dist[state] = 0
        for state in queue:
            step = dist[state] + 1
            for source in before[before_cuts[state]:before_cuts[state + 1]]:
                if dist[source] == UNREACHABLE:
                    dist[source] = step
                    queue.append(source)
        return np.array(dist, dtype=np.int64)

    def _shortest_listed(self, call_cost: np.ndarray, dist: list[int] | None = None,
                         heap: list[tuple[int, int]] | None = None) -> np.ndarray:
        """`shortest` with a heap of states, over Python lists; from the accepting states, or continuing a search
        given its distances so far and its (distance, state) entries not yet settled."""
        if dist is None or heap is None:
            accepting = self.accepting.tolist()
            dist = [UNREACHABLE] * self.num_states
            for state in accepting:
                dist[state] = 0
            heap = [(0, state) for state in accepting]
        heapq.heapify(heap)
        costs = call_cost.tolist()
        before_cuts, before, returning_cuts, returning, callers = self._listed()
        while heap:
            level, state = heapq.heappop(heap)
            if level != dist[state]:
                continue
            step = level + 1
            for source in before[before_cuts[state]:before_cuts[state + 1]]:
                if step < dist[source]:
                    dist[source] = step
                    heapq.heappush(heap, (step, source))
            for edge in returning[returning_cuts[state]:returning_cuts[state + 1]]:
                through = level + costs[edge]
                caller = callers[edge]
                if through < dist[caller] and through < UNREACHABLE:
                    dist[caller] = through
                    heapq.heappush(heap, (through, caller))
        return np.array(dist, dtype=np.int64)

    def _shortest_bucketed(self, call_cost: np.ndarray, after: tuple[np.ndarray, np.ndarray] | None = None
                           ) -> np.ndarray:
        """`shortest` with one bucket per distance, each settled as one numpy step (Dial's algorithm); from the
        accepting states, or going on from a search `after` whose call costs are nowhere lower (`shortest`), from
        the callers the cheaper calls bring closer.  Going on that turns narrow starts afresh instead: a long chain
        of closer states (sp_371: 10,000 along its strings) is settled faster by a whole search than by the heap.
        Where no call can be taken (every cost UNREACHABLE: `bn_within`'s first level) no call edge is read."""
        settled = np.zeros(self.num_states, dtype=bool)
        buckets: dict[int, list[np.ndarray]] = {}
        pending: list[int] = []
        if after is None:
            dist = np.full(self.num_states, UNREACHABLE, dtype=np.int64)
            dist[self.accepting] = 0
            _push(buckets, pending, 0, self.accepting)
        else:
            dist = after[0].copy()
            cheaper = np.flatnonzero(call_cost < after[1])
            self._relax_calls(dist, buckets, pending, cheaper, dist[self.returns[cheaper]], call_cost)
        rounds = settled_count = 0
        calls_taken = bool((call_cost < UNREACHABLE).any())
        while pending:
            rounds += 1
            if rounds & 255 == 0:
                check_deadline("the pushdown completion lengths")
            level = heapq.heappop(pending)
            frontier = distinct_values(np.concatenate(buckets.pop(level)))
            frontier = frontier[~settled[frontier] & (dist[frontier] == level)]
            if not frontier.size:
                continue
            if rounds >= NARROW_ROUNDS and settled_count < rounds * NARROW_FRONTIER:
                if after is not None:
                    return self._shortest_bucketed(call_cost)
                waiting = [(level, state) for state in frontier.tolist()]
                waiting += [(at, state) for at, parts in buckets.items() for part in parts for state in part.tolist()]
                return self._shortest_listed(call_cost, dist.tolist(), waiting)
            settled[frontier] = True
            settled_count += frontier.size
            before = csr_gather(*self.before, frontier)
            before = before[dist[before] > level + 1]
            if before.size:
                dist[before] = level + 1
                _push(buckets, pending, level + 1, before)
            edges = csr_gather(*self.calls_returning, frontier) if calls_taken else frontier[:0]
            if edges.size:
                self._relax_calls(dist, buckets, pending, edges, np.full(len(edges), level, dtype=np.int64), call_cost)
        return dist

    def _relax_calls(self, dist: np.ndarray, buckets: dict[int, list[np.ndarray]], pending: list[int],
                     edges: np.ndarray, returned: np.ndarray, call_cost: np.ndarray) -> None:
        """Lower each caller of `edges` to its return state's distance (`returned`, per edge) plus the call's cost
        where that is shorter (and reachable), into the bucket of its new distance."""
        costs = np.minimum(returned + call_cost[edges], UNREACHABLE)
        callers = self.callers[edges]
        better = costs < dist[callers]
        callers, costs = callers[better], costs[better]
        np.minimum.at(dist, callers, costs)
        for cost in distinct_values(costs).tolist():
            _push(buckets, pending, cost, callers[costs == cost])


def _push(buckets: dict[int, list[np.ndarray]], pending: list[int], level: int, states: np.ndarray) -> None:
    """Put `states` in the bucket of distance `level`, opening it if new."""
    found = buckets.get(level)
    if found is None:
        buckets[level] = [states]
        heapq.heappush(pending, level)
    else:
        found.append(states)


def _grouped(keys: np.ndarray, values: np.ndarray, num: int) -> tuple[np.ndarray, np.ndarray]:
    """`values` grouped by `keys` in 0..num-1, as CSR arrays (indptr, values)."""
    order = np.argsort(keys, kind="stable")
    indptr = np.zeros(num + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=num), out=indptr[1:])
    return indptr, values[order].astype(np.int64)
