"""Bodies laid out in one state space (`grammar.laid_out_moves`) against the layout written out cell by cell:
each body's move on each common class, shifted by the body's offset, the dead move kept."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.pushdown import grammar
from stdsl.compiler.pushdown.grammar import CALL_BASE, laid_out_moves


@st.composite
def bodies(draw: st.DrawFn) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], np.ndarray]:
    """A few random body DFAs over classes (calls a class of their own) and common classes refining them all."""
    calls = draw(st.integers(0, 2))
    found = []
    for _ in range(draw(st.integers(1, 4))):
        states, classes = draw(st.integers(1, 12)), draw(st.integers(1, 5))
        table = np.array(draw(st.lists(st.integers(-1, states - 1), min_size=states * (classes + calls),
                                       max_size=states * (classes + calls))), dtype=np.int32)
        byte_class = np.array(draw(st.lists(st.integers(0, classes - 1), min_size=CALL_BASE, max_size=CALL_BASE)))
        symbol_class = np.concatenate([byte_class, classes + np.arange(calls)]).astype(np.intp)
        found.append((table.reshape(states, classes + calls), symbol_class, np.zeros(states, dtype=bool)))
    key = np.zeros(CALL_BASE, dtype=np.int64)
    for _, symbol_class, _ in found:
        key = key * CALL_BASE + symbol_class[:CALL_BASE]
    _, first_byte = np.unique(key, return_index=True)
    return found, np.sort(first_byte)


@settings(max_examples=200, deadline=None)
@given(bodies(), st.sampled_from([1, 3, 8192]))
def test_bodies_are_laid_out_cell_by_cell(case: tuple, rows: int) -> None:
    found, first_byte = case
    kept = grammar.LAYOUT_ROWS
    grammar.LAYOUT_ROWS = rows
    try:
        got = laid_out_moves(found, first_byte)
    finally:
        grammar.LAYOUT_ROWS = kept
    expected = []
    off = 0
    for table, symbol_class, _ in found:
        for state in range(len(table)):
            moves = [int(table[state, symbol_class[byte]]) for byte in first_byte.tolist()]
            expected.append([move + off if move >= 0 else -1 for move in moves])
        off += len(table)
    assert got.dtype == np.int16 and got.tolist() == expected


def test_a_large_layout_is_int32() -> None:
    table = np.full((2**15, 1), -1, dtype=np.int32)
    table[:-1, 0] = np.arange(1, 2**15)
    got = laid_out_moves([(table, np.zeros(CALL_BASE, dtype=np.intp), np.zeros(2**15, dtype=bool))], np.array([0]))
    assert got.dtype == np.int32 and got[:, 0].tolist() == [*range(1, 2**15), -1]
