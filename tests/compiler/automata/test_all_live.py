"""`nfa.all_live`: where it says no state of an expression's subset construction can be dead, none is (the oracle is
the trim's own search), and the automata built with the flag are the ones built without it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata import build as build_module
from stdsl.compiler.automata.build import build_automaton, embedded_leaf
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization.minimize import trim
from stdsl.compiler.automata.nfa import all_live, build_nfa
from stdsl.errors import EmptyLanguageError

DEAD_END = np.array([[-1] * 256, [-1] * 256, [-1] * 256], dtype=np.int32)
DEAD_END[0, ord("a")] = 1
DEAD_END[0, ord("b")] = 2
"""An embedded table whose state 2 (entered on `b`) reaches no accepting state."""
DEAD_END_ACCEPTING = np.array([False, True, False])

leaves = st.one_of(
    st.sampled_from([ord("a"), ord("b"), ord("c")]).map(lambda b: ir.ByteSet(((b, b),))),
    st.sampled_from(["ab", "abc", "b", ""]).map(ir.literal),
    st.just(ir.NOTHING),
    st.just(ir.ByteSet(())),
    st.just(ir.Embedded(DEAD_END, DEAD_END_ACCEPTING)),
    st.sampled_from(["a+b", "(?:ab|c)*", "[ab]c?"]).map(
        lambda pattern: embedded_leaf(build_module.compile_regex(pattern))),
)

expressions = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.Seq(tuple(items))),
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.Alt(tuple(items))),
        st.tuples(inner, st.integers(0, 2), st.sampled_from([None, 2, 3])).map(
            lambda t: ir.Repeat(t[0], t[1], t[2] if t[2] is None else max(t[1], t[2]))),
    ),
    max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(expressions)
def test_a_construction_said_all_live_has_no_dead_state(node: ir.Node) -> None:
    """Built with the direct constructors, so that empty languages and dead ends occur inside."""
    dfa = determinize(build_nfa(node))
    if not all_live(node):
        return
    try:
        table, accepting = trim(np.asarray(dfa.table, dtype=np.int64), dfa.accepting, all_reachable=True)
    except EmptyLanguageError:
        raise AssertionError("an expression said all live has an empty language") from None
    assert len(table) == len(dfa.table)


def test_dead_parts_are_seen() -> None:
    a = ir.literal("a")
    assert all_live(ir.seq(a, ir.star(ir.literal("bc")), ir.alt(a, ir.literal("xy"))))
    assert not all_live(ir.Seq((a, ir.NOTHING)))
    assert not all_live(ir.Seq((ir.literal("xy"), ir.ByteSet(()))))
    assert not all_live(ir.seq(a, ir.Embedded(DEAD_END, DEAD_END_ACCEPTING)))
    assert all_live(ir.seq(a, embedded_leaf(build_module.compile_regex("a|bc"))))


@settings(max_examples=100, deadline=None)
@given(expressions)
def test_automata_are_the_ones_built_without_the_flag(node: ir.Node) -> None:
    def built(flag: bool) -> tuple[np.ndarray, np.ndarray] | None:
        original = build_module.all_live
        if not flag:
            build_module.all_live = lambda _node: False  # type: ignore[assignment]
        try:
            automaton = build_automaton(node)
        except EmptyLanguageError:
            return None
        finally:
            build_module.all_live = original
        return np.asarray(automaton.transitions), np.asarray(automaton.accepting)

    with_flag, without = built(True), built(False)
    assert (with_flag is None) == (without is None)
    if with_flag is not None and without is not None:
        assert np.array_equal(with_flag[0], without[0]) and np.array_equal(with_flag[1], without[1])
