"""`step_edges` lists each distinct (state, next state) pair of a step table once, sorted, as a set of pairs would."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from stdsl.compiler.automata.ops import step_edges


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12).flatmap(lambda states: arrays(np.int16, st.tuples(st.just(states), st.integers(0, 9)),
                                                        elements=st.integers(-1, states - 1))))
def test_step_edges_are_the_distinct_live_pairs_in_order(table: np.ndarray) -> None:
    expected = sorted({(state, int(target)) for state, row in enumerate(table) for target in row if target >= 0})
    sources, targets = step_edges(table)
    assert list(zip(sources.tolist(), targets.tolist())) == expected
    assert sources.dtype == np.int64 and targets.dtype == np.int64
