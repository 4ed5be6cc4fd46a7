"""Case-insensitive matching (`re.IGNORECASE`) of one character or class, exactly as Python's `re` does it.

Only cased characters and their case images can match differently without the flag; for those few
thousand the compiled atom is asked directly, and every other character keeps its case-sensitive answer.
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]
import bisect
import re
from collections.abc import Iterable
from functools import cache

from stdsl.compiler import ir

BLOCK = 256


@cache
def case_related() -> tuple[int, ...]:
    """Sorted code points that are cased or the case image of one (the only ones `re.IGNORECASE` can change)."""
    related: set[int] = set()
    for start in range(0, ir.MAX_UNICODE + 1, BLOCK):
        block = "".join(map(chr, range(start, start + BLOCK)))
        if block.lower() == block and block.upper() == block:
            continue
        for code in range(start, start + BLOCK):
            char = chr(code)
            lower, upper, simple = char.lower(), char.upper(), _sre.unicode_tolower(code)
            if lower != char or upper != char or simple != code:
                related.add(code)
                related.add(simple)
                related.update(ord(image) for image in (lower, upper) if len(image) == 1)
    return tuple(sorted(related))


def fold_ranges(ranges: Iterable[tuple[int, int]], atom: str) -> tuple[tuple[int, int], ...]:
    """The code points `re.compile(atom, re.IGNORECASE)` matches, given `ranges`, those it matches without the flag.

    `atom` is the standalone pattern of one character or class (as written in the original pattern)."""
    related = case_related()
    compiled = re.compile(atom, re.IGNORECASE)
    out: list[tuple[int, int]] = []
    for low, high in ir.merged_ranges(ranges):
        cursor = low
        for index in range(bisect.bisect_left(related, low), bisect.bisect_right(related, high)):
            if related[index] > cursor:
                out.append((cursor, related[index] - 1))
            cursor = related[index] + 1
        if cursor <= high:
            out.append((cursor, high))
    out.extend((code, code) for code in related if compiled.fullmatch(chr(code)))
    return ir.merged_ranges(out)
