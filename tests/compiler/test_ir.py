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


_SHAPES = st.recursive(
    st.tuples(st.just("bytes"), st.integers(0, 3)),
    lambda inner: st.one_of(
        st.tuples(st.just("seq"), st.lists(inner, min_size=2, max_size=3)),
        st.tuples(st.just("alt"), st.lists(inner, min_size=2, max_size=3)),
        st.tuples(st.just("repeat"), inner, st.integers(0, 2))),
    max_leaves=8)


def _fresh(shape: tuple) -> ir.Node:
    """A new node tree of `shape` (no object shared with an earlier call), built with the raw constructors."""
    kind = shape[0]
    if kind == "bytes":
        return ir.ByteSet(((shape[1], shape[1] + shape[1] % 2),))
    if kind == "repeat":
        return ir.Repeat(_fresh(shape[1]), shape[2], shape[2] + 1)
    items = tuple(_fresh(item) for item in shape[1])
    return ir.Seq(items) if kind == "seq" else ir.Alt(items)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SHAPES, min_size=2, max_size=5), st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)),
                                                          max_size=30))
def test_equality_stays_structural_after_equal_nodes_are_linked(shapes: list[tuple], pairs: list[tuple]) -> None:
    # Two fresh builds of each shape; comparing pairs in any order links equal nodes, and every answer, before and
    # after, must still be the shapes' own equality (hashes too).
    nodes = [(shape, _fresh(shape)) for shape in shapes for _ in range(2)]
    for left, right in pairs + [(i, j) for i in range(len(nodes)) for j in range(len(nodes))]:
        (shape_a, a), (shape_b, b) = nodes[left % len(nodes)], nodes[right % len(nodes)]
        assert (a == b) == (shape_a == shape_b)
        assert shape_a != shape_b or hash(a) == hash(b)
    for shape, node in nodes:
        copy = pickle.loads(pickle.dumps(node))
        assert "_same" not in copy.__dict__ and copy == node == _fresh(shape)


def test_equal_nodes_built_apart_compare_in_linear_time() -> None:
    # Each level uses the level below twice: as trees the two 60-level nodes have 2^60 leaves, as DAGs 3 nodes a
    # level. A walk of the trees would never end; with equal sub-nodes linked once found equal, this is immediate.
    def tower(levels: int, top: int) -> ir.Node:
        node: ir.Node = ir.ByteSet(((0, 0),))
        for level in range(levels):
            node = ir.Seq((ir.Alt((node, ir.ByteSet(((level, level),)))), node))
        return ir.Seq((node, ir.ByteSet(((top, top),))))

    assert tower(60, 1) == tower(60, 1)
    assert tower(60, 1) != tower(60, 2)
    assert ir.alt(tower(60, 1), tower(60, 1), tower(60, 2)) == ir.Alt((tower(60, 1), tower(60, 2)))


NODES = st.sampled_from([ir.literal("ab"), ir.byte_set([(0, 9)]), ir.EMPTY, ir.star(ir.literal("x")),
                         ir.alt(ir.literal("a"), ir.literal("b")), ir.Embedded(None, None)])


@settings(max_examples=100, deadline=None)
@given(st.lists(NODES, max_size=4), st.lists(NODES, max_size=4), st.booleans())
def test_the_empty_language_absorbs_a_sequence_wherever_it_stands(before: list[ir.Node], after: list[ir.Node],
                                                                   fresh: bool) -> None:
    nothing = ir.Alt(()) if fresh else ir.NOTHING
    assert ir.seq(*before, nothing, *after) == ir.NOTHING
    assert ir.seq(*before, ir.seq(ir.literal("c"), nothing), *after) == ir.NOTHING
    assert ir.seq(*before, *after) != ir.NOTHING


def _bytes_walked(node: ir.Node) -> bytes | None:
    """`literal_bytes` read item by item (the oracle of its shortcuts)."""
    parts = node.items if isinstance(node, ir.Seq) else (node,)
    data = bytearray()
    for part in parts:
        if not isinstance(part, ir.ByteSet) or len(part.ranges) != 1 or part.ranges[0][0] != part.ranges[0][1]:
            return None
        if part.ranges[0][0] > 255:
            return None
        data.append(part.ranges[0][0])
    return bytes(data)


_ITEMS = st.one_of(
    st.integers(0, 255).map(lambda b: ir.literal(bytes([b]))),
    st.integers(0, 255).map(lambda b: ir.ByteSet(((b, b),))),
    st.integers(256, 300).map(lambda s: ir.ByteSet(((s, s),))),
    st.integers(0, 254).map(lambda b: ir.ByteSet(((b, b + 1),))),
    st.just(ir.star(ir.literal("a"))),
    st.just(ir.alt(ir.literal("a"), ir.literal("b"))),
)
"""Sequence items: the shared single-byte nodes, equal ones made apart, symbols past 255, wider sets, other nodes."""


@settings(max_examples=300, deadline=None)
@given(st.lists(_ITEMS, max_size=8))
def test_literal_bytes_of_any_sequence_is_its_bytes_read_one_by_one(items: list[ir.Node]) -> None:
    node = ir.Seq(tuple(items))
    assert ir.literal_bytes(node) == _bytes_walked(node)
    for item in items:
        assert ir.literal_bytes(item) == _bytes_walked(item)
    sequenced, data = ir.seq(*items), _bytes_walked(node)
    if data is not None:
        assert sequenced == ir.literal(data) and hash(sequenced) == hash(ir.literal(data))


def _repeat_by_equality(item: ir.Node, lo: int, hi: int | None) -> ir.Node:
    """`repeat` as it was written, by comparing the item to the empty string and the empty language (the oracle)."""
    if hi == 0 or item == ir.EMPTY:
        return ir.EMPTY
    if item == ir.NOTHING:
        return ir.EMPTY if lo == 0 else ir.NOTHING
    if lo == 1 and hi == 1:
        return item
    return ir.Repeat(item, lo, hi)


_REPEATED = st.one_of(_SHAPES.map(_fresh), NODES, st.sampled_from([
    ir.Seq(()), ir.Alt(()), ir.seq(ir.EMPTY, ir.EMPTY), ir.alt(), ir.literal(b"ab"), ir.literal(b""),
    ir.Seq((ir.EMPTY,)), ir.Alt((ir.NOTHING,)), ir.EmbeddedGrammar("g", ir.EMPTY, (), (), True)]))


@settings(max_examples=300, deadline=None)
@given(_REPEATED, st.integers(0, 3), st.one_of(st.none(), st.integers(0, 3)))
def test_repeat_tells_the_empty_string_and_language_as_equality_does(item: ir.Node, lo: int, hi: int | None) -> None:
    if hi is not None and hi < lo:
        return
    assert ir.repeat(item, lo, hi) == _repeat_by_equality(item, lo, hi)
