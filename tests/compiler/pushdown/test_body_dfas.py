"""A body DFA with calls, or past `MINIMIZE_UP_TO` states, is the trimmed subset construction: the same language as
the minimal one (minimizing it gives the minimal table) and trim (every state still reaches acceptance), numbered in
BFS order up to that size and as built past it (its BFS numbering the smaller one's table); one kept
or built another way (a body without calls) is still the subset construction's language, refused at the same
budget, and `stdsl.caches.clear()` empties what is kept."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization import minimize as minimize_module
from stdsl.compiler.automata.minimization.minimize import minimize, renumber_bfs, trim
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.pushdown import grammar as grammar_module
from stdsl.compiler.pushdown.grammar import CALL_BASE, call_symbol
from stdsl.errors import EmptyLanguageError, StateBudgetError

ALPHABET = CALL_BASE + 2


def body_dfa(body: ir.Node, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """`_body_dfa`'s table over every symbol of the alphabet (its class table read through each symbol's class)."""
    table, symbol_class, accepting = grammar_module._body_dfa(body, budget, ALPHABET)
    assert symbol_class.shape == (ALPHABET,)
    return table[:, symbol_class], accepting


def body_nodes() -> st.SearchStrategy[ir.Node]:
    """Random bodies over a few bytes and two call symbols, with repeats and shared parts."""
    leaf = st.sampled_from([ir.literal("a"), ir.literal("ab"), ir.byte_set([(0x61, 0x63)]),
                            ir.seq(ir.literal("c"), call_symbol(0)), ir.seq(ir.literal("d"), call_symbol(1))])
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.seq(*items)),
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.alt(*items)),
        st.tuples(inner, st.integers(0, 3), st.integers(0, 3)).map(lambda t: ir.repeat(t[0], t[1], t[1] + t[2]))),
        max_leaves=8)


@settings(max_examples=120, deadline=None)
@given(body_nodes())
def test_a_large_body_keeps_its_trimmed_states_and_its_language(body: ir.Node) -> None:
    caches.clear()
    built = body_dfa(body, 100_000)
    caches.clear()
    limit = minimize_module.MINIMIZE_UP_TO
    minimize_module.MINIMIZE_UP_TO = grammar_module.MINIMIZE_UP_TO = 0
    try:
        kept = body_dfa(body, 100_000)
    finally:
        minimize_module.MINIMIZE_UP_TO = grammar_module.MINIMIZE_UP_TO = limit
        caches.clear()
    assert len(kept[1]) >= len(built[1])
    assert len(trim(kept[0], kept[1])[1]) == len(kept[1])
    again, expected = minimize(kept[0], kept[1]), minimize(built[0], built[1])
    assert np.array_equal(again[0], expected[0]) and np.array_equal(again[1], expected[1])


@settings(max_examples=120, deadline=None)
@given(body_nodes())
def test_a_body_past_the_minimized_size_is_numbered_as_built(body: ir.Node) -> None:
    """Past `MINIMIZE_UP_TO` states a body is not renumbered in BFS order (a Python step per state: 15% of o9771's
    compile), and renumbering it gives the table a smaller limit gives, over the same classes, in int32."""
    caches.clear()
    built = grammar_module._body_dfa(body, 100_000, ALPHABET)
    caches.clear()
    limit = grammar_module.MINIMIZE_UP_TO
    grammar_module.MINIMIZE_UP_TO = 0
    try:
        large = grammar_module._body_dfa(body, 100_000, ALPHABET)
    finally:
        grammar_module.MINIMIZE_UP_TO = limit
        caches.clear()
    assert large[0].dtype == built[0].dtype == np.int32 and np.array_equal(large[1], built[1])
    table, accepting = renumber_bfs(large[0], large[2], dtype=np.int32)
    assert np.array_equal(table, built[0]) and np.array_equal(accepting, built[2])


def test_a_laid_out_chain_past_the_minimized_size_is_not_renumbered(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body holding a long counted chain is laid out (`chains.chained_dfa`), not in BFS order: past the limit its
    table is the layout trimmed, with no BFS renumbering, and the limit's renumbered table is its BFS numbering."""
    character = ir.alt(ir.byte_set([(0x61, 0x7A)]), ir.literal("\\n"))
    ending = ir.alt(call_symbol(0), ir.literal("x"))
    body = ir.seq(ir.literal('"'), ir.repeat(character, 0, 100), ir.literal('"'), ending)
    renumbered: list[int] = []
    renumber = minimize_module.renumber_bfs

    def counted(table: np.ndarray, accepting: np.ndarray, start: int = 0,
                dtype: type[np.integer] = np.int64) -> tuple[np.ndarray, np.ndarray]:
        renumbered.append(len(table))
        return renumber(table, accepting, start, dtype)

    monkeypatch.setattr(minimize_module, "renumber_bfs", counted)
    caches.clear()
    small = grammar_module._body_dfa(body, 100_000, ALPHABET)
    assert renumbered == [len(small[2])]
    caches.clear()
    monkeypatch.setattr(grammar_module, "MINIMIZE_UP_TO", len(small[2]) - 1)
    large = grammar_module._body_dfa(body, 100_000, ALPHABET)
    caches.clear()
    assert renumbered == [len(small[2])]
    assert not np.array_equal(large[0], small[0])
    table, accepting = renumber(large[0], large[2], dtype=np.int32)
    assert np.array_equal(table, small[0]) and np.array_equal(accepting, small[2])


def test_the_kept_body_dfas_are_emptied_with_every_other_cache() -> None:
    """A "cold" compile after `stdsl.caches.clear()` builds its body DFAs again (they were once a module dict)."""
    body = ir.seq(ir.literal("ab"), call_symbol(0))
    first = grammar_module._body_dfa(body, 100_000, ALPHABET)
    assert grammar_module._body_dfa(body, 100_000, ALPHABET) is first
    caches.clear()
    again = grammar_module._body_dfa(body, 100_000, ALPHABET)
    assert again is not first and all(np.array_equal(a, b) for a, b in zip(again, first))


@settings(max_examples=80, deadline=None)
@given(body_nodes(), st.integers(1, 60))
def test_a_body_is_the_subset_construction_over_the_grammars_alphabet(body: ir.Node, budget: int) -> None:
    """With or without calls (a body without them is its byte automaton, `subset_automaton`, which the DFA compiler
    may have kept under a larger budget): the same language, and refused at the same budget."""
    caches.clear()
    if budget % 2:
        grammar_module.subset_automaton(body, 100_000)
    try:
        direct = determinize(build_nfa(body), budget, ALPHABET)
        expected = minimize(direct.table[:, direct.byte_class], direct.accepting)
    except (StateBudgetError, EmptyLanguageError) as error:
        with pytest.raises(type(error)):
            grammar_module._body_dfa(body, budget, ALPHABET)
        return
    found = body_dfa(body, budget)
    again = minimize(found[0], found[1])
    assert np.array_equal(again[0], expected[0]) and np.array_equal(again[1], expected[1])
    caches.clear()
