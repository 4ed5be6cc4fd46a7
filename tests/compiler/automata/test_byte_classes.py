"""The byte-class table (`byte_class`, `class_transitions`) equals the 256-column table it stands for.

Checked on random class tables (with repeated and unused columns) and on every schema of the
JSON-Schema-Test-Suite that compiles (a fast slice by default, all of it under `-m slow`): the
expansion is the table, the classes are exactly its distinct columns numbered by first byte, and
every derived table computed from the class form equals the one computed from 256 columns.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata import automaton as automaton_module
from stdsl.compiler.automata.automaton import Automaton, canonical_classes
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.ops import joint_classes
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import CompileError
from tests.data_files import JSON_SCHEMA_SUITE as SUITE

SUITE_FILES = sorted(SUITE.rglob("*.json"))
FAST_FILES = {"enum.json", "pattern.json", "maxLength.json", "const.json", "minimum.json", "type.json"}
MAX_STATES = 50_000


@st.composite
def class_tables(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random (states × classes) table, accepting mask and byte→class map; columns may repeat or go unused."""
    num_states = draw(st.integers(1, 8))
    num_classes = draw(st.integers(1, 7))
    table = np.array(draw(st.lists(st.lists(st.integers(-1, num_states - 1), min_size=num_classes,
                                            max_size=num_classes), min_size=num_states, max_size=num_states)))
    cuts = sorted(draw(st.lists(st.integers(1, 255), max_size=12)))
    runs = np.diff([0, *cuts, 256])
    labels = draw(st.lists(st.integers(0, num_classes - 1), min_size=len(runs), max_size=len(runs)))
    byte_class = np.repeat(labels, runs)
    accepting = np.array(draw(st.lists(st.booleans(), min_size=num_states, max_size=num_states)))
    return table, accepting, byte_class


def _min_bytes_by_columns(table: np.ndarray, accepting: np.ndarray) -> list[int]:
    """Shortest accepted suffix per state by backward BFS over all 256 columns."""
    distance = [0 if accept else -1 for accept in accepting.tolist()]
    queue = deque(np.flatnonzero(accepting).tolist())
    while queue:
        target = queue.popleft()
        for source in np.flatnonzero((table == target).any(axis=1)).tolist():
            if distance[source] < 0:
                distance[source] = distance[target] + 1
                queue.append(source)
    return distance


def _assert_class_form_equals_columns(automaton: Automaton, table: np.ndarray, accepting: np.ndarray) -> None:
    """Every view the class form gives equals what the 256-column `table` says."""
    assert automaton.transitions.shape == (len(table), 256)
    assert np.array_equal(automaton.transitions, table)
    assert np.array_equal(automaton.class_transitions[:, automaton.byte_class], table)
    distinct = np.unique(table, axis=1)
    assert automaton.num_classes == distinct.shape[1]
    first_byte = [int(np.flatnonzero(automaton.byte_class == c)[0]) for c in range(automaton.num_classes)]
    assert first_byte == sorted(first_byte) and first_byte[0] == 0
    assert automaton.byte_class.dtype == np.uint8
    assert automaton.class_transitions.dtype == (np.int16 if len(table) <= 32767 else np.int32)
    live = table >= 0
    assert automaton.live_count.tolist() == live.sum(axis=1).tolist()
    forced = ~accepting & (live.sum(axis=1) == 1)
    assert automaton.forced_byte.tolist() == np.where(forced, np.argmax(live, axis=1), -1).tolist()
    for state in range(len(table)):
        assert automaton.live_bytes(state) == bytes(np.flatnonzero(live[state]).tolist())
        for byte in range(0, 256, 17):
            assert automaton.next_state(state, byte) == table[state, byte]
    assert automaton.min_bytes_to_accept.tolist() == _min_bytes_by_columns(table, accepting)
    _assert_rows_equal_dense(automaton, table)
    reference = Automaton(table, accepting)
    assert np.array_equal(reference.class_transitions, automaton.class_transitions)
    assert np.array_equal(reference.byte_class, automaton.byte_class)
    assert reference.cut_states.tolist() == automaton.cut_states.tolist()


def _assert_rows_equal_dense(automaton: Automaton, table: np.ndarray) -> None:
    """The stored rows (whole rows for branching states, one (class, target) for the rest) read as the dense table."""
    dense = automaton.class_transitions
    live_classes = np.count_nonzero(dense >= 0, axis=1)
    assert automaton.branch_rows.shape == (int((live_classes >= 2).sum()), automaton.num_classes)
    assert np.array_equal(automaton.branch_rows, dense[live_classes >= 2])
    states = np.repeat(np.arange(len(table)), automaton.num_classes)
    classes = np.tile(np.arange(automaton.num_classes), len(table))
    assert automaton.next_states(states, classes).tolist() == dense[states, classes].tolist()
    for state in range(len(table)):
        assert automaton.class_row(state).tolist() == dense[state].tolist()
        for byte in range(3, 256, 29):
            assert automaton.step(state, bytes([byte])) == table[state, byte]


@settings(max_examples=300, deadline=None)
@given(class_tables())
def test_from_classes_equals_the_expanded_table(case: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    table, accepting, byte_class = case
    automaton = Automaton.from_classes(table, accepting, byte_class)
    _assert_class_form_equals_columns(automaton, table[:, byte_class], accepting)


def test_from_classes_rejects_malformed_input() -> None:
    table = np.zeros((2, 3), dtype=np.int32)
    with pytest.raises(ValueError):
        Automaton.from_classes(table, [True, False], np.zeros(255, dtype=np.int64))
    with pytest.raises(ValueError):
        Automaton.from_classes(table, [True, False], np.full(256, 3))
    with pytest.raises(ValueError):
        Automaton.from_classes(np.zeros((2, 0), dtype=np.int32), [True, False], np.zeros(256, dtype=np.int64))
    with pytest.raises(ValueError):
        Automaton.from_classes(np.full((2, 3), 2), [True, False], np.zeros(256, dtype=np.int64))
    with pytest.raises(TypeError):
        Automaton.from_classes(table.astype(float), [True, False], np.zeros(256, dtype=np.int64))


def test_large_automata_use_int32_classes() -> None:
    table = np.full((40_000, 2), -1, dtype=np.int32)
    table[:-1, 1] = np.arange(1, 40_000)
    byte_class = (np.arange(256) == ord("a")).astype(np.int64)
    automaton = Automaton.from_classes(table, np.arange(40_000) == 39_999, byte_class)
    assert automaton.class_transitions.dtype == np.int32 and automaton.num_classes == 2
    assert automaton.branch_rows.shape == (0, 2)
    assert automaton.nbytes == 40_000 * (1 + 4) + 256 + 40_000
    assert automaton.step(0, b"a" * 39_999) == 39_999 and automaton.accepts(b"a" * 39_999)


def _suite_automata(files: list[Path]) -> list[tuple[str, Automaton]]:
    out = []
    for path in files:
        for index, group in enumerate(json.loads(path.read_text())):
            try:
                out.append((f"{path.name}#{index}", build_automaton(schema_to_ir(group["schema"]), MAX_STATES)))
            except CompileError:
                continue
    return out


def _check_suite(files: list[Path]) -> None:
    automata = _suite_automata(files)
    assert automata, "no schema of the slice compiled"
    for where, automaton in automata:
        table = automaton.transitions
        _assert_class_form_equals_columns(automaton, table, automaton.accepting)


def test_suite_slice_class_tables_equal_the_256_column_tables() -> None:
    _check_suite([path for path in SUITE_FILES if path.name in FAST_FILES and path.parent == SUITE])


@pytest.mark.slow
def test_whole_suite_class_tables_equal_the_256_column_tables() -> None:
    _check_suite(SUITE_FILES)


@settings(max_examples=300, deadline=None)
@given(class_tables(), st.sampled_from([1, 5, 1 << 17]))
def test_canonical_classes_keep_the_table_with_one_class_per_distinct_column_by_first_byte(
        case: tuple[np.ndarray, np.ndarray, np.ndarray], cells: int) -> None:
    """Columns compared a block of rows at a time (one row, a few, the whole table) merge exactly the equal ones."""
    table, _, byte_class = case
    kept = automaton_module.COMPARED_CELLS
    automaton_module.COMPARED_CELLS = cells
    try:
        classes, canonical = canonical_classes(table, byte_class)
    finally:
        automaton_module.COMPARED_CELLS = kept
    assert classes[:, canonical].tolist() == table[:, byte_class].tolist()
    columns = [tuple(column) for column in classes.T.tolist()]
    assert len(set(columns)) == len(columns) == int(canonical.max()) + 1
    first_bytes = [int(np.flatnonzero(canonical == c)[0]) for c in range(len(columns))]
    assert first_bytes == sorted(first_bytes)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), min_size=256, max_size=256), min_size=1, max_size=4),
       st.sets(st.integers(0, 255), max_size=12))
def test_joint_classes_are_the_coarsest_refinement_with_singles_apart(maps: list[list[int]],
                                                                     singles: set[int]) -> None:
    """Two bytes share a joint class exactly where every map keeps them together and neither is a single; each
    class's first byte is its smallest (brute force over all byte pairs)."""
    joint, first = joint_classes([np.array(m, dtype=np.uint8) for m in maps], singles)
    key = [tuple(m[byte] for m in maps) + ((byte,) if byte in singles else ()) for byte in range(256)]
    for a in range(256):
        for b in range(a + 1, 256):
            assert (joint[a] == joint[b]) == (key[a] == key[b])
    assert sorted(set(joint.tolist())) == list(range(len(first)))
    assert [min(np.flatnonzero(joint == k)) for k in range(len(first))] == first.tolist()
