"""A build leaves Python's cyclic collector alone, a refusal drops the half-built automaton it unwound, and an
automaton kept per expression (`subset_automaton`) is built or refused as `build_automaton` would at each budget, and
`build_automaton` serves an expression it built before from that keeping."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata import build
from stdsl.compiler.automata.build import build_automaton, compile_regex, product_operands, subset_automaton
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.automata.strings import literal_strings
from stdsl.errors import EmptyLanguageError, StateBudgetError


def test_the_collector_stays_on_during_a_build_seen_from_another_thread() -> None:
    seen: set[bool] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.add(gc.isenabled())

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert compile_regex("(a|b)*a(a|b){10}").num_states > 1000
        with pytest.raises(StateBudgetError):
            compile_regex("(a|b)*a(a|b){12}", max_states=100)
    finally:
        done.set()
        watcher.join()
    assert seen == {True}


def test_a_collector_turned_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        compile_regex("x+y")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_refusal_keeps_no_locals_of_the_frames_it_unwound() -> None:
    with pytest.raises(StateBudgetError) as refused:
        compile_regex("(a|b)*a(a|b){12}", max_states=100)
    traceback = refused.value.__traceback__
    frames = []
    while traceback is not None:
        frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    unwound = [f for f in frames if f.f_code.co_filename.endswith("stdsl/compiler/automata/determinize.py")]
    assert unwound and all(not f.f_locals for f in unwound)


def _expressions() -> st.SearchStrategy[ir.Node]:
    """Random byte expressions with repeats, alternatives and shared parts."""
    leaf = st.sampled_from([ir.literal("a"), ir.literal("ab"), ir.byte_set([(0x61, 0x63)]), ir.literal("c")])
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.seq(*items)),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: ir.alt(*items)),
        st.tuples(inner, st.integers(0, 2), st.integers(0, 4)).map(lambda t: ir.repeat(t[0], t[1], t[1] + t[2]))),
        max_leaves=10)


def _built(node: ir.Node, max_states: int) -> tuple[np.ndarray, np.ndarray] | str:
    """The minimal table of `build_automaton(node, max_states)` built afresh (caches emptied), or the name of its
    refusal."""
    caches.clear()
    try:
        automaton = build_automaton(node, max_states)
    except (StateBudgetError, EmptyLanguageError) as error:
        return type(error).__name__
    return minimize(automaton.transitions, automaton.accepting)


@settings(max_examples=150, deadline=None)
@given(_expressions(), st.integers(1, 40), st.integers(1, 40))
def test_a_kept_subset_automaton_is_what_build_automaton_builds_at_every_budget(node: ir.Node, first: int,
                                                                                then: int) -> None:
    """Kept under one budget and asked again under another, it is built or refused as `build_automaton` is."""
    caches.clear()
    for budget in (first, then):
        try:
            kept = subset_automaton(node, budget)
        except (StateBudgetError, EmptyLanguageError) as error:
            assert _built(node, budget) == type(error).__name__
            continue
        if kept is None:
            assert isinstance(node, (ir.Repeat, ir.Embedded)) or literal_strings(node) is not None
            continue
        expected = _built(node, budget)
        assert not isinstance(expected, str), f"kept under {first}, served at {budget}, which {expected}"
        again = minimize(kept.transitions, kept.accepting)
        assert np.array_equal(again[0], expected[0]) and np.array_equal(again[1], expected[1])
    caches.clear()


def test_an_expression_built_again_is_not_determinized_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """`build_automaton` of an expression it built before, alone or as an operand of another product (a pattern
    shared by properties with different length bounds), is the kept automaton: allany12 determinized 24 operands 267
    times, a third of its compile."""
    calls: list[ir.Node] = []
    determinized = build.determinized

    def counted(node: ir.Node, max_states: int, alphabet: int = 256) -> object:
        calls.append(node)
        return determinized(node, max_states, alphabet)

    monkeypatch.setattr(build, "determinized", counted)
    caches.clear()
    pattern = ir.repeat(ir.alt(ir.literal("ab"), ir.byte_set([(0x61, 0x7A)])), 1, None)
    first = build_automaton(pattern)
    assert build_automaton(pattern) is first
    for bound in (3, 5, 8):
        operands = product_operands([pattern, ir.repeat(ir.byte_set([(0x20, 0x7E)]), 0, bound)], 1000)
        assert operands[0] is first
    assert calls.count(pattern) == 1
    caches.clear()
