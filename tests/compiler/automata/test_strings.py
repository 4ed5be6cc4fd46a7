"""A finite set of literal strings built directly as its minimal DFA equals the NFA → subset → minimize pipeline."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata import strings as strings_module
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.automata.strings import literal_strings, strings_dfa
from stdsl.errors import StateBudgetError


def _pipeline(node: ir.Node) -> tuple[list, list]:
    """The (states, 256) table and accepting mask the general pipeline gives."""
    dfa = determinize(build_nfa(node))
    table, accepting = minimize(dfa.table, dfa.accepting)
    return table[:, dfa.byte_class].tolist(), accepting.tolist()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.binary(max_size=6).map(lambda b: bytes(x % 5 + 97 if x < 200 else x for x in b)),
                min_size=1, max_size=12, unique=True))
def test_strings_dfa_equals_the_pipeline(strings: list[bytes]) -> None:
    """Both merges (plain Python for a few bytes, numpy passes past `SMALL_STRINGS_BYTES`) give the pipeline's
    minimal DFA, and the very same arrays."""
    node = ir.alt(*(ir.literal(s) for s in strings))
    assert literal_strings(node) is not None and sorted(literal_strings(node) or []) == sorted(strings)
    small = strings_dfa(strings)
    limit = strings_module.SMALL_STRINGS_BYTES
    strings_module.SMALL_STRINGS_BYTES = -1
    try:
        passes = strings_dfa(strings)
    finally:
        strings_module.SMALL_STRINGS_BYTES = limit
    table, accepting, byte_class = passes
    assert (table[:, byte_class].tolist(), accepting.tolist()) == _pipeline(node)
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(small, passes))


def test_literal_strings_refuses_anything_but_literals() -> None:
    assert literal_strings(ir.alt(ir.literal("ab"), ir.byte_set([(97, 98)]))) is None
    assert literal_strings(ir.star(ir.literal("a"))) is None
    assert literal_strings(ir.NOTHING) is None
    assert literal_strings(ir.seq(ir.byte_set([(97, 97)]), ir.byte_set([(98, 98)]))) == [b"ab"]
    assert literal_strings(ir.alt(ir.EMPTY, ir.literal("x"))) == [b"", b"x"]


def test_enum_of_five_thousand_strings_is_fast_and_exact() -> None:
    rng = np.random.default_rng(5000)
    words = sorted({bytes(rng.integers(97, 123, rng.integers(3, 11)).astype(np.uint8)) for _ in range(5200)})[:5000]
    node = ir.alt(*(ir.literal(b'"' + w + b'"') for w in words))
    start = time.process_time()
    automaton = build_automaton(node)
    assert time.process_time() - start < 2.0
    assert all(automaton.accepts(b'"' + w + b'"') for w in words[::50])
    assert not automaton.accepts(b'"' + words[0] + b'x"') or (words[0] + b"x") in set(words)
    assert not automaton.accepts(words[1])
    with pytest.raises(StateBudgetError):
        build_automaton(node, max_states=1000)
