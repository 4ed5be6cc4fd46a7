"""Quoted keys in a body's sequences, and the set of literal keys under a node, kept on the node.

`quoted_keys` lays a body out only where it holds `KEYED_FROM` literal keys or more; counting them with its skeleton
walk cost every body with calls that walk (kb_233: 112 of its 124 such bodies then fell back, two thirds of the
walk's 16 ms).  The set kept here is found in one walk over the distinct nodes of all bodies together (a part shared
by several bodies is walked once), and it is the set of literal keys the skeleton walk finds, so that the count
decides alike.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from stdsl.compiler import ir

QUOTE = 0x22
BACKSLASH = 0x5C
QUOTE_SET = ir.literal(b'"')
COLON_SET = ir.literal(b":")

LITERAL_KEYS = "_literal_keys"
"""Keeps (in a node's `__dict__`, as `ir` keeps its hash) the literal keys found under the node (`literal_keys`)."""
KEYLESS = "_keyless"
"""Marks (in a node's `__dict__`) a part found to hold no quoted key (`quoted_keys._skeleton` sets it)."""
NO_KEYS: frozenset[bytes] = frozenset()
_KEY_BYTE = {id(ir.literal(bytes([byte]))): byte for byte in range(0x20, 256) if byte not in (QUOTE, BACKSLASH)}
"""The byte of each shared single-byte node (`ir.literal`'s) that a key's text may hold, by the node's identity: a
key's bytes are read with one dictionary lookup each rather than a look at the node's ranges."""

Key = bytes | ir.Node
"""A placeholder's text: a quoted literal's bytes between the quotes, the embedded DFA between them, or the
expression between them (a free-form string's text: its DFA is built once the body is found worth laying out)."""


def quoted_key(items: tuple[ir.Node, ...], start: int) -> tuple[Key | None, int]:
    """The key from `items[start]` up to a closing quote followed by a colon (plain single bytes, or one embedded DFA
    over bytes that never reads a quote) and the closing quote's index, or (None, start)."""
    if start < len(items) and isinstance(items[start], ir.Embedded):
        embedded = items[start]
        assert isinstance(embedded, ir.Embedded)
        transitions = np.asarray(embedded.transitions)
        if (start + 2 < len(items) and items[start + 1] is QUOTE_SET and items[start + 2] is COLON_SET
                and transitions.shape[1:] == (256,)
                and not (transitions[np.asarray(embedded.accepting, dtype=bool), QUOTE] >= 0).any()):
            return embedded, start + 1
        return None, start
    text = bytearray()
    index, count = start, len(items)
    while index < count and (byte := _KEY_BYTE.get(id(items[index]))) is not None:
        text.append(byte)
        index += 1
    for index in range(index, count):
        item = items[index]
        if item is QUOTE_SET:
            return (bytes(text), index) if index + 1 < len(items) and items[index + 1] is COLON_SET else (None, start)
        if not isinstance(item, ir.ByteSet) or len(item.ranges) != 1:
            return None, start
        lo, hi = item.ranges[0]
        if lo != hi or lo > 255:
            return None, start
        if lo == QUOTE or lo == BACKSLASH or lo < 0x20:
            return None, start
        text.append(lo)
    return None, start


def key_at(items: tuple[ir.Node, ...], index: int) -> tuple[Key | None, int]:
    """The key whose opening quote is `items[index]`: a quoted key (`quoted_key`) or, between two quotes, one
    expression (a free-form string's text), with its closing quote's index; (None, index) where there is none."""
    key, end = quoted_key(items, index + 1)
    if (key is None and index + 2 < len(items) and items[index + 2] is QUOTE_SET
            and not isinstance(items[index + 1], (ir.ByteSet, ir.Embedded, ir.EmbeddedGrammar))):
        return items[index + 1], index + 2
    return key, end


def literal_keys(node: ir.Node) -> frozenset[bytes]:
    """The literal keys (texts of plain bytes) that `quoted_keys._skeleton` finds under `node`, kept on the node."""
    fields = node.__dict__
    known = fields.get(LITERAL_KEYS)
    if known is not None:
        return known  # type: ignore[no-any-return]
    if KEYLESS in fields:
        return NO_KEYS
    if isinstance(node, ir.Seq):
        if "_literal" in fields:
            return NO_KEYS
        found = _sequence_literal_keys(node.items)
    elif isinstance(node, ir.Alt):
        found = NO_KEYS.union(*[literal_keys(item) for item in node.items])
    elif isinstance(node, ir.Repeat):
        found = literal_keys(node.item)
    else:
        return NO_KEYS
    fields[LITERAL_KEYS] = found
    return found


def _sequence_literal_keys(items: tuple[ir.Node, ...]) -> frozenset[bytes]:
    """The literal keys of a sequence's items, read as `quoted_keys._sequence_keys` reads them."""
    own: list[bytes] = []
    parts: list[frozenset[bytes]] = []
    for key, item in sequence_parts(items):
        if key is not None:
            if isinstance(key, bytes):
                own.append(key)
        elif not isinstance(item, ir.ByteSet):
            parts.append(literal_keys(item))
    return NO_KEYS.union(own, *parts)


def sequence_parts(items: tuple[ir.Node, ...]) -> Iterator[tuple[Key | None, ir.Node]]:
    """A sequence's items as the keyed layout reads them: (key, its opening quote) for each quoted key (`key_at`: the
    items from that quote to the closing one) and (None, item) for every other item."""
    index, count = 0, len(items)
    while index < count:
        item = items[index]
        if item is QUOTE_SET:
            key, end = key_at(items, index)
            if key is not None:
                yield key, item
                index = end + 1
                continue
        yield None, item
        index += 1
