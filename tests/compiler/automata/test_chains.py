"""Long counted chains laid out whole (`chains.chained_dfa`) give the DFA the subset construction over the whole
NFA gives: the same minimal table, over bytes and over a pushdown body's call symbols, and the same budget answer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata import build, chains
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, determinized
from stdsl.compiler.automata.determinize import ClassDFA, determinize
from stdsl.compiler.automata.minimization.minimize import minimize, trim
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.automata.substitution import subsets
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.compiler.pushdown.grammar import call_symbol
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import StateBudgetError
from tests.compiler.automata.counted_regexes import ATOMS, counted_regexes


def _minimal(dfa: ClassDFA) -> tuple[np.ndarray, np.ndarray]:
    """The minimal DFA over every symbol (one column each), states in breadth-first order."""
    return minimize(np.asarray(dfa.table, dtype=np.int64)[:, dfa.byte_class], dfa.accepting)


def _same(node: ir.Node, alphabet: int = 256, laid_out: bool = True) -> None:
    """`determinized` agrees with the subset construction on `node`; `laid_out`: it laid out a chain of it.  A laid-out
    DFA is trim as it says (`all_live`: every state reaches acceptance, so shrinking it searches for none)."""
    got = chains.chained_dfa(node, 100_000, alphabet, build._chain)
    if got is None:
        assert not laid_out, "no chain was laid out"
        return
    assert got.all_live and len(trim(np.asarray(got.table, dtype=np.int64), got.accepting)[1]) == len(got.accepting)
    expected = _minimal(determinize(build_nfa(node), 100_000, alphabet))
    table, accepting = _minimal(got)
    assert np.array_equal(table, expected[0])
    assert np.array_equal(accepting, expected[1])
    assert np.array_equal(_minimal(determinized(node, 100_000, alphabet))[0], expected[0])


@pytest.fixture(autouse=True)
def short_chains(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chains of two copies and embedded automata of four states are laid out, so small cases exercise it."""
    monkeypatch.setattr(build, "COUNTED_DIRECT_FROM", 2)
    monkeypatch.setattr(chains, "CHAIN_FROM", 2)
    monkeypatch.setattr(chains, "EMBEDDED_FROM", 4)


@settings(max_examples=80, deadline=None)
@given(pattern=counted_regexes(atoms=(*ATOMS, "(?:ab|a)", "[^a]"), most_low=5, most_span=7),
       before=st.sampled_from(["", "x", "(?:x|y)*"]), after=st.sampled_from(["", "a", "z", "(?:z|a)b"]))
def test_chains_laid_out_give_the_minimal_dfa_of_the_subset_construction(pattern: str, before: str,
                                                                         after: str) -> None:
    node = parse_regex(f"{before}(?:{pattern}){{2,3}}{after}")
    try:
        determinize(build_nfa(node), 100_000)
    except StateBudgetError:
        reject()
    _same(node, laid_out=False)


@pytest.mark.parametrize("length", [2, 9, 70])
def test_a_string_with_max_length_beside_calls_is_the_same_body(length: int) -> None:
    string = schema_to_ir({"type": "string", "maxLength": length})
    node = ir.seq(ir.literal('{"a":'), string, ir.literal(',"b":'), call_symbol(0),
                  ir.optional(ir.seq(ir.literal(',"c":'), string)), ir.literal("}"))
    _same(node, alphabet=258)


def test_an_embedded_intersection_and_a_pattern_string_are_the_same_dfa() -> None:
    bounded = schema_to_ir({"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[a-f0-9]{8}$", "maxLength": 12},
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 5}}},
        "required": ["id"]})
    _same(bounded)


def test_chains_over_the_budget_are_refused_as_before() -> None:
    chain = ir.repeat(ir.byte_set([(97, 99)]), 0, 300)
    node = ir.seq(chain, ir.literal(","), chain, ir.literal(","), chain)
    with pytest.raises(StateBudgetError):
        determinize(build_nfa(node), 700)
    with pytest.raises(StateBudgetError):
        chains.chained_dfa(node, 700, 256, build._chain)
    laid_out = chains.chained_dfa(node, 1000, 256, build._chain)
    assert laid_out is not None and len(laid_out.accepting) == len(determinize(build_nfa(node), 1000).accepting)


def test_a_chain_copied_under_a_counted_repeat_is_left_to_the_subset_construction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chains, "LAYOUT_PER_BUDGET_STATE", 0)
    node = ir.repeat(ir.seq(ir.literal("["), ir.repeat(ir.byte_set([(97, 98)]), 0, 5), ir.literal("]")), 1, 4)
    assert chains.chained_dfa(node, 100_000, 256, build._chain) is None
    assert build_automaton(node).accepts(b"[ab][]")


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(2, 9), min_size=2, max_size=3), copies=st.integers(2, 4),
       after=st.sampled_from(["", ",", "z"]))
def test_a_layout_try_that_leaves_a_chain_in_the_skeleton_builds_no_chain_again(
        lengths: list[int], copies: int, after: str) -> None:
    """Past the layout bound the next try leaves the chain with the most copies in the skeleton and lays the others
    out again from the chains the first try built: over three tries (all past a bound of 0, so the subset
    construction decides, as before) each chain is built once."""
    strings = ",".join(f'"[a-c]{{0,{n}}}"' for n in lengths)
    node = parse_regex(f'\\[(?:{strings}){{1,{copies}}}\\]{after}')
    built: list[ir.Node] = []

    def counting(part: ir.Repeat | ir.Embedded, max_states: int) -> object:
        built.append(part)
        return build._chain(part, max_states)

    chains.LAYOUT_PER_BUDGET_STATE = 0.0  # type: ignore[assignment]
    try:
        got = chains.chained_dfa(node, 100_000, 256, counting)  # type: ignore[arg-type]
    finally:
        chains.LAYOUT_PER_BUDGET_STATE = 4
    assert got is None and len(built) == len(set(built))


def test_a_counted_chain_is_built_once_for_every_expression_that_holds_it() -> None:
    """The DFA compiler's and a pushdown body's subset constructions over the same long string share its chain."""
    caches.clear()
    string = schema_to_ir({"type": "string", "maxLength": 300})
    before = build._COUNTED.stats()
    first = build_automaton(ir.seq(ir.literal('{"a":'), string, ir.literal("}")))
    second = build_automaton(ir.seq(ir.literal("["), string, ir.literal("]")))
    after = build._COUNTED.stats()
    assert after.misses - before.misses == 1 and after.hits - before.hits >= 1
    assert first.accepts(b'{"a":"' + b"x" * 300 + b'"}') and not first.accepts(b'{"a":"' + b"x" * 301 + b'"}')
    assert second.accepts(b'[""]') and not second.accepts(b'["' + b"x" * 301 + b'"]')


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(2, 40), min_size=2, max_size=3), low=st.integers(0, 2),
       after=st.sampled_from(["", "a", "(?:z|a)b", "[a-c]*"]))
def test_the_substitution_refuses_past_its_state_budget_exactly(lengths: list[int], low: int, after: str) -> None:
    """With `max_states` the substitution stops once it has found more reachable states (before stacking its table):
    it refuses a budget one short of the DFA it returns, and returns that same DFA within it."""
    calls: list[tuple] = []
    original = chains.substituted_classes

    def recorded(*args: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        calls.append(args)
        return original(*args)  # type: ignore[arg-type]

    chains.substituted_classes = recorded  # type: ignore[assignment]
    try:
        pattern = ",".join(f"[a-c]{{{min(low, n)},{n}}}" for n in lengths)
        found = chains.chained_dfa(parse_regex(f"x{pattern}{after}"), 100_000, 256, build._chain)
    finally:
        chains.substituted_classes = original
    assert found is not None
    skeleton, accepting, pieces, symbols, composites, _ = calls[-1]
    size = len(found.accepting)
    with pytest.raises(subsets.TooManyStates):
        original(skeleton, accepting, pieces, symbols, composites, size - 1)
    table, final, _ = original(skeleton, accepting, pieces, symbols, composites, size)
    assert np.array_equal(table, found.table) and np.array_equal(final, found.accepting)


PIECE_PATTERNS = ["[a-c]{0,6}", "(?:ab|a)+", "x[a-c]*y", "[a-c]{2,5}z", "(?:ab)*", "[^a]{1,3}", "a", "[a-c]{3}"]


def _skeletons(placeholders: int) -> st.SearchStrategy[ir.Node]:
    """Expressions over a few bytes and `placeholders` placeholder symbols (256 + j), nested in sequences,
    alternations and loops, so pieces are read one after another, in parallel, and again."""
    leaves = st.one_of(st.sampled_from([ir.literal(c) for c in "abxz,"]),
                       st.integers(0, placeholders - 1).map(lambda j: ir.ByteSet(((256 + j, 256 + j),))))
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda items: ir.seq(*items)),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: ir.alt(*items)),
        inner.map(ir.star), inner.map(ir.optional)), max_leaves=8)


SUBSTITUTIONS = st.integers(1, 3).flatmap(lambda count: st.tuples(
    _skeletons(count), st.lists(st.lists(st.sampled_from(PIECE_PATTERNS), min_size=1, max_size=2),
                                min_size=count, max_size=count)))
"""A skeleton over placeholder symbols and, for each symbol, one or two piece patterns read in its place."""


def _substitution(case: tuple) -> tuple[np.ndarray, list[bool], list[list[Automaton]]]:
    """The skeleton's minimal table over bytes and placeholders, its accepting states, and the pieces' automata
    (a skeleton past 10,000 DFA states is rejected)."""
    node, patterns = case
    try:
        dfa = determinize(build_nfa(ir.seq(node, ir.literal(";"))), 10_000, 256 + len(patterns))
    except StateBudgetError:
        reject()
    table, accepting = minimize(dfa.table, dfa.accepting)
    skeleton = np.asarray(table, dtype=np.int32)[:, dfa.byte_class]
    return skeleton, accepting, [[build_automaton(parse_regex(pattern)) for pattern in column] for column in patterns]


@settings(max_examples=150, deadline=None)
@given(SUBSTITUTIONS)
def test_the_substitution_counts_its_states_without_laying_out_the_copies(case: tuple) -> None:
    """Past its budget the substitution finds the reachable states over its pieces' regions (`_reached`),
    not over a table of every copy: on skeletons whose pieces are read in sequence, in parallel (alternatives, a
    piece beside the skeleton's own bytes), repeated, empty or reading on past an accepting state, it finds as many
    states as the DFA it returns, refuses a budget one short of it, and returns that same DFA within it."""
    skeleton, accepting, pieces = _substitution(case)
    found = subsets.substituted_classes(skeleton, accepting, pieces, 256)
    size = len(found[1])
    counting = subsets._Substitution(skeleton, np.asarray(accepting, dtype=bool), pieces, 256)
    reached = counting._reached(*counting._composites())
    assert reached is not None and int(reached.sum()) == size
    with pytest.raises(subsets.TooManyStates):
        subsets.substituted_classes(skeleton, accepting, pieces, 256, None, size - 1)
    within = subsets.substituted_classes(skeleton, accepting, pieces, 256, None, size)
    assert all(np.array_equal(got, expected) for got, expected in zip(within, found))


def _old_path(skeleton: np.ndarray, accepting: list[bool], pieces: list[list[Automaton]]) -> tuple[np.ndarray, ...]:
    """The substitution's DFA the way it was built before issue 36's o9870: every copy laid out in one table, its
    moves remapped to the composites, the composites' rows stacked after it, the states reachable from the start
    found by a plain search and the table trimmed to them (start first, then in order)."""
    substitution = subsets._Substitution(skeleton, np.asarray(accepting, dtype=bool), pieces, 256)
    start, remap = substitution._composites()
    table = substitution._laid_out()
    live = table >= 0
    table[live] = remap[table[live]]
    full = np.concatenate([table] + ([np.stack(substitution.rows)] if substitution.rows else []))
    final = np.concatenate([substitution.accepting, [bool(substitution.accepting[members].any())
                                                     for members in substitution.members]]).astype(bool)
    seen, stack = {start}, [start]
    while stack:
        for target in full[stack.pop()].tolist():
            if target >= 0 and target not in seen:
                seen.add(target)
                stack.append(target)
    kept = [start] + sorted(seen - {start})
    number = np.full(len(full) + 1, -1, dtype=np.int32)
    number[kept] = np.arange(len(kept), dtype=np.int32)
    return number[full[kept]], final[kept], substitution.byte_class


@settings(max_examples=150, deadline=None)
@given(SUBSTITUTIONS, st.sampled_from([1, 3, 1 << 16]))
def test_the_substitution_writes_the_table_the_laid_out_path_trimmed(case: tuple, cells: int) -> None:
    """The trimmed table written row by row from the pieces' tables (`_trimmed`, a few rows or many between
    deadline checks) is the one the old path built from a table of every copy, with and without a state budget."""
    skeleton, accepting, pieces = _substitution(case)
    expected = _old_path(skeleton, accepting, pieces)
    kept = subsets.GATHER_CELLS
    subsets.GATHER_CELLS = cells
    try:
        unbounded = subsets.substituted_classes(skeleton, accepting, pieces, 256)
        bounded = subsets.substituted_classes(skeleton, accepting, pieces, 256, None, len(expected[1]))
    finally:
        subsets.GATHER_CELLS = kept
    for found in (unbounded, bounded):
        assert all(got.dtype == want.dtype and np.array_equal(got, want) for got, want in zip(found, expected))


@settings(max_examples=100, deadline=None)
@given(SUBSTITUTIONS, st.data())
def test_a_substitution_served_from_kept_regions_writes_the_cold_table(case: tuple, data: st.DataObject) -> None:
    """Regions are kept per piece across substitutions (`subsets.piece_region`): a second skeleton
    substituting the same pieces, whose regions the first kept, gives the table, accepting mask and classes it gives
    with nothing kept, and refuses a budget one short of it alike."""
    other = data.draw(_skeletons(len(case[1])))
    caches.clear()
    second, second_accepting, _ = _substitution((other, case[1]))
    first, first_accepting, pieces = _substitution(case)
    cold = subsets.substituted_classes(second, second_accepting, pieces, 256)
    caches.clear()
    subsets.substituted_classes(first, first_accepting, pieces, 256)
    warm = subsets.substituted_classes(second, second_accepting, pieces, 256, None, len(cold[1]))
    assert all(np.array_equal(got, expected) for got, expected in zip(warm, cold))
    with pytest.raises(subsets.TooManyStates):
        subsets.substituted_classes(second, second_accepting, pieces, 256, None, len(cold[1]) - 1)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(PIECE_PATTERNS), st.data())
def test_a_kept_region_is_the_one_a_search_over_every_byte_finds(pattern: str, data: st.DataObject) -> None:
    """A piece's region, searched over its own classes and kept, holds the states a search over its 256-column
    table finds from the same entering states, and is what the next request for it gets."""
    caches.clear()
    piece = build_automaton(parse_regex(pattern))
    candidates = np.flatnonzero(~piece.accepting).tolist()
    if not candidates:
        reject()
    states = np.array(sorted(data.draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3, unique=True))))
    kept = subsets.piece_region(piece, states)
    assert subsets.piece_region(piece, states) is kept
    bytes_table = np.asarray(piece.class_transitions, dtype=np.int32)[:, np.asarray(piece.byte_class)]
    inside, ends = subsets._searched_region(piece.accepting, bytes_table, states)
    assert (set(kept[0].tolist()), set(kept[1].tolist())) == (set(inside.tolist()), set(ends.tolist()))


def test_a_string_closed_by_its_quote_is_one_piece_for_every_expression_that_holds_it() -> None:
    """Two expressions holding the same long string then its closing quote lay out one closed piece (kept per chain
    and byte set), so the second substitution finds its region kept; each still gives the subset construction's
    DFA."""
    caches.clear()
    string = schema_to_ir({"type": "string", "maxLength": 12})
    before = chains._CLOSED.stats()
    first = ir.seq(ir.literal('{"a":'), string, ir.literal("}"))
    second = ir.seq(ir.literal("["), string, ir.literal(",1]"))
    _same(first)
    _same(second)
    after = chains._CLOSED.stats()
    assert after.misses - before.misses == 1 and after.hits - before.hits >= 1
