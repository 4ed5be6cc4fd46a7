"""The characters a regex pre-tokenizer tells apart, as the planner and the boundary cover try them.

A next byte below 0x80 is one character; a lead byte stands for the characters whose UTF-8 starts
with it, of which one per pre-tokenizer class (whitespace, letter, mark, number, other) is tried.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator
from functools import cache

MAX_CODEPOINT_SCAN = 70_000


def _char_class(ch: str) -> str:
    """The class a regex pre-tokenizer distinguishes a character by (letter, mark, number, space, other)."""
    if ch.isspace():
        return "space"
    category = unicodedata.category(ch)
    return category[0] if category[0] in "LMN" else "other"


def _lead_byte_range(lead: int) -> tuple[int, int]:
    """Code points [first, last] whose UTF-8 starts with `lead` (empty when `lead` starts no character)."""
    if 0xC2 <= lead <= 0xDF:
        return max((lead & 0x1F) << 6, 0x80), ((lead & 0x1F) << 6) | 0x3F
    if 0xE0 <= lead <= 0xEF:
        return max((lead & 0x0F) << 12, 0x800), ((lead & 0x0F) << 12) | 0xFFF
    if 0xF0 <= lead <= 0xF4:
        return max((lead & 0x07) << 18, 0x10000), min(((lead & 0x07) << 18) | 0x3FFFF, 0x10FFFF)
    return 1, 0


def starts_a_character(lead: int) -> bool:
    """Whether some character's UTF-8 starts with byte `lead` (then it has a representative)."""
    first, last = _lead_byte_range(lead)
    return first <= last


@cache
def lead_byte_representatives(lead: int) -> tuple[str, ...]:
    """One character per pre-tokenizer class among the characters whose UTF-8 starts with `lead`."""
    first, last = _lead_byte_range(lead)
    found: dict[str, str] = {}
    for code in range(first, min(last, first + MAX_CODEPOINT_SCAN) + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        ch = chr(code)
        found.setdefault(_char_class(ch), ch)
        if len(found) == 5:
            break
    return tuple(found.values())


def next_characters(live: Iterable[int]) -> Iterator[str]:
    """Characters that may follow a state with these live bytes, one at a time: every live ASCII byte,
    one per class per live lead byte (a lead byte's are found only when reached)."""
    for byte in live:
        yield from (chr(byte),) if byte < 0x80 else lead_byte_representatives(byte)


def valid_utf8_prefix(data: bytes) -> int:
    """Length of the longest prefix of `data` that is valid UTF-8."""
    try:
        data.decode("utf-8")
        return len(data)
    except UnicodeDecodeError as error:
        return error.start
