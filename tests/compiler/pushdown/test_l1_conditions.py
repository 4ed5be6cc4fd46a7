"""The L(1) checks of `pushdown.grammar` over all call edges at once (the call table, follow sets and the follow
condition) against the edge-by-edge loops they replaced: the same tables, or the same error, over random grammars
whose calls may clash (a call may follow any leaf, and leaves may start as calls do)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.pushdown import grammar as grammar_module
from stdsl.compiler.pushdown.call_rows import CallRows
from stdsl.compiler.pushdown.grammar import (
    Definition,
    GrammarConflictError,
    PushdownGrammar,
    call_symbol,
    compile_pushdown,
)
from stdsl.errors import CompileError

LEAVES = [ir.literal("a"), ir.literal("ab"), ir.literal("b"), ir.literal(","), ir.optional(ir.literal("c"))]


def _loop_call_table(grammar: PushdownGrammar) -> np.ndarray:
    """The call table edge by edge, raising at the first clash (the loop the call table's check was)."""
    own = grammar.own_classes
    table = np.full(own.shape, -1, dtype=np.int64)
    for edge, (q, callee) in enumerate(zip(grammar.call_state.tolist(), grammar.call_callee.tolist())):
        first = grammar.first_classes[callee]
        if (first & (own[q] >= 0)).any() or (first & (table[q] >= 0)).any():
            raise GrammarConflictError(f"edge {edge}", [])
        table[q, first] = edge
    return table


def _loop_follow(grammar: PushdownGrammar) -> np.ndarray:
    """follow(N) by the edge-by-edge fixed point `_follow_sets` was."""
    follow = np.zeros((len(grammar.names), grammar.own_classes.shape[1]), dtype=bool)
    changed = True
    while changed:
        changed = False
        for edge, callee in enumerate(grammar.call_callee.tolist()):
            ret = int(grammar.call_return[edge])
            after = (grammar.own_classes[ret] >= 0) | (grammar.calls[ret] >= 0)
            if grammar.accepting[ret]:
                after = after | follow[grammar.owner[ret]]
            merged = follow[callee] | after
            if not np.array_equal(merged, follow[callee]):
                follow[callee] = merged
                changed = True
    return follow


def _loop_follow_clash(grammar: PushdownGrammar, follow: np.ndarray) -> int | None:
    """The first accepting state of a called nonterminal that reads some of its follow set, or None."""
    called = set(grammar.call_callee.tolist())
    for q in np.flatnonzero(grammar.accepting).tolist():
        n = int(grammar.owner[q])
        live = (grammar.own_classes[q] >= 0) | (grammar.calls[q] >= 0)
        if n in called and (live & follow[n]).any():
            return q
    return None


@st.composite
def clashing_grammars(draw: st.DrawFn) -> tuple[ir.Node, list[Definition]]:
    """A root and up to three definitions whose bodies mix leaves and calls freely."""
    count = draw(st.integers(1, 3))
    parts = st.sampled_from([*LEAVES, *(ir.seq(ir.literal("("), call_symbol(i)) for i in range(count)),
                             *(call_symbol(i) for i in range(count))])
    body = st.recursive(parts, lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.seq(*items)),
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.alt(*items)),
        inner.map(lambda item: ir.repeat(item, 0, 2))), max_leaves=5)
    definitions = [Definition(f"N{i}", ir.seq(draw(st.sampled_from(LEAVES[:4])), draw(body))) for i in range(count)]
    return ir.seq(ir.literal("<"), call_symbol(0), draw(body)), definitions


@settings(max_examples=400, deadline=None)
@given(clashing_grammars())
def test_l1_checks_at_once_match_the_edge_loops(monkeypatch_grammar: list[str],
                                                grammar: tuple[ir.Node, list[Definition]]) -> None:
    monkeypatch_grammar.clear()
    try:
        compile_pushdown(*grammar)
    except CompileError:
        pass
    assert "mismatch" not in monkeypatch_grammar


@pytest.fixture(scope="module")
def monkeypatch_grammar() -> Iterator[list[str]]:
    """Wraps the call table and follow checks so that each run compares them with the loops (a module-scoped
    patch: hypothesis runs the examples inside one test call)."""
    notes: list[str] = []
    call_table, follow_sets, check_follow = (grammar_module._call_rows, grammar_module._follow_sets,
                                             grammar_module._check_follow)

    def compared_call_table(grammar: PushdownGrammar) -> CallRows:
        try:
            expected = _loop_call_table(grammar)
        except GrammarConflictError:
            expected = None
        try:
            found = call_table(grammar)
        except GrammarConflictError:
            if expected is not None:
                notes.append("mismatch")
            raise
        if expected is None or not np.array_equal(found.dense(), expected) or not np.array_equal(
                found.of(np.arange(len(expected))), expected):
            notes.append("mismatch")
        return found

    def compared_follow(grammar: PushdownGrammar) -> np.ndarray:
        found = follow_sets(grammar)
        if not np.array_equal(found, _loop_follow(grammar)):
            notes.append("mismatch")
        return found

    def compared_check(grammar: PushdownGrammar, follow: np.ndarray) -> None:
        expected = _loop_follow_clash(grammar, follow)
        try:
            check_follow(grammar, follow)
        except GrammarConflictError as error:
            if expected is None or grammar.names[grammar.owner[expected]] not in error.nonterminals:
                notes.append("mismatch")
            raise
        if expected is not None:
            notes.append("mismatch")

    patch = pytest.MonkeyPatch()
    patch.setattr(grammar_module, "_call_rows", compared_call_table)
    patch.setattr(grammar_module, "_follow_sets", compared_follow)
    patch.setattr(grammar_module, "_check_follow", compared_check)
    yield notes
    patch.undo()


def test_the_first_clashing_call_is_named() -> None:
    """Two calls at one state that both start with `x`: the error names both callees, as the loop did."""
    body = ir.seq(ir.literal("x"), ir.alt(ir.seq(ir.literal("y"), call_symbol(0)), ir.literal("z")))
    other = ir.literal("xw")
    with pytest.raises(GrammarConflictError) as error:
        compile_pushdown(ir.alt(call_symbol(0), call_symbol(1)), [Definition("A", body), Definition("B", other)])
    assert set(error.value.nonterminals) == {"A", "B"}
