"""A piece's region found from its shape (`entered_regions`) is the one the breadth-first search finds: the same
states reached inside and the same accepting ends, on random tables in breadth-first shape and on others."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.substitution.entered_regions import entered_region, moved_into_past_start


def _searched(table: np.ndarray, accepting: np.ndarray, states: np.ndarray) -> tuple[set[int], set[int]]:
    """The region by search, as `subsets._region` defines it: `states` and the non-accepting states
    reached through non-accepting ones inside, the accepting ones reached (not among `states`) at the ends."""
    inside = set(states.tolist())
    ends: set[int] = set()
    pending = list(inside)
    while pending:
        for target in table[pending.pop()].tolist():
            if target >= 0 and target not in inside and target not in ends:
                if accepting[target]:
                    ends.add(target)
                else:
                    inside.add(target)
                    pending.append(target)
    return inside, ends


@st.composite
def pieces(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random table (mostly one whose every state past 0 is entered from a lower one, accepting states without
    moves), its accepting mask and the states a region is entered at (mostly the start's successors)."""
    size = draw(st.integers(2, 12))
    classes = draw(st.integers(1, 4))
    accepting = np.array([False] + draw(st.lists(st.booleans(), min_size=size - 1, max_size=size - 1)))
    table = np.array(draw(st.lists(st.lists(st.integers(-1, size - 1), min_size=classes, max_size=classes),
                                   min_size=size, max_size=size)), dtype=np.int32)
    if draw(st.booleans()):
        entering = np.full((size, size - 1), -1, dtype=np.int32)
        for state in range(1, size):
            entering[draw(st.sampled_from([s for s in range(state) if not accepting[s]])), state - 1] = state
        table = np.hstack([table, entering])
        table[accepting] = -1
    first = table[0]
    successors = set(first[(first >= 0) & ~accepting[np.maximum(first, 0)]].tolist())
    extra = set(draw(st.lists(st.integers(0, size - 1), max_size=3)))
    states = successors | extra if draw(st.booleans()) else extra
    return table, accepting, np.array(sorted(states), dtype=np.int64)


@settings(max_examples=400, deadline=None)
@given(pieces())
def test_the_region_from_the_shape_is_the_searched_one(piece: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    table, accepting, states = piece
    moved_into = moved_into_past_start(table, accepting)
    if moved_into is None:
        return
    found = entered_region(table, accepting, moved_into, states)
    if found is None:
        return
    inside, ends = found
    assert (set(inside.tolist()), set(ends.tolist())) == _searched(table, accepting, states)


def test_a_chain_entered_at_its_first_states_is_answered_from_its_shape() -> None:
    table = np.array([[1, 2], [3, -1], [3, -1], [-1, 4], [-1, -1]], dtype=np.int32)
    accepting = np.array([False, False, False, False, True])
    moved_into = moved_into_past_start(table, accepting)
    assert moved_into is not None
    inside, ends = entered_region(table, accepting, moved_into, np.array([1, 2]))  # type: ignore[misc]
    assert inside.tolist() == [1, 2, 3] and ends.tolist() == [4]
    assert entered_region(table, accepting, moved_into, np.array([1])) is None
