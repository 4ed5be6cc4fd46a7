"""String units: ASCII escapes built digit by digit equal the four-digit ranges; a canonical unit reads exactly
the canonical spelling of each character it allows, and shares everything beyond ASCII between hole sets."""

from __future__ import annotations

from json.encoder import encode_basestring

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.minimization.minimize import trim
from stdsl.compiler.json_schema.scalars.string_units import (
    _hex4,
    _json_escapes,
    ascii_escapes,
    canonical_beyond_ascii,
    canonical_unit_except,
)


def _same_automaton(a: ir.Node, b: ir.Node) -> bool:
    """Minimal automata are numbered canonically, so equal languages give equal tables."""
    left, right = build_automaton(a), build_automaton(b)
    return np.array_equal(left.transitions, right.transitions) and np.array_equal(left.accepting, right.accepting)


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 0x7F), min_size=1, max_size=128))
def test_ascii_escapes_equal_the_four_digit_ranges(values: set[int]) -> None:
    ranges = ir.merged_ranges((value, value) for value in values)
    assert _same_automaton(ascii_escapes(ranges), ir.alt(*(_hex4(a, b) for a, b in ranges)))


def test_the_written_out_table_beyond_ascii_is_the_raw_utf8_and_the_escapes() -> None:
    """The table `canonical_beyond_ascii` writes by hand against the same language built from IR."""
    written = canonical_beyond_ascii()
    assert isinstance(written, ir.Embedded)
    raw = ir.codepoints([(0x80, 0xD7FF), (0xE000, ir.MAX_UNICODE)])
    assert _same_automaton(written, ir.alt(raw, *_json_escapes(())))
    trimmed, _ = trim(np.asarray(written.transitions, dtype=np.int64), np.asarray(written.accepting))
    assert len(trimmed) == len(written.accepting), "recorded as trim (nfa.known_trim), so it must be"


characters = st.one_of(st.integers(0, 0x7F), st.integers(0x80, 0x7FF), st.integers(0x800, 0xFFFF),
                       st.integers(0x10000, 0x10FFFF)).map(chr)


@settings(max_examples=60, deadline=None)
@given(st.sets(characters, max_size=5), st.lists(characters, max_size=20))
def test_a_canonical_unit_reads_the_canonical_spelling_of_every_other_character(holes: set[str],
                                                                                 probes: list[str]) -> None:
    automaton = build_automaton(canonical_unit_except(holes))
    for ch in [*probes, *holes]:
        surrogate = 0xD800 <= ord(ch) <= 0xDFFF
        canonical = encode_basestring(ch)[1:-1]
        if not surrogate:
            assert automaton.accepts(canonical.encode("utf-8")) == (ch not in holes), (holes, ch)
        escaped = f"\\u{ord(ch):04x}"
        if ord(ch) < 0x10000 and escaped != canonical:
            assert not automaton.accepts(escaped.encode("utf-8")), (holes, escaped)
    assert not automaton.accepts(b"\\/") and not automaton.accepts(b"\\u00E9")


def test_printable_ascii_holes_share_one_node_for_the_rest() -> None:
    """What the NFA builder shares between the nodes of a name trie: everything but the ASCII byte set."""
    first, second = canonical_unit_except("ab"), canonical_unit_except("xyz_0")
    assert isinstance(first, ir.Alt) and isinstance(second, ir.Alt)
    embedded = [item for item in first.items if isinstance(item, ir.Embedded)]
    assert len(embedded) == 1 and any(item is embedded[0] for item in second.items)
