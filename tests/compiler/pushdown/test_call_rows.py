"""`CallRows` against the dense call table it stands for, and a grammar of many states and few calls keeping rows
for its calling states only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.pushdown.call_rows import CallRows, call_rows, classes_read_alike, first_call_clash
from stdsl.compiler.pushdown.grammar import Definition, call_symbol, compile_pushdown


@st.composite
def dense_tables(draw: st.DrawFn) -> np.ndarray:
    """A (states, classes) table of -1 with edges in a few rows."""
    states, classes = draw(st.integers(1, 30)), draw(st.integers(1, 6))
    table = np.full((states, classes), -1, dtype=np.int16)
    for state in draw(st.lists(st.integers(0, states - 1), max_size=5)):
        table[state] = draw(st.lists(st.integers(-1, 9), min_size=classes, max_size=classes))
    return table


@settings(max_examples=200, deadline=None)
@given(dense_tables(), st.data())
def test_rows_read_as_the_dense_table(table: np.ndarray, data: st.DataObject) -> None:
    calling = np.flatnonzero((table >= 0).any(axis=1))
    extra = data.draw(st.lists(st.integers(0, len(table) - 1), max_size=3))
    states = np.union1d(calling, np.array(extra, dtype=np.int64))
    rows = CallRows(states, table[states], len(table))
    assert rows.shape == table.shape
    assert np.array_equal(rows.dense(), table)
    asked = np.array(data.draw(st.lists(st.integers(0, len(table) - 1), max_size=12)), dtype=np.int64)
    assert np.array_equal(rows.of(asked), table[asked].reshape(len(asked), table.shape[1]))
    for state in range(len(table)):
        assert np.array_equal(rows[state], table[state])
    assert np.array_equal(rows.with_rows(table[states] + 1).dense()[states], table[states] + 1)


def test_a_state_without_calls_reads_a_shared_read_only_row() -> None:
    rows = CallRows(np.array([2]), np.array([[0, -1]], dtype=np.int16), 5)
    with pytest.raises(ValueError):
        rows[0][0] = 3
    assert rows[0] is rows[4]
    with pytest.raises(ValueError, match="rows"):
        CallRows(np.array([1, 2]), np.zeros((1, 2), dtype=np.int16), 5)


def test_clashing_calls_give_none() -> None:
    own = np.array([[1, -1, -1], [-1, -1, -1]], dtype=np.int16)
    first = np.array([[False, False, False], [True, False, False], [False, True, True], [False, True, False]])
    assert call_rows(own, first, np.array([0], dtype=np.int32), np.array([1], dtype=np.int32)) is None
    assert call_rows(own, first, np.array([1, 1], dtype=np.int32), np.array([2, 3], dtype=np.int32)) is None
    found = call_rows(own, first, np.array([0, 1], dtype=np.int32), np.array([2, 1], dtype=np.int32))
    assert found is not None
    assert found.dense().tolist() == [[-1, 0, 0], [1, -1, -1]]


def _first_clash_edge_by_edge(own: np.ndarray, first: np.ndarray, call_state: np.ndarray, call_callee: np.ndarray
                              ) -> tuple[int, dict[int, int]] | None:
    """The oracle: a dense table filled edge by edge, stopping at the first edge that reads a class its state
    reads itself (each such class against -1) or an earlier edge took (each against that edge)."""
    table = np.full(own.shape, -1, dtype=np.int64)
    for edge, (q, callee) in enumerate(zip(call_state.tolist(), call_callee.tolist())):
        reads = first[callee]
        if (reads & (own[q] >= 0)).any():
            return edge, {int(c): -1 for c in np.flatnonzero(reads & (own[q] >= 0))}
        if (reads & (table[q] >= 0)).any():
            return edge, {int(c): int(table[q, c]) for c in np.flatnonzero(reads & (table[q] >= 0))}
        table[q, reads] = edge
    return None


@st.composite
def call_edges(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Own moves of a few states, first classes of a few nonterminals, and call edges between them."""
    states, classes, names = draw(st.integers(1, 6)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    own = np.array(draw(st.lists(st.lists(st.sampled_from([-1, -1, -1, 0]), min_size=classes, max_size=classes),
                                 min_size=states, max_size=states)), dtype=np.int16)
    first = np.array(draw(st.lists(st.lists(st.booleans(), min_size=classes, max_size=classes),
                                   min_size=names, max_size=names)), dtype=bool)
    edges = draw(st.lists(st.tuples(st.integers(0, states - 1), st.integers(0, names - 1)), max_size=10))
    call_state = np.array([q for q, _ in edges], dtype=np.int32)
    call_callee = np.array([n for _, n in edges], dtype=np.int32)
    return own, first, call_state, call_callee


@settings(max_examples=400, deadline=None)
@given(call_edges(), st.integers(1, 4))
def test_the_first_clash_is_the_one_an_edge_by_edge_fill_meets(
        edges: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], chunk: int) -> None:
    """`first_call_clash` (all edges at once, gathered a few at a time) names the edge, classes and earlier edges
    a table filled edge by edge stops at, and finds one exactly where `call_rows` refuses."""
    own, first, call_state, call_callee = edges
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("stdsl.compiler.pushdown.call_rows.CALLS_CHECKED", chunk)
        found = first_call_clash(own, first, call_state, call_callee)
        rows = call_rows(own, first, call_state, call_callee)
    expected = _first_clash_edge_by_edge(own, first, call_state, call_callee)
    assert (rows is None) == (expected is not None)
    if expected is None:
        assert found is None
        return
    assert found is not None
    edge, classes, earlier = found
    assert (edge, dict(zip(classes.tolist(), earlier.tolist()))) == expected


def test_a_long_grammar_keeps_only_its_calling_rows() -> None:
    item = ir.literal("".join(chr(97 + (i * 7919) % 26) for i in range(3000)))
    main = ir.seq(ir.literal("["), call_symbol(0), ir.literal("]"))
    grammar = compile_pushdown(main, [Definition("item", ir.alt(item, ir.seq(ir.literal("("), call_symbol(0),
                                                                              ir.literal(")"))))])
    calling = np.unique(grammar.call_state)
    assert np.array_equal(grammar.calls.states, calling)
    assert grammar.num_states > 50 * len(calling)
    assert grammar.calls.nbytes < grammar.own_classes.nbytes / 20


def test_classes_read_alike_merge_bytes_by_moves_and_calls_at_a_wide_enough_dtype() -> None:
    own = np.array([[1, 1, -1, -1], [-1, -1, -1, -1]], dtype=np.int16)
    rows = CallRows(np.array([1]), np.array([[-1, -1, 40000, 40000]], dtype=np.int32), 2)
    byte_class = np.repeat(np.arange(4), 64)
    merged_own, merged_calls, merged = classes_read_alike(own, rows, byte_class)
    assert merged.tolist() == [0] * 128 + [1] * 128
    assert merged_own.tolist() == [[1, -1], [-1, -1]]
    assert merged_calls.dense().tolist() == [[-1, -1], [-1, 40000]]
