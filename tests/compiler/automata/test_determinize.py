"""Subset construction: the level-at-a-time numpy expansion, the per-state Python one and a plain reference agree."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata import determinize as determinize_module
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization.minimize import minimize, renumber_bfs
from stdsl.compiler.automata.nfa import NFA, build_nfa
from stdsl.compiler.json_schema.json_tokens import Whitespace
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import EmptyLanguageError, StateBudgetError
from tests.compiler.generated_regexes import quantified_regexes

PIECES = ["a", "b", "ab", "[a-c]", "[^a]", "\\d", "\\w", ".", "é", "[é-ü]", "x?", "(?:ab|ac)", "[0-9a-f]"]
QUANTIFIERS = ["", "*", "+", "?", "{2}", "{0,3}", "{1,2}"]

regexes = quantified_regexes(PIECES, QUANTIFIERS, max_leaves=8)


def reference_determinize(nfa: NFA) -> tuple[np.ndarray, np.ndarray]:
    """Textbook subset construction over bytes, one state and one byte at a time (the oracle)."""

    def closure(states: frozenset[int]) -> frozenset[int]:
        seen, stack = set(states), list(states)
        while stack:
            for target in nfa.eps[stack.pop()]:
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return frozenset(seen)

    start = closure(frozenset([nfa.start]))
    ids, order, rows = {start: 0}, [start], []
    while len(rows) < len(order):
        current = order[len(rows)]
        row = [-1] * 256
        for byte in range(256):
            moved = frozenset(target for state in current for set_index, target in nfa.edges[state]
                              if any(lo <= byte <= hi for lo, hi in nfa.byte_sets[set_index]))
            if moved:
                closed = closure(moved)
                if closed not in ids:
                    ids[closed] = len(order)
                    order.append(closed)
                row[byte] = ids[closed]
        rows.append(row)
    return np.array(rows), np.array([nfa.accept in state for state in order])


def _minimal_byte_table(table: np.ndarray, accepting: np.ndarray) -> tuple[list, list]:
    minimal, accept = minimize(table, accepting)
    return minimal.tolist(), accept.tolist()


def _both_paths(nfa: NFA, monkeypatch: pytest.MonkeyPatch) -> tuple[determinize_module.ClassDFA, ...]:
    """The DFA built with every level expanded per state, then with every level expanded by numpy."""
    out = []
    for threshold in (10**9, 0):
        with monkeypatch.context() as patch:
            patch.setattr(determinize_module, "WIDE_LEVEL_MEMBERS", threshold)
            out.append(determinize(nfa))
    return tuple(out)


@settings(max_examples=25, deadline=None)
@given(regexes)
def test_both_expansions_equal_the_reference(pattern: str) -> None:
    nfa = build_nfa(parse_regex(pattern))
    narrow, wide = _both_paths(nfa, pytest.MonkeyPatch())
    assert np.array_equal(narrow.table, wide.table) and np.array_equal(narrow.accepting, wide.accepting)
    expected = _minimal_byte_table(*reference_determinize(nfa))
    assert _minimal_byte_table(wide.byte_table(), wide.accepting) == expected
    _assert_numbered_breadth_first(narrow)
    _assert_numbered_breadth_first(wide)


def _assert_numbered_breadth_first(dfa: determinize_module.ClassDFA) -> None:
    """A DFA that says it is in BFS order is `renumber_bfs`'s numbering already (what lets a trim skip it)."""
    assert dfa.in_bfs_order
    table, accepting = renumber_bfs(dfa.table.astype(np.int64), dfa.accepting)
    assert np.array_equal(table, dfa.table) and np.array_equal(accepting, dfa.accepting)


def test_colliding_kernel_hashes_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every kernel hashed alike, the element-wise check must still keep distinct kernels apart."""
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(12)}}
    nfa = build_nfa(schema_to_ir(schema))
    expected = _both_paths(nfa, monkeypatch)[1]
    monkeypatch.setattr(determinize_module, "splitmix64", lambda values: np.zeros_like(values))
    colliding = _both_paths(nfa, monkeypatch)[1]
    assert _minimal_byte_table(colliding.table, colliding.accepting) == \
        _minimal_byte_table(expected.table, expected.accepting)
    assert not colliding.in_bfs_order, "kernels numbered after a collision may break the breadth-first order"


def test_wide_levels_of_an_object_match_the_narrow_expansion(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(40)}}
    narrow, wide = _both_paths(build_nfa(schema_to_ir(schema)), monkeypatch)
    assert np.array_equal(narrow.table, wide.table) and np.array_equal(narrow.accepting, wide.accepting)


def test_budget_is_enforced_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    nfa = build_nfa(parse_regex("[ab]*a[ab]{9}"))
    for threshold in (10**9, 0):
        monkeypatch.setattr(determinize_module, "WIDE_LEVEL_MEMBERS", threshold)
        with pytest.raises(StateBudgetError):
            determinize(nfa, max_states=500)
        dfa = determinize(nfa, max_states=5000)
        assert len(minimize(dfa.table, dfa.accepting)[0]) == 1024


def test_embedded_and_alternation_keep_the_language() -> None:
    inner = ir.alt(ir.literal("ab"), ir.literal("ac"), ir.literal("b"))
    nfa = build_nfa(ir.seq(ir.star(inner), ir.literal("x")))
    dfa = determinize(nfa)
    assert _minimal_byte_table(dfa.byte_table(), dfa.accepting) == \
        _minimal_byte_table(*reference_determinize(nfa))


LEAF_SCHEMAS = st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
                                {"enum": ["red", "green", "blue"]}, {"type": "string", "maxLength": 3},
                                {"type": "array", "items": {"type": "integer"}}])
OBJECT_SCHEMAS = st.recursive(
    LEAF_SCHEMAS,
    lambda inner: st.dictionaries(st.sampled_from(["a", "b", "city", "count", "name_2"]), inner, min_size=1,
                                  max_size=4).flatmap(
        lambda props: st.lists(st.sampled_from(sorted(props)), unique=True).map(
            lambda required: {"type": "object", "properties": props, "required": required,
                              "additionalProperties": False})),
    max_leaves=8)


@settings(max_examples=40, deadline=None)
@given(OBJECT_SCHEMAS, st.sampled_from([None, Whitespace()]))
def test_the_per_state_expansion_of_objects_equals_the_numpy_one(schema: dict, whitespace: Whitespace | None
                                                                  ) -> None:
    """Objects are mostly chains of one-member states (keys, punctuation), which the per-state expansion takes
    without grouping their moves by byte set, and with whitespace between tokens states of a token and a space
    (each member one move, taken without grouping too): the table must be the numpy expansion's, state for
    state."""
    narrow, wide = _both_paths(build_nfa(schema_to_ir(schema, whitespace=whitespace)), pytest.MonkeyPatch())
    assert np.array_equal(narrow.table, wide.table) and np.array_equal(narrow.accepting, wide.accepting)
    _assert_numbered_breadth_first(narrow)


@st.composite
def random_nfas(draw: st.DrawFn) -> NFA:
    """Small NFAs over a few overlapping, equal-bounded byte sets: states whose members share a set (their targets
    merge), hold overlapping sets (grouped class by class) or disjoint ones, with epsilon moves and dead states."""
    count = draw(st.integers(2, 10))
    sets = draw(st.lists(st.lists(st.tuples(st.integers(97, 104), st.integers(0, 3)).map(
        lambda t: (t[0], min(t[0] + t[1], 104))), min_size=0, max_size=2).map(
        lambda ranges: tuple(sorted(set(ranges)))), min_size=1, max_size=6, unique=True))
    state = st.integers(0, count - 1)
    edges = draw(st.lists(st.lists(st.tuples(st.integers(0, len(sets) - 1), state), max_size=3), min_size=count,
                          max_size=count))
    eps = draw(st.lists(st.lists(state, max_size=2), min_size=count, max_size=count))
    return NFA(eps=list(eps), edges=list(edges), byte_sets=[_disjoint(ranges) for ranges in sets],
               start=draw(state), accept=draw(state))


def _disjoint(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """`ranges` merged into sorted disjoint ones (as a `ByteSet` holds them)."""
    merged: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return tuple(merged)


@settings(max_examples=150, deadline=None)
@given(random_nfas())
def test_per_state_moves_of_random_nfas_equal_the_numpy_ones_and_the_reference(nfa: NFA) -> None:
    """The per-state expansion's groupings (members' sets disjoint, equal and merged, or overlapping and split into
    groups of classes) number and move exactly as the numpy expansion does, and keep the reference's language."""
    narrow, wide = _both_paths(nfa, pytest.MonkeyPatch())
    assert np.array_equal(narrow.table, wide.table) and np.array_equal(narrow.accepting, wide.accepting)
    _assert_numbered_breadth_first(narrow)
    try:
        expected = _minimal_byte_table(*reference_determinize(nfa))
    except EmptyLanguageError:
        with pytest.raises(EmptyLanguageError):
            _minimal_byte_table(narrow.byte_table(), narrow.accepting)
        return
    assert _minimal_byte_table(narrow.byte_table(), narrow.accepting) == expected
