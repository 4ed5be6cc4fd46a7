"""Shortest completion lengths (bn, bn_within) against a plain round-by-round fixed point on random grammars."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.state_graph import predecessor_lists, successor_lists
from stdsl.compiler.pushdown import completion_graph
from stdsl.compiler.pushdown.completion_graph import UNREACHABLE, CompletionGraph
from stdsl.compiler.pushdown.grammar import (
    Definition,
    PushdownGrammar,
    call_symbol,
    compile_pushdown,
)
from tests.compiler.pushdown.random_grammars import grammars as random_grammars


def oracle_levels(grammar: PushdownGrammar, call_cost: list[int]) -> list[int]:
    """Fewest bytes from each state to acceptance, a call edge costing `call_cost[e]`: relax every move until stable."""
    num = grammar.num_states
    dist = [0 if grammar.accepting[q] else UNREACHABLE for q in range(num)]
    moves = [(q, int(t)) for q in range(num) for t in set(grammar.byte_table[q].tolist()) if t >= 0]
    calls = list(zip(grammar.call_state.tolist(), grammar.call_return.tolist(), call_cost))
    changed = True
    while changed:
        changed = False
        for q, t in moves:
            if dist[t] + 1 < dist[q]:
                dist[q], changed = dist[t] + 1, True
        for q, r, cost in calls:
            if cost + dist[r] < dist[q]:
                dist[q], changed = cost + dist[r], True
    return dist


def oracle(grammar: PushdownGrammar) -> tuple[list[list[int]], list[int]]:
    """bn_d for d = 0, 1, ... until it repeats (at most max_depth + 1 levels), and bn (the levels' limit)."""
    starts = grammar.starts[grammar.call_callee].tolist()
    levels: list[list[int]] = []
    level = oracle_levels(grammar, [UNREACHABLE] * len(starts))
    while True:
        if levels and level == levels[-1]:
            break
        if len(levels) <= grammar.max_depth:
            levels.append(level)
        deeper = oracle_levels(grammar, [level[s] for s in starts])
        if deeper == level and len(levels) > grammar.max_depth:
            break
        level = deeper
    return levels, level


def grammars() -> st.SearchStrategy[PushdownGrammar | None]:
    """Random grammars over the leaves x and yz, the last definition also entered after e."""
    return random_grammars([ir.literal("x"), ir.literal("yz")], [ir.literal("e")])


@settings(max_examples=150, deadline=None)
@given(grammars())
def test_completion_lengths_match_fixed_point(grammar: PushdownGrammar | None) -> None:
    if grammar is None:
        return
    levels, limit = oracle(grammar)
    assert grammar.bn_within.tolist() == levels
    assert grammar.bn.tolist() == limit


@settings(max_examples=100, deadline=None)
@given(grammars())
def test_bucketed_and_listed_searches_agree(grammar: PushdownGrammar | None) -> None:
    """Large grammars take the bucketed search, small ones the listed one: both give every level alike."""
    if grammar is None:
        return
    graph = CompletionGraph(grammar)
    starts = graph.callee_starts
    for level in grammar.bn_within:
        for cost in (np.full(len(starts), UNREACHABLE, dtype=np.int64), level[starts]):
            assert graph._shortest_bucketed(cost).tolist() == graph._shortest_listed(cost).tolist()


@settings(max_examples=100, deadline=None)
@given(grammars(), st.integers(1, 4), st.integers(1, 3))
def test_buckets_handing_over_to_the_heap_give_the_same_distances(grammar: PushdownGrammar | None, rounds: int,
                                                                   frontier: int) -> None:
    """The bucketed search handing a narrow search over to the heap after a few rounds ends where either alone does."""
    if grammar is None:
        return
    graph = CompletionGraph(grammar)
    starts = graph.callee_starts
    kept = completion_graph.NARROW_ROUNDS, completion_graph.NARROW_FRONTIER
    completion_graph.NARROW_ROUNDS, completion_graph.NARROW_FRONTIER = rounds, frontier
    try:
        for level in grammar.bn_within:
            for cost in (np.full(len(starts), UNREACHABLE, dtype=np.int64), level[starts]):
                assert graph._shortest_bucketed(cost).tolist() == graph._shortest_listed(cost).tolist()
    finally:
        completion_graph.NARROW_ROUNDS, completion_graph.NARROW_FRONTIER = kept


@settings(max_examples=100, deadline=None)
@given(grammars())
def test_a_level_continued_from_the_one_before_is_a_whole_search(grammar: PushdownGrammar | None) -> None:
    """Each level of `bn_within` is searched on from the level before it (through the calls that became cheaper)
    and the first without calls breadth-first: both are the full heap search's distances."""
    if grammar is None:
        return
    graph = CompletionGraph(grammar)
    none = np.full(len(graph.callers), UNREACHABLE, dtype=np.int64)
    assert graph.shortest(none).tolist() == graph._shortest_listed(none).tolist()
    before = (grammar.bn_within[0], none)
    for level in grammar.bn_within:
        cost = level[graph.callee_starts]
        assert graph.shortest(cost, before).tolist() == graph._shortest_listed(cost).tolist()
        before = (graph._shortest_listed(cost), cost)


@settings(max_examples=100, deadline=None)
@given(grammars(), st.integers(1, 4), st.integers(1, 3))
def test_a_bucketed_level_continued_from_the_one_before_is_a_whole_search(
        grammar: PushdownGrammar | None, rounds: int, frontier: int) -> None:
    """A large grammar's bucketed search goes on from the level before it too (from the callers of the calls that
    became cheaper), handing a narrow search over to the heap or not: every level is the full heap search's."""
    if grammar is None:
        return
    graph = CompletionGraph(grammar)
    none = np.full(len(graph.callers), UNREACHABLE, dtype=np.int64)
    kept = completion_graph.NARROW_ROUNDS, completion_graph.NARROW_FRONTIER
    completion_graph.NARROW_ROUNDS, completion_graph.NARROW_FRONTIER = rounds, frontier
    try:
        before = (graph._shortest_listed(none), none)
        for level in grammar.bn_within:
            cost = level[graph.callee_starts]
            expected = graph._shortest_listed(cost).tolist()
            if (cost <= before[1]).all():
                assert graph._shortest_bucketed(cost, before).tolist() == expected
            assert graph._shortest_bucketed(cost).tolist() == expected
            before = (np.array(expected, dtype=np.int64), cost)
    finally:
        completion_graph.NARROW_ROUNDS, completion_graph.NARROW_FRONTIER = kept


def test_a_large_grammar_goes_on_from_a_level_that_took_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `SMALL_GRAPH_STATES` a level is searched on from the level before it where that one took some call (and
    no call costs more now); the level after the one without calls is searched whole.  Either way the levels are
    those a small graph's searches give."""
    expected_levels = _nested_grammar().bn_within.tolist()
    going_on: list[bool] = []
    original = CompletionGraph._shortest_bucketed

    def recorded(self: CompletionGraph, cost: np.ndarray, after: object = None) -> np.ndarray:
        going_on.append(after is not None)
        return original(self, cost, after)  # type: ignore[arg-type]

    monkeypatch.setattr(completion_graph, "SMALL_GRAPH_STATES", 0)
    monkeypatch.setattr(CompletionGraph, "_shortest_bucketed", recorded)
    grammar = _nested_grammar()
    assert grammar.bn_within.tolist() == expected_levels and len(expected_levels) >= 3
    assert going_on[:2] == [False, False] and any(going_on[2:])


def _nested_grammar() -> PushdownGrammar:
    """A grammar whose completions shorten over three levels: A is ten a's or (B), B is b or [A]."""
    a_body = ir.alt(ir.literal("a" * 10), ir.seq(ir.literal("("), call_symbol(1), ir.literal(")")))
    b_body = ir.alt(ir.literal("b"), ir.seq(ir.literal("["), call_symbol(0), ir.literal("]")))
    return compile_pushdown(ir.seq(ir.literal("x"), call_symbol(0)), [Definition("A", a_body), Definition("B", b_body)])


@settings(max_examples=100, deadline=None)
@given(grammars())
def test_the_grammar_reads_its_successors_once_for_the_graph_and_its_live_states(grammar: PushdownGrammar | None
                                                                                 ) -> None:
    """The successor lists the grammar lists once give the completion graph the predecessors a search of its table
    gives, and `has_successor` is a live own move or a call, as read off the table."""
    if grammar is None:
        return
    expected = (grammar.own_classes >= 0).any(axis=1)
    expected[grammar.call_state] = True
    assert grammar.has_successor.dtype == bool and np.array_equal(grammar.has_successor, expected)
    given_lists = CompletionGraph(grammar, successors=successor_lists(grammar.own_classes)).before
    searched = predecessor_lists(grammar.own_classes)
    assert all(np.array_equal(got, want) for got, want in zip(given_lists, searched))
