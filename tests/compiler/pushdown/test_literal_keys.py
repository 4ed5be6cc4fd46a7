"""`literal_keys` (the count that decides whether a body is laid out, found before its skeleton is built) is the
set of literal keys the skeleton walk finds, over object bodies as the JSON Schema lowering lays them out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.pushdown import quoted_keys
from stdsl.compiler.pushdown.literal_keys import literal_keys, quoted_key
from tests.compiler.pushdown.test_quoted_keys import ALPHABET, COLON, QUOTE, object_bodies


def _skeleton_literal_keys(body: ir.Node) -> frozenset[bytes]:
    keys: dict[quoted_keys.Key, int] = {}
    quoted_keys._skeleton(body, keys, ALPHABET, {})
    return frozenset(key for key in keys if isinstance(key, bytes))


@settings(max_examples=300, deadline=None)
@given(st.lists(object_bodies(), min_size=1, max_size=3), st.booleans())
def test_literal_keys_are_the_skeletons(bodies: list[ir.Node], skeleton_first: bool) -> None:
    """Alike whichever walk meets a shared part first (the skeleton marks keyless parts; `literal_keys` keeps its
    sets), over a body and bodies holding it."""
    nested = [*bodies, ir.alt(*bodies), ir.seq(bodies[0], ir.star(ir.alt(*bodies)))]
    for body in nested if skeleton_first else reversed(nested):
        expected = _skeleton_literal_keys(body)
        assert literal_keys(body) == expected
        assert _skeleton_literal_keys(body) == expected


def test_a_key_of_bytes_not_shared_is_read_as_the_shared_ones() -> None:
    """A key spelled with byte sets of its own (not `ir.literal`'s shared nodes) is still a key."""
    items = (QUOTE, ir.ByteSet(((0x61, 0x61),)), ir.literal("b"), ir.ByteSet(((0x63, 0x63),)), QUOTE, COLON)
    assert quoted_key(items, 1) == (b"abc", 4)
    assert literal_keys(ir.Seq(items)) == frozenset([b"abc"])
    assert quoted_key((*items[:2], ir.ByteSet(((0x22, 0x22),)), *items[4:]), 1) == (None, 1)
