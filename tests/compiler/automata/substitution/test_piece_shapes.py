"""The shapes of many pieces read together equal each piece's shape read alone (the layout's former one-piece
reading, kept here as the oracle), a few pieces walked one by one and many side by side."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.substitution import piece_shapes
from tests.compiler.automata.substitution.test_block_substitution import bodies


def _shape_one_at_a_time(piece: Automaton) -> piece_shapes.PieceShape:
    """A piece's shape read as the layout once read it, one piece at a time (the oracle of `shapes_of`)."""
    if bool(piece.accepting[0]) or bool((piece.live_count[piece.accepting] > 0).any()):
        raise piece_shapes.NotBlockShaped("a piece accepts the empty text or reads on after accepting")
    table = np.asarray(piece.class_transitions, dtype=np.int32)
    forced = piece.forced_byte.tolist()
    head, states, state = bytearray(), [0], 0
    while forced[state] >= 0:
        following = int(table[state, piece.byte_class[forced[state]]])
        if following in states:
            break
        head.append(forced[state])
        states.append(following)
        state = following
    live = table >= 0
    sizes = np.broadcast_to(piece.class_size, table.shape)[live]
    indegree = np.bincount(table[live], weights=sizes, minlength=len(table)).tolist()
    entered = 0
    while entered < len(head) and indegree[states[entered]] == (0 if entered == 0 else 1):
        entered += 1
    return piece_shapes.PieceShape(bytes(head), np.asarray(states, dtype=np.int64), entered, table,
                                         np.asarray(piece.byte_class), np.flatnonzero(piece.accepting),
                                         ~piece.accepting)


shaped_bodies = st.sampled_from([
    *bodies.elements,  # type: ignore[attr-defined]
    ir.literal("ab"),
    ir.seq(ir.literal("a"), ir.alt(ir.literal("b"), ir.literal("é"))),
    ir.seq(ir.star(ir.literal("x")), ir.literal("y")),
])


@settings(max_examples=60, deadline=None)
@given(heads=st.lists(st.text("ab<=", max_size=5), min_size=1, max_size=5), data=st.data())
def test_shapes_read_together_equal_each_piece_read_alone(heads: list[str], data: Any) -> None:
    """`shapes_of` walks the pieces' forced heads (a few one by one, many side by side) and counts the moves into
    them once: each shape equals the
    piece read alone, whether its head stops at the start, at a choice or runs on into the body (byte classes of
    one byte or of many); a piece that reads on after accepting is refused."""
    calls = [build_automaton(ir.seq(ir.literal(head), data.draw(shaped_bodies), ir.literal("."))) for head in heads]
    calls.append(build_automaton(ir.seq(ir.star(ir.literal("ab")), ir.literal("c"))))
    expected = [_shape_one_at_a_time(call) for call in calls]
    many = 1 + piece_shapes.WALKED_APART_UP_TO // len(calls)
    together = piece_shapes.shapes_of(calls * many)
    assert len(calls * many) > piece_shapes.WALKED_APART_UP_TO
    for got, want in zip([*piece_shapes.shapes_of(calls), *together], expected * (1 + many), strict=True):
        assert got.head == want.head
        assert got.head_states.tolist() == want.head_states.tolist()
        assert got.entered_along_head == want.entered_along_head
        assert np.array_equal(got.table, want.table) and got.table.dtype == want.table.dtype
        assert np.array_equal(got.byte_class, want.byte_class)
        assert np.array_equal(got.accepting_states, want.accepting_states)
        assert np.array_equal(got.not_accepting, want.not_accepting)
    reads_on = build_automaton(ir.seq(ir.literal("a"), ir.star(ir.literal("b"))))
    with pytest.raises(piece_shapes.NotBlockShaped):
        piece_shapes.shapes_of([calls[0], reads_on])
