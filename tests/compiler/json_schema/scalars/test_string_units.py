"""String units built in parts (per code point block, ASCII escapes digit by digit) equal the units built whole."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.scalars.string_units import (
    ALL_CHARS,
    UNIT_BLOCKS,
    _hex4,
    _subtract,
    ascii_escapes,
    string_unit,
    unit_except,
)


def _same_automaton(a: ir.Node, b: ir.Node) -> bool:
    """Minimal automata are numbered canonically, so equal languages give equal tables."""
    left, right = build_automaton(a), build_automaton(b)
    return np.array_equal(left.transitions, right.transitions) and np.array_equal(left.accepting, right.accepting)


def _ranges(values: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for value in sorted(values):
        if out and out[-1][1] == value - 1:
            out[-1] = (out[-1][0], value)
        else:
            out.append((value, value))
    return out


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 0x7F), min_size=1, max_size=128))
def test_ascii_escapes_equal_the_four_digit_ranges(values: set[int]) -> None:
    ranges = _ranges(values)
    assert _same_automaton(ascii_escapes(ranges), ir.alt(*(_hex4(a, b) for a, b in ranges)))


holes = st.sets(st.one_of(st.integers(0, 0x7F), st.integers(0x80, 0x7FF), st.integers(0x800, 0xFFFF),
                          st.integers(0x10000, 0x10FFFF)).filter(lambda cp: not 0xD800 <= cp <= 0xDFFF), max_size=6)


@settings(max_examples=40, deadline=None)
@given(holes)
def test_unit_except_by_blocks_equals_the_unit_of_the_whole_complement(excluded: set[int]) -> None:
    whole = string_unit(tuple(_subtract(ALL_CHARS, [(cp, cp) for cp in sorted(excluded)])))
    assert _same_automaton(unit_except(chr(cp) for cp in excluded), whole)


def test_blocks_without_holes_are_the_same_nodes_in_every_unit() -> None:
    """What the NFA builder shares between the nodes of a name trie: all but the ASCII block."""
    high = ir.alt(*(string_unit((block,)) for block in UNIT_BLOCKS[1:]))
    assert isinstance(high, ir.Alt)
    for unit in (unit_except("ab"), unit_except('x"\\'), unit_except("")):
        assert isinstance(unit, ir.Alt)
        assert set(high.items) <= set(unit.items)
