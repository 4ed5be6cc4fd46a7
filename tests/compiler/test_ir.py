"""IR nodes: a literal from `literal` is the same node, hash included, as its bytes sequenced any other way."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir


def _spelled_out(data: bytes) -> ir.Node:
    """The same string as a sequence of one-byte sets, built without `literal`."""
    return ir.seq(*(ir.byte_set([(b, b)]) for b in data))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=12))
def test_literal_equals_and_hashes_like_its_spelled_out_bytes(data: bytes) -> None:
    node, other = ir.literal(data), _spelled_out(data)
    assert node == other and other == node
    assert hash(node) == hash(other)
    assert ir.literal_bytes(node) == ir.literal_bytes(other) == data
    assert ir.alt(node, other, ir.literal(data)) == node
    copy = pickle.loads(pickle.dumps(node))
    assert copy == node and hash(copy) == hash(node)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=8), st.binary(min_size=1, max_size=8))
def test_literals_of_different_strings_differ(first: bytes, second: bytes) -> None:
    assert (ir.literal(first) == ir.literal(second)) == (first == second)
    assert (ir.literal(first) == _spelled_out(second)) == (first == second)


def test_a_literal_differs_from_a_sequence_with_a_wider_byte_set() -> None:
    wide = ir.seq(ir.byte_set([(97, 98)]), ir.byte_set([(99, 99)]))
    assert ir.literal_bytes(wide) is None
    assert ir.literal("ac") != wide and ir.literal("bc") != wide
    assert ir.alt(ir.literal("ac"), wide, ir.literal("ac")) == ir.Alt((ir.literal("ac"), wide))


def test_a_sequence_holding_a_symbol_past_255_is_no_literal_and_still_hashes() -> None:
    node = ir.Seq((ir.ByteSet(((44, 44),)), ir.ByteSet(((256, 256),))))
    assert ir.literal_bytes(node) is None
    assert node == ir.Seq((ir.ByteSet(((44, 44),)), ir.ByteSet(((256, 256),)))) and isinstance(hash(node), int)


def test_distinct_nodes_yields_each_shared_subtree_once() -> None:
    digit = ir.byte_set([(0x30, 0x39)])
    node = ir.seq(ir.repeat(digit, 1, 3), ir.alt(digit, ir.literal("ab")), digit)
    nodes = list(ir.distinct_nodes(node))
    assert nodes[0] is node
    assert sum(current is digit for current in nodes) == 1
    assert len({id(current) for current in nodes}) == len(nodes)
    assert any(ir.literal_bytes(current) == b"ab" for current in nodes)
