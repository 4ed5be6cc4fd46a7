"""An embedded automaton's moves as the NFA builder reads them (`embedded_moves.dfa_edges`), by either reading,
against a walk over every cell."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata import embedded_moves


def _moves_cell_by_cell(table: np.ndarray) -> list[list[tuple[tuple[tuple[int, int], ...], int]]]:
    """Oracle for `dfa_edges`: each row read symbol by symbol, runs of one target joined, targets in the order of
    their first symbol."""
    moves = []
    for row in table.tolist():
        by_target: dict[int, list[tuple[int, int]]] = {}
        for symbol, target in enumerate(row):
            if target < 0:
                continue
            spans = by_target.setdefault(target, [])
            if spans and spans[-1][1] == symbol - 1 and row[symbol - 1] == target:
                spans[-1] = (spans[-1][0], symbol)
            else:
                spans.append((symbol, symbol))
        moves.append([(tuple(spans), target) for target, spans in by_target.items()])
    return moves


@settings(max_examples=300, deadline=None)
@given(st.data())
@pytest.mark.parametrize("read", [embedded_moves.dfa_edges, embedded_moves._moves_by_runs])
def test_dfa_edges_agree_with_reading_each_cell(read: Any, data: st.DataObject) -> None:
    """`dfa_edges` (row by row) and `_moves_by_runs` (columns equal in every row read once, runs grouped with
    numpy) give each state's moves as a walk over every cell does, their symbol sets numbered in the order the
    moves meet them, for tables of every width the builder meets (bytes; a pushdown body's call columns past 255,
    more than 64 distinct column runs)."""
    states = data.draw(st.integers(1, 10))
    width = data.draw(st.sampled_from([1, 2, 7, 256, 259, 300]))
    blocks = data.draw(st.integers(1, width))
    block_of_column = np.sort(np.asarray(data.draw(st.lists(st.integers(0, blocks - 1), min_size=width,
                                                            max_size=width))))
    rows = np.asarray(data.draw(st.lists(st.lists(st.integers(-1, states - 1), min_size=blocks, max_size=blocks),
                                         min_size=states, max_size=states)))
    table = rows[:, block_of_column].astype(np.int32)
    if data.draw(st.booleans()):
        table = np.asfortranarray(table)
    symbol_sets, moves = read(table)
    met = [number for out in moves for number, _ in out]
    assert list(dict.fromkeys(met)) == list(range(len(symbol_sets)))
    assert [[(symbol_sets[number], target) for number, target in out] for out in moves] == \
        _moves_cell_by_cell(table)
