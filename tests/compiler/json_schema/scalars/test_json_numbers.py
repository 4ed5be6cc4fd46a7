"""Exact numeric ranges: the automaton accepts exactly the canonical numbers inside the bounds."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.scalars.numbers import (
    NUMBER,
    decimal_in_range,
    integer_bounds,
    integer_in_range,
)
from stdsl.compiler.json_schema.to_ir import schema_to_ir

JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
FINITE_NUMBER = re.compile(r"-?(?:0|[1-9]\d{0,19})(?:\.\d+)?(?:[eE][+-]?\d{1,2})?")
bounds = st.one_of(st.none(), st.integers(-10**6, 10**6), st.integers(-10**25, 10**25))


def _inside(x: Decimal, lo: Decimal | None, lo_x: bool, hi: Decimal | None, hi_x: bool) -> bool:
    return (lo is None or (x > lo if lo_x else x >= lo)) and (hi is None or (x < hi if hi_x else x <= hi))


@settings(max_examples=60, deadline=None)
@given(lo=bounds, hi=bounds, samples=st.lists(st.integers(-10**26, 10**26), max_size=40))
def test_integer_range_is_exact(lo: int | None, hi: int | None, samples: list[int]) -> None:
    automaton = build_automaton(integer_in_range(lo, hi)) if lo is None or hi is None or lo <= hi else None
    edges = [b + d for b in (lo, hi) if b is not None for d in (-2, -1, 0, 1, 2)] + [0, 1, -1, 9, 10, -10]
    for x in samples + edges:
        inside = (lo is None or x >= lo) and (hi is None or x <= hi)
        accepted = automaton is not None and automaton.accepts(str(x).encode())
        assert accepted == inside, (lo, hi, x)
    if automaton is not None:
        for text in ("-0", "01", "-01", "00", "+1", "1.0", "1e2", "", "-"):
            assert not automaton.accepts(text.encode()), (lo, hi, text)


cents = st.one_of(st.none(), st.decimals(-1000, 1000, places=2))


@settings(max_examples=60, deadline=None)
@given(lo=cents, hi=cents, lo_x=st.booleans(), hi_x=st.booleans(),
       samples=st.lists(st.decimals(-1200, 1200, places=3), max_size=30))
def test_integer_type_with_fractional_and_exclusive_bounds(lo: Decimal | None, hi: Decimal | None, lo_x: bool,
                                                           hi_x: bool, samples: list[Decimal]) -> None:
    schema: dict = {"type": "integer"}
    if lo is not None:
        schema["exclusiveMinimum" if lo_x else "minimum"] = float(lo)
    if hi is not None:
        schema["exclusiveMaximum" if hi_x else "maximum"] = float(hi)
    lo_d = None if lo is None else Decimal(repr(float(lo)))
    hi_d = None if hi is None else Decimal(repr(float(hi)))
    int_lo, int_hi = integer_bounds(lo_d, lo_x, hi_d, hi_x)
    try:
        automaton = build_automaton(schema_to_ir(schema))
    except Exception:  # noqa: BLE001 - an empty range must be reported as such
        assert int_lo is not None and int_hi is not None and int_lo > int_hi
        return
    for x in [int(s) for s in samples] + [b for b in (int_lo, int_hi) if b is not None]:
        for candidate in (x - 1, x, x + 1):
            assert automaton.accepts(str(candidate).encode()) == _inside(Decimal(candidate), lo_d, lo_x, hi_d, hi_x)


decimals = st.decimals(-100, 100, places=3)


@settings(max_examples=80, deadline=None)
@given(lo=st.one_of(st.none(), decimals), hi=st.one_of(st.none(), decimals), lo_x=st.booleans(), hi_x=st.booleans(),
       samples=st.lists(st.decimals(-120, 120, places=4), max_size=30))
def test_decimal_range_is_exact(lo: Decimal | None, hi: Decimal | None, lo_x: bool, hi_x: bool,
                                samples: list[Decimal]) -> None:
    node = decimal_in_range(lo, lo_x, hi, hi_x)
    try:
        automaton = build_automaton(node)
    except Exception:  # noqa: BLE001 - only an empty range may fail to build
        assert not any(_inside(s, lo, lo_x, hi, hi_x) for s in samples + [b for b in (lo, hi) if b is not None])
        return
    for x in samples + [b for b in (lo, hi) if b is not None]:
        inside = _inside(x, lo, lo_x, hi, hi_x)
        for text in {format(x, "f"), format(x, "f") + ("0" if "." in format(x, "f") else ".0")}:
            if Decimal(text) == 0 and text.startswith("-"):
                assert not automaton.accepts(text.encode())
                continue
            assert automaton.accepts(text.encode()) == inside, (lo, lo_x, hi, hi_x, text)
    for text in ("01", "1.", ".5", "1e1", "-0", "+1"):
        assert not automaton.accepts(text.encode())


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789-+.eE", max_size=8))
def test_number_grammar_matches_rfc8259_kept_finite(text: str) -> None:
    automaton = _number_automaton()
    finite = JSON_NUMBER.fullmatch(text) and FINITE_NUMBER.fullmatch(text)
    assert automaton.accepts(text.encode()) == bool(finite)
    if automaton.accepts(text.encode()):
        json.loads(text)


@settings(max_examples=200, deadline=None)
@given(sign=st.sampled_from(["", "-"]), digits=st.integers(1, 400), fraction=st.sampled_from(["", ".5", ".000"]),
       exponent=st.sampled_from(["", "e", "E+", "e-"]), power=st.integers(0, 10**6), lead=st.integers(1, 9))
def test_unbounded_numbers_read_back_finite(sign: str, digits: int, fraction: str, exponent: str, power: int,
                                            lead: int) -> None:
    """No accepted number reads as infinity (`1e999`, `13E84216`, a 400-digit integer): RFC 8259 kept finite."""
    text = sign + str(lead) + "9" * (digits - 1) + fraction + (exponent + str(power) if exponent else "")
    accepted = _number_automaton().accepts(text.encode())
    assert accepted == bool(FINITE_NUMBER.fullmatch(text))
    if accepted:
        assert math.isfinite(json.loads(text)) and math.isfinite(float(text))
    for refused in ("1e999", "13E84216", "1" * 400, "-1.5e100"):
        assert not _number_automaton().accepts(refused.encode())


_CACHE: dict = {}


def _number_automaton():
    if "number" not in _CACHE:
        _CACHE["number"] = build_automaton(NUMBER)
    return _CACHE["number"]


def test_float_bounds_from_schema() -> None:
    automaton = build_automaton(schema_to_ir({"type": "number", "minimum": 0, "maximum": 1}))
    for text in ("0", "1", "0.95", "0.5000", "1.0", "0.0"):
        assert automaton.accepts(text.encode()), text
    for text in ("1.01", "-0.1", "2", "1e0", "-0", "10"):
        assert not automaton.accepts(text.encode()), text
