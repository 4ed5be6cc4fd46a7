"""`call_moves` reads only the calling states, and gives the call edges `np.nonzero` over every state and call
symbol gives, in the same order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.pushdown.grammar import call_moves


@st.composite
def tables_and_call_classes(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """A class table (mostly dead moves) and the classes of some call symbols, several symbols to a class."""
    states = draw(st.integers(0, 12))
    classes = draw(st.integers(1, 6))
    cells = draw(st.lists(st.integers(-1, states + 2).map(lambda v: v if v % 3 == 0 else -1),
                          min_size=states * classes, max_size=states * classes))
    table = np.array(cells, dtype=np.int32).reshape(states, classes)
    symbols = draw(st.lists(st.integers(0, classes - 1), max_size=20))
    return table, np.array(symbols, dtype=np.intp)


@settings(max_examples=300, deadline=None)
@given(tables_and_call_classes())
def test_call_moves_is_nonzero_over_every_symbol(case: tuple[np.ndarray, np.ndarray]) -> None:
    table, call_classes = case
    calls = table[:, call_classes]
    states, called = np.nonzero(calls >= 0)
    found = call_moves(table, call_classes)
    for mine, theirs in zip(found, (states, called, calls[states, called])):
        assert mine.tolist() == theirs.tolist()
