"""One decoded character of a JSON string in every spelling JSON allows (a *string unit*), as byte-level IR.

A unit is the raw UTF-8 of a Unicode scalar (except `"`, `\\` and controls below U+0020), a short
escape, `\\uXXXX` for a BMP scalar, or an escaped surrogate pair for a character above U+FFFF; lone
surrogate escapes are never units.  The string languages (`strings.py`) and the formats
(`formats.py`) both build on it.  Keys are read in their canonical spelling only (`canonical_unit_except`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from json.encoder import encode_basestring

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.nfa import known_trim
from stdsl.compiler.ir import Node
from stdsl.compiler.json_schema.scalars.numbers import fixed_width_range

SHORT_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x2F: "\\/", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r",
                 0x09: "\\t"}
FORBIDDEN_RAW = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
ALL_CHARS = ((0, ir.MAX_UNICODE),)


def _intersect(ranges: Iterable[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(a, lo), min(b, hi)) for a, b in ranges if max(a, lo) <= min(b, hi)]


def _subtract(ranges: Iterable[tuple[int, int]], holes: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out = list(ranges)
    for h_lo, h_hi in holes:
        nxt: list[tuple[int, int]] = []
        for a, b in out:
            if b < h_lo or a > h_hi:
                nxt.append((a, b))
                continue
            if a < h_lo:
                nxt.append((a, h_lo - 1))
            if b > h_hi:
                nxt.append((h_hi + 1, b))
        out = nxt
    return out


def _hex4(lo: int, hi: int) -> Node:
    """`\\u` and four hex digits (either case) whose value is in lo..hi."""
    return ir.seq(ir.literal("\\u"), fixed_width_range(lo, hi, 4, 16))


def ascii_escapes(ranges: Sequence[tuple[int, int]]) -> Node:
    """`\\u00` and two hex digits whose value is in the ASCII `ranges`: `_hex4` over them, built digit by digit
    (high digits with the same low digits grouped), as a name trie asks for one per node."""
    lows: dict[int, list[int]] = {}
    for a, b in ranges:
        for value in range(a, b + 1):
            lows.setdefault(value >> 4, []).append(value & 15)
    highs: dict[tuple[int, ...], list[int]] = {}
    for high, low in lows.items():
        highs.setdefault(tuple(low), []).append(high)
    return ir.seq(ir.literal("\\u00"), ir.alt(*(ir.seq(_hex_digits(high), _hex_digits(low))
                                                  for low, high in highs.items())))


def _hex_digits(values: Iterable[int]) -> Node:
    """One hex digit (either case) whose value is one of `values`."""
    return ir.byte_set([(ord(c), ord(c)) for v in values for c in {f"{v:x}", f"{v:X}"}])


def _surrogate_pairs(lo: int, hi: int) -> list[Node]:
    """Escaped surrogate pairs spelling the supplementary code points lo..hi."""
    out: list[Node] = []
    first_high = 0xD800 + ((lo - 0x10000) >> 10)
    last_high = 0xD800 + ((hi - 0x10000) >> 10)
    lo_low, hi_low = 0xDC00 + (lo & 0x3FF), 0xDC00 + (hi & 0x3FF)
    if first_high == last_high:
        return [ir.seq(_hex4(first_high, first_high), _hex4(lo_low, hi_low))]
    out.append(ir.seq(_hex4(first_high, first_high), _hex4(lo_low, 0xDFFF)))
    if last_high - first_high >= 2:
        out.append(ir.seq(_hex4(first_high + 1, last_high - 1), _hex4(0xDC00, 0xDFFF)))
    out.append(ir.seq(_hex4(last_high, last_high), _hex4(0xDC00, hi_low)))
    return out


def _any_unit() -> Node:
    """Every JSON string unit, factored so that shared tails appear once (a near-minimal DFA)."""
    tail = ir.byte_set([(0x80, 0xBF)])
    hex_digit = ir.byte_set([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)])
    two = ir.byte_set([(0xC2, 0xDF)])
    three = ir.alt(ir.seq(ir.literal(b"\xe0"), ir.byte_set([(0xA0, 0xBF)])),
                   ir.seq(ir.byte_set([(0xE1, 0xEC), (0xEE, 0xEF)]), tail),
                   ir.seq(ir.literal(b"\xed"), ir.byte_set([(0x80, 0x9F)])))
    four = ir.seq(ir.alt(ir.seq(ir.literal(b"\xf0"), ir.byte_set([(0x90, 0xBF)])),
                         ir.seq(ir.byte_set([(0xF1, 0xF3)]), tail),
                         ir.seq(ir.literal(b"\xf4"), ir.byte_set([(0x80, 0x8F)]))), tail)
    d_upper, d_lower = ir.byte_set([(0x44, 0x44), (0x64, 0x64)]), ir.byte_set([(0x30, 0x37)])
    plain_hex = ir.seq(ir.alt(ir.seq(ir.byte_set([(0x30, 0x39), (0x41, 0x43), (0x45, 0x46), (0x61, 0x63),
                                                   (0x65, 0x66)]), hex_digit), ir.seq(d_upper, d_lower)),
                       hex_digit, hex_digit)
    pair = ir.seq(d_upper, ir.byte_set([(0x38, 0x39), (0x41, 0x42), (0x61, 0x62)]), hex_digit, hex_digit,
                  ir.literal("\\u"), d_upper, ir.byte_set([(0x43, 0x46), (0x63, 0x66)]), hex_digit, hex_digit)
    escape = ir.seq(ir.literal("\\"), ir.alt(ir.byte_set((ord(c), ord(c)) for c in '"\\/bfnrt'),
                                             ir.seq(ir.literal("u"), ir.alt(plain_hex, pair))))
    ascii_raw = ir.byte_set([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F)])
    return ir.alt(ascii_raw, ir.seq(ir.alt(four, three, two), tail), escape)


@lru_cache(maxsize=1024)
def string_unit(ranges: tuple[tuple[int, int], ...] = ALL_CHARS) -> Node:
    """One JSON string unit (any spelling) whose decoded character lies in the code point ranges."""
    if ranges == ALL_CHARS:
        return _any_unit()
    scalars = _subtract(ranges, [(0xD800, 0xDFFF)])
    parts: list[Node] = []
    raw = _subtract(scalars, FORBIDDEN_RAW)
    if raw:
        parts.append(ir.codepoints(raw))
    for cp, text in SHORT_ESCAPES.items():
        if _intersect(scalars, cp, cp):
            parts.append(ir.literal(text))
    ascii_scalars = _intersect(scalars, 0, 0x7F)
    if ascii_scalars:
        parts.append(ascii_escapes(ascii_scalars))
    for a, b in _intersect(scalars, 0x80, 0xFFFF):
        parts.append(_hex4(a, b))
    for a, b in _intersect(scalars, 0x10000, ir.MAX_UNICODE):
        parts.extend(_surrogate_pairs(a, b))
    return ir.alt(*parts)


JSON_ESCAPED = (*range(0x20), 0x22, 0x5C)
"""The code points JSON requires escaped: the controls, the quotation mark and the backslash."""


def canonical_unit_except(chars: Iterable[str]) -> Node:
    """One character other than `chars`, in its canonical spelling (`json.dumps(ensure_ascii=False)`'s: raw
    UTF-8, a short escape, `\\u00xx` for the other controls; never a surrogate)."""
    return _canonical_unit_except(tuple(sorted({ord(c) for c in chars})))


@lru_cache(maxsize=4096)
def _canonical_unit_except(holes: tuple[int, ...]) -> Node:
    """`canonical_unit_except` of sorted distinct code points.  When they are all printable ASCII (the usual
    name), the unit is a byte set beside one embedded automaton of everything else, the same node for every
    hole set: an alternation of byte strings would be one trie per trie node of a name set, nothing shared."""
    skipped = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0xD800, 0xDFFF), *((h, h) for h in holes)]
    if all(0x20 <= h <= 0x7F and h not in JSON_ESCAPED for h in holes):
        return ir.alt(ir.byte_set(_subtract(((0x20, 0x7F),), sorted(skipped))), canonical_beyond_ascii())
    return ir.alt(ir.codepoints(_subtract(ALL_CHARS, sorted(skipped))), *_json_escapes(holes))


@lru_cache(maxsize=1)
def canonical_beyond_ascii() -> ir.Embedded:
    """The canonical units other than raw printable ASCII (raw UTF-8 of U+0080 and above, the escapes), as one
    embedded automaton: its table (states 0-9 for UTF-8 and the backslash, then the escape trie) is written out
    here, 0.05 ms, where `build_automaton` took 1-2 ms of the first open object's compile in every process
    (`test_string_units` proves the two the same language, and the table trim)."""
    escapes = _json_escape_texts(())
    accept, escape = 1, 2
    state_of = {"\\": escape}
    for text in escapes:
        for end in range(2, len(text)):
            state_of.setdefault(text[:end], 9 + len(state_of))
    used = 9 + len(state_of)
    table = np.full((used, 256), -1, dtype=np.int32)
    tail = (accept, 3, 4, 5)
    for lead, state, (lo, hi), tails in ((0xE0, 6, (0xA0, 0xBF), 1), (0xED, 7, (0x80, 0x9F), 1),
                                         (0xF0, 8, (0x90, 0xBF), 2), (0xF4, 9, (0x80, 0x8F), 2)):
        table[0, lead] = state
        table[state, lo:hi + 1] = tail[tails]
    for (lo, hi), tails in (((0xC2, 0xDF), 1), ((0xE1, 0xEC), 2), ((0xEE, 0xEF), 2), ((0xF1, 0xF3), 3)):
        table[0, lo:hi + 1] = tail[tails]
    for tails in (1, 2, 3):
        table[tail[tails], 0x80:0xC0] = tail[tails - 1]
    table[0, ord("\\")] = escape
    for prefix, state in state_of.items():
        if len(prefix) > 1:
            table[state_of[prefix[:-1]], ord(prefix[-1])] = state
    for text in escapes:
        table[state_of[text[:-1]], ord(text[-1])] = accept
    accepting = np.zeros(used, dtype=bool)
    accepting[accept] = True
    return known_trim(ir.Embedded(table, accepting))


def _json_escapes(holes: tuple[int, ...]) -> list[Node]:
    """The canonical escape of each character JSON requires escaped, but the holes'."""
    return [ir.literal(text) for text in _json_escape_texts(holes)]


def _json_escape_texts(holes: tuple[int, ...]) -> list[str]:
    """`_json_escapes` as text."""
    return [encode_basestring(chr(cp))[1:-1] for cp in JSON_ESCAPED if cp not in holes]


def char_trie(strings: Iterable[str]) -> dict:
    """The strings as a trie over characters: a child per next character, and the key None where one ends."""
    trie: dict = {}
    for text in strings:
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[None] = {}
    return trie
