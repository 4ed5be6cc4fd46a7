"""Products on the class form equal a product over the 256-column tables and Python `re` on both patterns."""

from __future__ import annotations

import re
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata import ops
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import compile_regex
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.automata.ops import (
    common_classes,
    concatenation,
    intersect,
    intersect_beside_start,
    product_beside_start,
)
from stdsl.errors import EmptyLanguageError, StateBudgetError
from tests.compiler.generated_regexes import quantified_regexes

PIECES = ["a", "b", "ab", "[a-c]", "[^a]", "\\d", "[0-5]", ".", "é", "[é-ü]", "x?", "(?:ab|ac)", "[b-z]"]
QUANTIFIERS = ["", "*", "+", "?", "{2}", "{0,3}", "{1,2}"]
regexes = quantified_regexes(PIECES, QUANTIFIERS, max_leaves=5, groups_quantified=False)
TEXTS = st.lists(st.text(alphabet="abcxz059é", max_size=6), max_size=20)


def reference_intersection(a: Automaton, b: Automaton) -> tuple[list, list]:
    """Pairs explored one by one over all 256 bytes, then minimized (the oracle)."""
    ta, tb = a.transitions, b.transitions
    ids, order, rows = {(0, 0): 0}, deque([(0, 0)]), []
    pairs = [(0, 0)]
    while order:
        qa, qb = order.popleft()
        row = [-1] * 256
        for byte in range(256):
            na, nb = int(ta[qa, byte]), int(tb[qb, byte])
            if na >= 0 and nb >= 0:
                if (na, nb) not in ids:
                    ids[(na, nb)] = len(pairs)
                    pairs.append((na, nb))
                    order.append((na, nb))
                row[byte] = ids[(na, nb)]
        rows.append(row)
    accepting = np.array([bool(a.accepting[x] and b.accepting[y]) for x, y in pairs])
    table, accept = minimize(np.array(rows), accepting)
    return canonical(np.array(table), np.array(accept))


def canonical(table: np.ndarray, accepting: np.ndarray) -> tuple[list[list[int]], list[bool]]:
    """A DFA renumbered in breadth-first order from state 0 (bytes in increasing order): two minimal DFAs of
    one language have equal canonical forms whatever numbering their constructions chose."""
    ids, order = {0: 0}, [0]
    for state in order:
        for target in table[state].tolist():
            if target >= 0 and target not in ids:
                ids[target] = len(order)
                order.append(target)
    rows = [[ids[t] if t >= 0 else -1 for t in table[state].tolist()] for state in order]
    return rows, [bool(accepting[state]) for state in order]


@settings(max_examples=60, deadline=None)
@given(regexes, regexes, TEXTS)
def test_intersection_equals_the_byte_table_product_and_re(left: str, right: str, texts: list[str]) -> None:
    a, b = compile_regex(left), compile_regex(right)
    try:
        expected = reference_intersection(a, b)
    except EmptyLanguageError:
        with pytest.raises(EmptyLanguageError):
            intersect(a, b)
        return
    product = intersect(a, b)
    assert canonical(product.transitions, product.accepting) == expected
    for text in texts:
        both = re.fullmatch(left, text) is not None and re.fullmatch(right, text) is not None
        assert product.accepts(text.encode()) == both


@settings(max_examples=60, deadline=None)
@given(regexes, regexes)
def test_intersection_beside_the_start_equals_the_search_from_the_start(left: str, right: str) -> None:
    """Every (state, start) pair taken at once, the unreached ones left to the minimization: the same table."""
    a, b = compile_regex(left), compile_regex(right)
    try:
        expected = intersect(a, b)
    except EmptyLanguageError:
        with pytest.raises(EmptyLanguageError):
            intersect_beside_start(a, b)
        return
    product = intersect_beside_start(a, b)
    assert np.array_equal(product.byte_class, expected.byte_class)
    assert np.array_equal(product.class_transitions, expected.class_transitions)
    assert np.array_equal(product.accepting, expected.accepting)


def reference_beside_start(ta: np.ndarray, tb: np.ndarray) -> tuple[list[list[int]], list[int]]:
    """`product_beside_start` pair by pair in Python: every (q, start) first, then each level's new pairs in
    increasing key order (the oracle of its numbering)."""
    width = max(len(tb), 1)
    keys = [q * width for q in range(len(ta))]
    ids = {key: index for index, key in enumerate(keys)}
    rows: list[list[int]] = []
    level = list(keys)
    while level:
        fresh: set[int] = set()
        for key in level:
            row = []
            for column in range(ta.shape[1]):
                moved, guarded = int(ta[key // width, column]), int(tb[key % width, column])
                target = moved * width + guarded if moved >= 0 and guarded >= 0 else -1
                if target >= 0 and target not in ids:
                    fresh.add(target)
                row.append(target)
            rows.append(row)
        level = sorted(fresh)
        for key in level:
            ids[key] = len(keys)
            keys.append(key)
    return [[ids[t] if t >= 0 else -1 for t in row] for row in rows], keys


@settings(max_examples=60, deadline=None)
@given(regexes, regexes)
def test_product_beside_start_equals_the_pairwise_search(left: str, right: str) -> None:
    """The level-at-once product (its first level `ta` beside `tb`'s start row) numbers and links every pair as
    the pair-by-pair search does."""
    a, b = compile_regex(left), compile_regex(right)
    _, column_a, column_b = common_classes(a, b)
    ta, tb = a.class_transitions[:, column_a], b.class_transitions[:, column_b]
    table, pairs, width = product_beside_start(ta, tb, "test")
    rows, keys = reference_beside_start(ta, tb)
    assert width == max(len(tb), 1)
    assert table.dtype == np.int32 and pairs.dtype == np.int64  # the keys of small tables fit int32
    assert table.tolist() == rows
    assert pairs.tolist() == keys


@settings(max_examples=60, deadline=None)
@given(regexes, regexes)
def test_intersection_beside_the_start_trimmed_only_has_the_same_language(left: str, right: str) -> None:
    """`minimal=False` (the tool formats' guards): every state reached and leading to acceptance, and its minimal
    form (over the 256 bytes) is `intersect`'s."""
    a, b = compile_regex(left), compile_regex(right)
    try:
        expected = intersect(a, b)
    except EmptyLanguageError:
        with pytest.raises(EmptyLanguageError):
            intersect_beside_start(a, b, minimal=False)
        return
    product = intersect_beside_start(a, b, minimal=False)
    table = product.transitions.astype(np.int64)
    assert product.is_trim()
    minimal_table, minimal_accepting = minimize(table, product.accepting)
    expected_table, expected_accepting = minimize(expected.transitions.astype(np.int64), expected.accepting)
    assert np.array_equal(minimal_table, expected_table)
    assert np.array_equal(minimal_accepting, expected_accepting)


@settings(max_examples=40, deadline=None)
@given(regexes, regexes)
def test_common_classes_tell_apart_exactly_the_bytes_either_side_does(left: str, right: str) -> None:
    a, b = compile_regex(left), compile_regex(right)
    byte_class, column_a, column_b = common_classes(a, b)
    assert np.array_equal(column_a[byte_class], a.byte_class)
    assert np.array_equal(column_b[byte_class], b.byte_class)
    pairs = {(int(x), int(y)) for x, y in zip(a.byte_class, b.byte_class)}
    assert int(byte_class.max()) + 1 == len(pairs)
    first_bytes = [int(np.flatnonzero(byte_class == c)[0]) for c in range(len(pairs))]
    assert first_bytes == sorted(first_bytes)


def test_intersection_budget() -> None:
    a, b = compile_regex("[ab]*a[ab]{8}"), compile_regex("[ab]*b[ab]{7}")
    with pytest.raises(StateBudgetError):
        intersect(a, b, max_states=100)
    product = intersect(a, b)
    assert product.accepts(b"ab" + b"a" * 7) and not product.accepts(b"aa" + b"a" * 7)


PARTS = st.lists(st.one_of(st.text(alphabet="ab;é", max_size=3), regexes.map(lambda r: f"(?:{r});"), regexes),
                 min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(PARTS)
def test_concatenation_lays_out_exactly_the_concatenated_language(parts: list[str]) -> None:
    """Literals (plain text) and automata (regexes) in a row: where `concatenation` lays them out, its DFA minimizes
    to the minimal DFA of the whole pattern; where it declines, some automaton accepts "" or reads on from an
    accepting state, before the last part, with a byte the next non-empty part can begin with."""
    pieces: list[bytes | Automaton] = [
        part.encode() if index % 2 == 0 and "(" not in part else compile_regex(part)
        for index, part in enumerate(parts)]
    whole = compile_regex("".join(re.escape(p.decode()) if isinstance(p, bytes) else f"(?:{part})"
                                  for p, part in zip(pieces, parts)))
    laid_out = concatenation(pieces)
    automata = [(i, p) for i, p in enumerate(pieces) if isinstance(p, Automaton)]

    def first_bytes(rest: list[bytes | Automaton]) -> set[int]:
        for part in rest:
            if isinstance(part, Automaton) or part:
                return set(part.live_bytes(0)) if isinstance(part, Automaton) else {part[0]}
        return set()

    def read_on(part: Automaton) -> set[int]:
        return {byte for state in np.flatnonzero(part.accepting) for byte in part.live_bytes(int(state))}

    declines = any(bool(p.accepting[0]) or read_on(p) & first_bytes(pieces[i + 1:]) for i, p in automata)
    assert (laid_out is None) == declines
    if laid_out is not None:
        assert laid_out.is_trim()
        assert canonical(*minimize(laid_out.transitions, laid_out.accepting)) == \
            canonical(whole.transitions, whole.accepting)


def test_concatenation_of_a_head_closed_arguments_and_a_tail() -> None:
    arguments = compile_regex(r'\{"n": \d+\}')
    call = concatenation([b"<call>", arguments, b"</call>"])
    assert call is not None
    assert call.accepts(b'<call>{"n": 42}</call>') and not call.accepts(b'<call>{"n": }</call>')
    assert concatenation([compile_regex("a*"), b"b"]) is None
    assert concatenation([compile_regex("a+"), b"a"]) is None
    digits = concatenation([b"<n>", compile_regex("[0-9]+"), b"</n>"])
    assert digits is not None and digits.accepts(b"<n>123</n>") and not digits.accepts(b"<n></n>")


@settings(max_examples=60, deadline=None)
@given(regexes, regexes, st.integers(1, 40))
def test_pairs_numbered_in_sorted_arrays_as_in_the_dense_array(left: str, right: str, budget: int) -> None:
    """A large product's pairs (searched in sorted arrays) are numbered as a small one's (a dense array): the same
    tables bit for bit, and the same refusal at any budget."""
    a, b = compile_regex(left), compile_regex(right)
    outcomes = []
    for dense_up_to in (ops.DENSE_PAIRS_UP_TO, 0):
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setattr(ops, "DENSE_PAIRS_UP_TO", dense_up_to)
            try:
                product = intersect(a, b, budget)
            except (EmptyLanguageError, StateBudgetError) as error:
                outcomes.append(str(error))
                continue
        outcomes.append((product.byte_class.tolist(), product.class_transitions.tolist(), product.accepting.tolist()))
    assert outcomes[0] == outcomes[1]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sets(st.integers(1, 400), max_size=60), max_size=30))
def test_pairs_numbered_in_two_sorted_runs_as_in_order_met(levels: list[set[int]]) -> None:
    """The sparse numbering (an older and a recent sorted run, joined now and then) numbers each pair as a dict
    filled in order met does: pairs met before keep their number, a level's new pairs follow in ascending order."""
    numbering = ops._PairNumbering(1 << 40)
    oracle = {0: 0}
    for level in levels:
        fresh = np.array(sorted(level), dtype=np.int64)
        ids, new = numbering.number(fresh)
        unmet = [pair for pair in sorted(level) if pair not in oracle]
        for pair in unmet:
            oracle[pair] = len(oracle)
        assert new.tolist() == unmet
        assert ids.tolist() == [oracle[pair] for pair in sorted(level)]
    assert numbering.count == len(oracle)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 400), max_size=80), max_size=30))
def test_moves_numbered_in_the_dense_array_number_each_pair_once(levels: list[list[int]]) -> None:
    """A level's moves (pairs repeating) numbered in the dense array: a pair met before keeps its number, each new
    pair gets one of the next numbers (in no particular order) and every move of it reads that number."""
    numbering = ops._PairNumbering(401)
    known = {0: 0}
    for level in levels:
        moves = np.array(level, dtype=np.int64)
        ids, new = numbering.numbered_moves(moves)
        unmet = {pair for pair in level if pair not in known}
        assert sorted(new.tolist()) == sorted(unmet)
        numbers = dict(zip(new.tolist(), numbering.dense[new].tolist()))
        assert sorted(numbers.values()) == list(range(len(known), len(known) + len(unmet)))
        known.update(numbers)
        assert ids.tolist() == [known[pair] for pair in level]
    assert numbering.count == len(known)


@settings(max_examples=60, deadline=None)
@given(regexes, regexes)
def test_product_moves_kept_narrow_under_a_budget_give_the_same_automaton(left: str, right: str) -> None:
    """Under a budget the product's live moves are kept as int32, without one as int64: the same tables bit for bit."""
    a, b = compile_regex(left), compile_regex(right)
    outcomes = []
    for budget in (None, 1 << 20):
        try:
            product = intersect(a, b, budget)
        except EmptyLanguageError as error:
            outcomes.append(str(error))
            continue
        outcomes.append((product.byte_class.tolist(), product.class_transitions.tolist(), product.accepting.tolist()))
    assert outcomes[0] == outcomes[1]
