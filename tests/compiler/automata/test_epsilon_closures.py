"""Epsilon closures found once per state in Tarjan's order: equal to a search from each state, in any query order,
and the subset construction over them numbers and moves exactly as over the searched ones."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata import determinize as determinize_module
from stdsl.compiler.automata import epsilon_closures
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.epsilon_closures import EpsilonClosures
from stdsl.compiler.automata.nfa import NFA, build_nfa
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import StateBudgetError
from tests.compiler.generated_regexes import quantified_regexes


def searched_closure(nfa: NFA, state: int) -> frozenset[int]:
    """The important states (byte edges, or accepting) that `state` reaches by epsilon moves, by a plain search."""
    seen, stack = {state}, [state]
    while stack:
        for target in nfa.eps[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return frozenset(s for s in seen if nfa.edges[s] or s == nfa.accept)


@st.composite
def epsilon_graphs(draw: st.DrawFn) -> tuple[NFA, list[int]]:
    """An NFA whose epsilon moves form any graph (cycles, self-loops, chains, shared targets; states without them
    hold `()` as the builder's do), and an order of states to ask for closures in."""
    count = draw(st.integers(1, 14))
    state = st.integers(0, count - 1)
    eps = [list(targets) if targets else () for targets in
           draw(st.lists(st.lists(state, max_size=3), min_size=count, max_size=count))]
    edges = [[(0, target)] if moving else () for moving, target in
             draw(st.lists(st.tuples(st.booleans(), state), min_size=count, max_size=count))]
    nfa = NFA(eps=eps, edges=edges, byte_sets=[((97, 97),)], start=0, accept=draw(state))  # type: ignore[arg-type]
    return nfa, draw(st.lists(state, min_size=1, max_size=2 * count))


@settings(max_examples=400, deadline=None)
@given(epsilon_graphs(), st.sampled_from([0, 1, 2, 3, 64]))
def test_closures_equal_a_search_from_each_state(graph: tuple[NFA, list[int]], searched_states: int) -> None:
    """Plain searches, Tarjan's order from the first expansion on (0), and both mixed, asked in any order."""
    nfa, asked = graph
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(epsilon_closures, "SEARCHED_STATES", searched_states)
        closures = EpsilonClosures(nfa)
        for state in asked + list(range(nfa.num_states)):
            assert closures.of(state) == searched_closure(nfa, state)


def _searched_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Closures found by a search from each state (the construction before Tarjan's order), memoized alike."""

    def of(self: EpsilonClosures, state: int) -> frozenset[int]:
        if self.memo[state] is None:
            self.memo[state] = searched_closure(self.nfa, state)
        return self.memo[state]  # type: ignore[return-value]

    monkeypatch.setattr(epsilon_closures.EpsilonClosures, "of", of)


PIECES = ["a", "b", "ab", "[a-c]", "x?", "(?:ab|ac)", "(?:a?)*", "(?:a*|b?)+", "[0-9a-f]", "\\d", "é"]
QUANTIFIERS = ["", "*", "+", "?", "{2}", "{0,3}", "{1,2}"]
regexes = quantified_regexes(PIECES, QUANTIFIERS, max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(regexes, st.sampled_from([0, 10**9]), st.sampled_from([0, 2, 64]))
def test_subset_construction_is_the_one_over_searched_closures(pattern: str, wide_members: int,
                                                               searched_states: int) -> None:
    """The same table, accepting states and numbering as with a search per closure, on the numpy (wide) and the
    per-state (narrow) expansions, closures found by Tarjan's order or not; nullable loops make epsilon cycles."""
    nfa = build_nfa(parse_regex(pattern))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(determinize_module, "WIDE_LEVEL_MEMBERS", wide_members)
        patch.setattr(epsilon_closures, "SEARCHED_STATES", searched_states)
        found = determinize(nfa)
        _searched_only(patch)
        expected = determinize(nfa)
    assert np.array_equal(found.table, expected.table) and np.array_equal(found.accepting, expected.accepting)
    assert np.array_equal(found.byte_class, expected.byte_class) and found.in_bfs_order == expected.in_bfs_order


@settings(max_examples=200, deadline=None)
@given(epsilon_graphs(), st.integers(1, 6), st.sampled_from([0, 1, 64]))
def test_random_epsilon_graphs_determinize_as_over_searched_closures(graph: tuple[NFA, list[int]], budget: int,
                                                                     searched_states: int) -> None:
    """Arbitrary epsilon graphs (cycles through the start, through accepting states) under a small budget: the same
    DFA, or the same refusal."""
    nfa, _ = graph

    def built() -> tuple[np.ndarray, np.ndarray] | None:
        try:
            dfa = determinize(nfa, budget)
        except StateBudgetError:
            return None
        return dfa.table, dfa.accepting

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(epsilon_closures, "SEARCHED_STATES", searched_states)
        found = built()
    with pytest.MonkeyPatch.context() as patch:
        _searched_only(patch)
        expected = built()
    assert (found is None) == (expected is None)
    if found is not None and expected is not None:
        assert np.array_equal(found[0], expected[0]) and np.array_equal(found[1], expected[1])


@settings(max_examples=300, deadline=None)
@given(epsilon_graphs(), st.data())
def test_a_kernels_closure_is_the_union_of_its_targets(graph: tuple[NFA, list[int]], data: st.DataObject) -> None:
    """`_Subsets._closed`, whose kernels of targets that are their own closures are taken as they are, against the
    union of searched closures (targets with epsilon moves, accepting or dead ones, and with byte edges mixed)."""
    nfa, _ = graph
    subsets = determinize_module._Subsets(nfa, 10**9)
    for _ in range(3):
        kernel = tuple(sorted(data.draw(st.sets(st.integers(0, nfa.num_states - 1), min_size=1))))
        assert subsets._closed(kernel) == frozenset().union(*[searched_closure(nfa, t) for t in kernel])
