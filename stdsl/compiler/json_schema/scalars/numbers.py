"""JSON numbers as byte-level IR: the RFC 8259 grammar kept finite and exact numeric ranges as digit-range regexes.

Ranges are built digit by digit (no arithmetic at match time), so `integer_in_range` and
`decimal_in_range` accept exactly the canonical spellings of the numbers inside the bounds.
Negative zero (`-0`, `-0.0`) is never produced by a bounded grammar; leading zeros never are.
"""

from __future__ import annotations

import math
from decimal import Decimal
from functools import lru_cache

from stdsl.compiler import ir
from stdsl.compiler.ir import Node

DIGIT = ir.byte_set([(0x30, 0x39)])
NONZERO_DIGIT = ir.byte_set([(0x31, 0x39)])
MINUS = ir.literal("-")
UNSIGNED_INTEGER = ir.alt(ir.literal("0"), ir.seq(NONZERO_DIGIT, ir.star(DIGIT)))
INTEGER = ir.alt(UNSIGNED_INTEGER, ir.seq(MINUS, NONZERO_DIGIT, ir.star(DIGIT)))
FRACTION = ir.seq(ir.literal("."), ir.plus(DIGIT))
MAX_INTEGER_DIGITS, MAX_EXPONENT_DIGITS = 20, 2
"""An unbounded number's integer part and exponent: at most 10^20 · 10^99 (an integer part
up to uint64's 20 digits), so every reader gets a finite double and the counter stays small in every value."""
EXPONENT = ir.seq(ir.byte_set([(0x45, 0x45), (0x65, 0x65)]), ir.optional(ir.byte_set([(0x2B, 0x2B), (0x2D, 0x2D)])),
                  ir.repeat(DIGIT, 1, MAX_EXPONENT_DIGITS))
NUMBER = ir.seq(ir.optional(MINUS),
                ir.alt(ir.literal("0"), ir.seq(NONZERO_DIGIT, ir.repeat(DIGIT, 0, MAX_INTEGER_DIGITS - 1))),
                ir.optional(FRACTION), ir.optional(EXPONENT))
"""An unbounded JSON number (RFC 8259) that Python's `float` reads as a finite value: no `1e999`, no 400-digit
integer part (both read as infinity, which no JSON reader writes back)."""


def digit_class(lo: int, hi: int, base: int = 10) -> Node:
    """One digit whose value is in lo..hi; base 16 accepts both letter cases."""
    if lo > hi:
        return ir.NOTHING
    ranges: list[tuple[int, int]] = []
    dec_lo, dec_hi = lo, min(hi, 9)
    if dec_lo <= dec_hi:
        ranges.append((0x30 + dec_lo, 0x30 + dec_hi))
    if base == 16 and hi >= 10:
        a, b = max(lo, 10) - 10, hi - 10
        ranges += [(0x61 + a, 0x61 + b), (0x41 + a, 0x41 + b)]
    return ir.byte_set(ranges)


@lru_cache(maxsize=4096)
def fixed_width_range(lo: int, hi: int, width: int, base: int = 10) -> Node:
    """Digit strings of exactly `width` digits (leading zeros allowed) whose value is in lo..hi."""
    if lo > hi or width <= 0:
        return ir.EMPTY if width == 0 and lo <= 0 <= hi else ir.NOTHING
    top = base ** (width - 1)
    full = base ** width - 1
    lo, hi = max(lo, 0), min(hi, full)
    if lo > hi:
        return ir.NOTHING
    if width == 1:
        return digit_class(lo, hi, base)
    any_tail = ir.repeat(digit_class(0, base - 1, base), width - 1, width - 1)
    lo_head, lo_rest = divmod(lo, top)
    hi_head, hi_rest = divmod(hi, top)
    if lo_head == hi_head:
        return ir.seq(digit_class(lo_head, lo_head, base), fixed_width_range(lo_rest, hi_rest, width - 1, base))
    parts: list[Node] = []
    first_full = lo_head if lo_rest == 0 else lo_head + 1
    last_full = hi_head if hi_rest == top - 1 else hi_head - 1
    if lo_rest != 0:
        parts.append(ir.seq(digit_class(lo_head, lo_head, base), fixed_width_range(lo_rest, top - 1, width - 1, base)))
    if first_full <= last_full:
        parts.append(ir.seq(digit_class(first_full, last_full, base), any_tail))
    if hi_rest != top - 1:
        parts.append(ir.seq(digit_class(hi_head, hi_head, base), fixed_width_range(0, hi_rest, width - 1, base)))
    return ir.alt(*parts)


def unsigned_in_range(lo: int, hi: int | None) -> Node:
    """Canonical decimal spellings (no leading zeros) of the integers in lo..hi (`hi=None`: unbounded)."""
    lo = max(lo, 0)
    if hi is not None and lo > hi:
        return ir.NOTHING
    parts: list[Node] = []
    width = len(str(lo))
    last_width = len(str(hi)) if hi is not None else width
    for w in range(width, last_width + 1):
        w_lo = max(lo, 0 if w == 1 else 10 ** (w - 1))
        w_hi = 10 ** w - 1 if hi is None else min(hi, 10 ** w - 1)
        parts.append(fixed_width_range(w_lo, w_hi, w))
    if hi is None:
        parts.append(ir.seq(NONZERO_DIGIT, ir.repeat(DIGIT, width, None)))
    return ir.alt(*parts)


def integer_in_range(lo: int | None, hi: int | None) -> Node:
    """Canonical JSON integers in lo..hi, either bound optional; `-0` and leading zeros are rejected."""
    if lo is not None and hi is not None and lo > hi:
        return ir.NOTHING
    parts: list[Node] = []
    if hi is None or hi >= 0:
        parts.append(unsigned_in_range(0 if lo is None else max(lo, 0), hi))
    if lo is None or lo < 0:
        neg_lo = 1 if hi is None or hi >= 0 else -hi
        neg_hi = None if lo is None else -lo
        parts.append(ir.seq(MINUS, unsigned_in_range(neg_lo, neg_hi)))
    return ir.alt(*parts)


def integer_bounds(lo: Decimal | None, lo_exclusive: bool, hi: Decimal | None, hi_exclusive: bool
                   ) -> tuple[int | None, int | None]:
    """The inclusive integer bounds equivalent to (possibly fractional, possibly exclusive) numeric bounds."""
    int_lo = int_hi = None
    if lo is not None:
        int_lo = math.floor(lo) + 1 if lo_exclusive or lo != math.floor(lo) else int(lo)
        if not lo_exclusive and lo != math.floor(lo):
            int_lo = math.ceil(lo)
    if hi is not None:
        int_hi = math.ceil(hi) - 1 if hi_exclusive or hi != math.ceil(hi) else int(hi)
        if not hi_exclusive and hi != math.ceil(hi):
            int_hi = math.floor(hi)
    return int_lo, int_hi


def _fraction_digits(value: Decimal) -> str:
    """The digits after the decimal point of a non-negative decimal, without trailing zeros."""
    text = format(value, "f")
    return text.split(".", 1)[1].rstrip("0") if "." in text else ""


def _fraction_in_range(lo: str | None, lo_strict: bool, hi: str | None, hi_strict: bool, allow_empty: bool) -> Node:
    """Digit strings s (the fraction digits) with 0.lo <= 0.s <= 0.hi, each side strict or not.

    `None` is an absent bound; a bound string has no trailing zeros ("" is zero).
    """
    zero_ok = (lo is None or (lo == "" and not lo_strict)) and (hi is None or hi != "" or not hi_strict)
    if lo in (None, "") and hi is None:
        if lo == "" and lo_strict:
            positive = ir.seq(ir.star(ir.literal("0")), NONZERO_DIGIT, ir.star(DIGIT))
            return positive
        return ir.star(DIGIT) if allow_empty else ir.plus(DIGIT)
    if hi == "":
        if not zero_ok:
            return ir.NOTHING
        return ir.star(ir.literal("0")) if allow_empty else ir.plus(ir.literal("0"))
    l0 = -1 if lo is None else (int(lo[0]) if lo else 0)
    h0 = 10 if hi is None else int(hi[0])
    lo_rest = None if lo is None else lo[1:]
    hi_rest = None if hi is None else hi[1:]
    parts: list[Node] = [ir.EMPTY] if allow_empty and zero_ok else []
    if l0 == h0:
        parts.append(ir.seq(digit_class(l0, l0), _fraction_in_range(lo_rest, lo_strict, hi_rest, hi_strict, True)))
        return ir.alt(*parts)
    if l0 >= 0:
        parts.append(ir.seq(digit_class(l0, l0), _fraction_in_range(lo_rest, lo_strict, None, False, True)))
    if h0 - l0 >= 2:
        parts.append(ir.seq(digit_class(l0 + 1, h0 - 1), ir.star(DIGIT)))
    if h0 <= 9:
        parts.append(ir.seq(digit_class(h0, h0), _fraction_in_range(None, False, hi_rest, hi_strict, True)))
    return ir.alt(*parts)


def _with_fraction(int_part: int, lo: str | None, lo_strict: bool, hi: str | None, hi_strict: bool) -> Node:
    """`int_part` then an optional `.digits` whose fraction value is within the given bounds."""
    head = ir.literal(str(int_part))
    dotted = ir.seq(head, ir.literal("."), _fraction_in_range(lo, lo_strict, hi, hi_strict, False))
    zero_ok = (lo is None or (lo == "" and not lo_strict)) and (hi is None or hi != "" or not hi_strict)
    return ir.alt(dotted, head) if zero_ok else dotted


def _magnitude_in_range(lo: Decimal, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> Node:
    """Decimal spellings `int(.digits)?` (no exponent) of non-negative values between lo and hi."""
    if hi is not None and (lo > hi or (lo == hi and (lo_strict or hi_strict))):
        return ir.NOTHING
    lo_int, lo_frac = math.floor(lo), _fraction_digits(lo - math.floor(lo))
    if hi is None:
        return ir.alt(_with_fraction(lo_int, lo_frac, lo_strict, None, False),
                      ir.seq(unsigned_in_range(lo_int + 1, None), ir.optional(FRACTION)))
    hi_int, hi_frac = math.floor(hi), _fraction_digits(hi - math.floor(hi))
    if hi_int == lo_int:
        return _with_fraction(lo_int, lo_frac, lo_strict, hi_frac, hi_strict)
    parts = [_with_fraction(lo_int, lo_frac, lo_strict, None, False)]
    if hi_int - lo_int >= 2:
        parts.append(ir.seq(unsigned_in_range(lo_int + 1, hi_int - 1), ir.optional(FRACTION)))
    parts.append(_with_fraction(hi_int, None, False, hi_frac, hi_strict))
    return ir.alt(*parts)


def decimal_in_range(lo: Decimal | None, lo_exclusive: bool, hi: Decimal | None, hi_exclusive: bool) -> Node:
    """JSON numbers written without exponent (`-?int(.digits)?`) whose value lies within the bounds.

    Either bound may be absent.  Negative zero spellings are excluded; trailing fraction zeros are allowed.
    """
    parts: list[Node] = []
    if hi is None or hi > 0 or (hi == 0 and not hi_exclusive):
        if lo is None or lo < 0:
            parts.append(_magnitude_in_range(Decimal(0), False, hi, hi_exclusive))
        else:
            parts.append(_magnitude_in_range(lo, lo_exclusive, hi, hi_exclusive))
    if lo is None or lo < 0:
        if hi is None or hi >= 0:
            mag_lo, mag_lo_strict = Decimal(0), True
        else:
            mag_lo, mag_lo_strict = -hi, hi_exclusive
        mag_hi = None if lo is None else -lo
        parts.append(ir.seq(MINUS, _magnitude_in_range(mag_lo, mag_lo_strict, mag_hi, lo_exclusive)))
    return ir.alt(*parts)
