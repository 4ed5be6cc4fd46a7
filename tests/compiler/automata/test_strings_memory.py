"""The string DFA reads strings in place: memory grows with their total length, not count × longest."""

from __future__ import annotations

import tracemalloc

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.automata.strings import strings_dfa


def test_one_long_string_among_many_short_ones_stays_small_and_exact() -> None:
    rng = np.random.default_rng(13)
    short = sorted({bytes(rng.integers(97, 123, rng.integers(1, 6)).astype(np.uint8)) for _ in range(2000)})
    strings = [b"ab" * 1500, *short]
    tracemalloc.start()
    try:
        table, accepting, byte_class = strings_dfa(strings)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, f"{peak:,} bytes traced for {sum(map(len, strings)):,} bytes of strings"
    dfa = determinize(build_nfa(ir.alt(*(ir.literal(s) for s in strings))))
    expected, expected_accepting = minimize(dfa.table, dfa.accepting)
    assert table[:, byte_class].tolist() == expected[:, dfa.byte_class].tolist()
    assert accepting.tolist() == expected_accepting.tolist()
