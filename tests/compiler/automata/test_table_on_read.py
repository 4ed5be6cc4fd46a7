"""An embedded leaf's table expanded on read (`TableOnRead`) reads as the automaton's 256-column table: its shape
without expanding, the same cells through numpy, indexing and the array's own methods."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import build_automaton, embedded_leaf
from stdsl.compiler.automata.table_on_read import TableOnRead
from stdsl.compiler.regex.parser import parse_regex

PATTERNS = st.sampled_from(["[a-f0-9]{8}", "(?:ab|c)*d", "x{2,5}y?", "[^\"\\\\]{0,20}", "é+|ü"])


@settings(max_examples=30, deadline=None)
@given(pattern=PATTERNS)
def test_the_table_on_read_is_the_automatons_table(pattern: str) -> None:
    automaton = build_automaton(parse_regex(pattern))
    table = TableOnRead(automaton)
    assert table.shape == (automaton.num_states, 256) and len(table) == automaton.num_states
    assert table._table is None
    expected = automaton.transitions
    assert np.array_equal(np.asarray(table), expected)
    assert np.asarray(table, dtype=np.int64).dtype == np.int64
    assert np.array_equal(table[0], expected[0])
    assert table.astype("<i8").tobytes() == expected.astype("<i8").tobytes()
    assert table.nbytes == automaton.nbytes + expected.nbytes


def test_an_embedded_leaf_builds_back_to_its_automaton_without_expanding() -> None:
    automaton = build_automaton(parse_regex("[a-z]{3,40}"))
    leaf = embedded_leaf(automaton, minimal=True)
    assert isinstance(leaf.transitions, TableOnRead)
    assert build_automaton(leaf) is automaton
    assert leaf.transitions._table is None


def test_a_leaf_with_its_table_on_read_pickles_and_copies() -> None:
    import copy
    import pickle

    automaton = build_automaton(parse_regex("[0-9]{2,6}"))
    leaf = embedded_leaf(automaton, minimal=True)
    for again in (pickle.loads(pickle.dumps(leaf)), copy.deepcopy(leaf), copy.copy(leaf)):
        assert np.array_equal(np.asarray(again.transitions), automaton.transitions)
