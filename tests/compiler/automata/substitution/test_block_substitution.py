"""The block layout of substituted pieces accepts exactly what the general subset construction accepts, and a front
kept from an earlier list is reused only where the new pieces' heads fit it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton, BlockKey
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization.minimize import shrink
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.automata.substitution import blocks as block_substitution
from stdsl.compiler.automata.substitution.piece_shapes import NotBlockShaped, piece_shapes
from stdsl.compiler.automata.substitution.placeholders import PLACEHOLDER, general_substitute, substitute
from tests.compiler.accepting_walks import random_accepted
from tests.compiler.language_difference import accepts, difference

CALL = ir.ByteSet(((PLACEHOLDER, PLACEHOLDER),))

skeletons = st.sampled_from([
    CALL,
    ir.seq(ir.star(ir.ByteSet(((ord("a"), ord("c")),))), CALL),
    ir.seq(CALL, ir.star(ir.seq(ir.literal(","), CALL))),
    ir.alt(ir.literal("<a"), ir.seq(ir.literal("<"), CALL, ir.optional(ir.seq(ir.literal(";"), CALL)))),
    ir.seq(ir.star(ir.ByteSet(((ord("<"), ord("<")), (ord("x"), ord("x"))))), CALL, ir.literal("!")),
])
"""Skeletons with calls first, after free text that shares bytes with the heads, repeated, and beside text."""

bodies = st.sampled_from([
    ir.literal("1"),
    ir.literal("1x"),
    ir.plus(ir.ByteSet(((ord("0"), ord("9")),))),
    ir.seq(ir.literal("{"), ir.star(ir.ByteSet(((ord("a"), ord("b")),))), ir.literal("}")),
    ir.alt(ir.literal("ab"), ir.literal("<b"), ir.seq(ir.literal("x"), ir.star(ir.literal("ab")))),
])


@st.composite
def pieces(draw: Any) -> list[Automaton]:
    """Calls `<name=` body `.`, names over a two-letter alphabet so that heads share prefixes and bodies start with
    bytes the skeleton or another call also reads; a name may repeat (two structural tags with one begin), so that
    one call's text can end on the byte where another's goes on (`<a=1.` beside `<a=1x.`)."""
    names = draw(st.lists(st.text("ab", min_size=1, max_size=4), min_size=1, max_size=4))
    return [build_automaton(ir.seq(ir.literal(f"<{name}="), draw(bodies), ir.literal("."))) for name in names]


def _skeleton(node: ir.Node) -> tuple[np.ndarray, np.ndarray]:
    dfa = determinize(build_nfa(node), 10_000, PLACEHOLDER + 1)
    table, accepting = shrink(dfa.table, dfa.accepting, all_reachable=True)
    return np.asarray(table, dtype=np.int32)[:, dfa.byte_class], np.asarray(accepting, dtype=bool)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=skeletons, calls=pieces(), seed=st.integers(0, 2**32 - 1))
def test_block_layout_accepts_exactly_what_the_general_construction_accepts(node: ir.Node, calls: list[Automaton],
                                                                            seed: int) -> None:
    skeleton, accepting = _skeleton(node)
    general = general_substitute(skeleton, accepting, [calls])
    try:
        blocks = block_substitution.block_substitute(skeleton, accepting, [calls])
    except NotBlockShaped:
        texts = [bytes(shape.head) for shape in piece_shapes(calls)]
        ends_beside = [i != j and b.startswith(a[:-1]) for i, a in enumerate(texts) for j, b in enumerate(texts)]
        assert any(ends_beside), texts  # a call's text ends where another's goes on (or two are the same)
        blocks = substitute(skeleton, accepting, [calls])
    assert difference(general, blocks) is None
    canonical = Automaton.from_classes(blocks.class_transitions, blocks.accepting, blocks.byte_class)
    assert np.array_equal(canonical.byte_class, blocks.byte_class)
    assert np.array_equal(canonical.class_transitions, blocks.class_transitions)
    rng = np.random.default_rng(seed)
    for machine, other in ((general, blocks), (blocks, general)):
        for _ in range(3):
            text = random_accepted(machine, rng)
            assert accepts(other, text)
            cut = int(rng.integers(len(text) + 1))
            mutated = text[:cut] + bytes([int(rng.integers(256))]) + text[cut:]
            assert accepts(machine, mutated) == accepts(other, mutated)


def test_a_kept_front_is_reused_only_where_the_heads_fit_it() -> None:
    skeleton, accepting = _skeleton(ir.seq(ir.star(ir.ByteSet(((ord("a"), ord("c")),))), CALL))
    first = [build_automaton(ir.seq(ir.literal(f"<{name}="), ir.literal("1"), ir.literal("."))) for name in ("ab", "b")]
    block_substitution.block_substitute(skeleton, accepting, [first])
    before = block_substitution._FRONTS.stats()
    body_changed = [first[0], build_automaton(ir.seq(ir.literal("<b="), ir.plus(ir.literal("2")), ir.literal(".")))]
    reused = block_substitution.block_substitute(skeleton, accepting, [body_changed])
    middle = block_substitution._FRONTS.stats()
    assert (middle.hits - before.hits, middle.misses - before.misses) == (1, 0)
    assert difference(general_substitute(skeleton, accepting, [body_changed]), reused) is None
    renamed = [first[0], build_automaton(ir.seq(ir.literal("<aa="), ir.literal("1"), ir.literal(".")))]
    rebuilt = block_substitution.block_substitute(skeleton, accepting, [renamed])
    after = block_substitution._FRONTS.stats()
    assert after.misses - middle.misses == 1
    assert difference(general_substitute(skeleton, accepting, [renamed]), rebuilt) is None


def test_a_kept_front_is_not_reused_where_a_piece_ends_at_its_entry() -> None:
    """`<a=1.` is alone after `<a=1.` beside `<a=1x.`; a front built where the second call went on past that byte
    (`<a=1.2.`) must not serve a list where it ends there: its block has no state to enter (a structural tag's two
    literal tags with one begin met this)."""
    skeleton, accepting = _skeleton(ir.seq(ir.star(ir.ByteSet(((ord("a"), ord("c")),))), CALL))
    longer = [build_automaton(ir.literal(text)) for text in ("<a=1x.", "<a=1.2.")]
    block_substitution.block_substitute(skeleton, accepting, [longer])
    ending = [longer[0], build_automaton(ir.literal("<a=1."))]
    general = general_substitute(skeleton, accepting, [ending])
    assert accepts(general, b"ab<a=1.")
    try:
        laid_out = block_substitution.block_substitute(skeleton, accepting, [ending])
    except NotBlockShaped:
        return
    assert difference(general, laid_out) is None


def test_block_keys_are_equal_exactly_where_the_blocks_are() -> None:
    """A block laid out again (another list, the piece built afresh) has an equal key, hashed alike; a changed piece's
    block has a key equal to no other (keys name tables derived per block: `control.budget.block_bound`)."""
    skeleton, accepting = _skeleton(ir.seq(ir.star(ir.ByteSet(((ord("a"), ord("c")),))), CALL))

    def calls(second: ir.Node) -> list[Automaton]:
        return [build_automaton(ir.seq(ir.literal(f"<{name}="), body, ir.literal(".")))
                for name, body in (("ab", ir.literal("1")), ("b", second))]

    first = block_substitution.block_substitute(skeleton, accepting, [calls(ir.literal("1"))]).blocks
    again = block_substitution.block_substitute(skeleton, accepting, [calls(ir.literal("1"))]).blocks
    changed = block_substitution.block_substitute(skeleton, accepting, [calls(ir.plus(ir.literal("2")))]).blocks
    assert first[0].key is not again[0].key and [span.key for span in first] == [span.key for span in again]
    assert [hash(span.key) for span in first] == [hash(span.key) for span in again]
    assert first[0].key == changed[0].key and first[1].key != changed[1].key and first[0].key != first[1].key
    assert {span.key: span.size for span in first}[again[1].key] == first[1].size
    same_bytes = BlockKey(first[1].key.table.astype(np.int64), first[1].key.byte_class)
    assert same_bytes != first[1].key


@pytest.mark.parametrize("text", [b"<", b"<a", b"<ab=1", b"ca<b=1.", b"<ab=1."])
def test_a_reply_cut_inside_a_head_is_read_the_same_both_ways(text: bytes) -> None:
    skeleton, accepting = _skeleton(ir.seq(ir.star(ir.ByteSet(((ord("a"), ord("c")),))), CALL))
    calls = [build_automaton(ir.seq(ir.literal(f"<{name}="), ir.literal("1"), ir.literal("."))) for name in ("ab", "b")]
    blocks = block_substitution.block_substitute(skeleton, accepting, [calls])
    general = general_substitute(skeleton, accepting, [calls])
    state_a = state_b = 0
    for byte in text:
        state_a = int(blocks.transitions[state_a, byte]) if state_a >= 0 else -1
        state_b = int(general.transitions[state_b, byte]) if state_b >= 0 else -1
    assert (state_a >= 0) == (state_b >= 0)
    assert accepts(blocks, text) == accepts(general, text)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), count=st.integers(1, 5))
def test_block_rows_split_together_equal_each_block_split_alone(data: Any, count: int) -> None:
    """`split_rows` stacks the blocks not split yet for these classes and splits them in one pass: each block's sole
    classes, sole targets and whole rows are what its own rows split alone give (a block listed twice too)."""
    blocks = []
    for _ in range(count):
        states, width = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
        cells = st.sampled_from([-1, -1, block_substitution.RETURN, *range(states)])
        table = np.array(data.draw(st.lists(cells, min_size=states * width, max_size=states * width)),
                         dtype=np.int32).reshape(states, width)
        byte_class = np.array(data.draw(st.lists(st.integers(0, width - 1), min_size=256, max_size=256)))
        blocks.append(block_substitution._Block(table, byte_class, np.zeros(1, dtype=np.int32),
                                                BlockKey(table, byte_class)))
    representative = np.unique(np.stack([block.byte_class for block in blocks], axis=1), axis=0,
                               return_index=True)[1]
    listed = [*blocks, blocks[0]]
    for got, block in zip(block_substitution.split_rows(listed, representative), listed, strict=True):
        alone = block_substitution._Rows.of(block.table[:, block.byte_class[representative]])
        assert np.array_equal(got.sole_class, alone.sole_class)
        assert np.array_equal(got.sole_target, alone.sole_target)
        assert np.array_equal(got.branch_rows, alone.branch_rows) and got.branch_rows.shape == alone.branch_rows.shape
    again = block_substitution.split_rows(listed, representative)
    assert all(first is second for first, second in zip(block_substitution.split_rows(listed, representative), again))
