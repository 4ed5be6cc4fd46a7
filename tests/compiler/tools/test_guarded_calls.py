"""Calls built together (`guarded_calls`) accept exactly what each call built alone accepts: its head, its arguments
kept free of the literals (the product with the guard), its tail; trim, and None where the layout does not apply."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.automata.ops import concatenation, intersect
from stdsl.compiler.not_containing import not_containing
from stdsl.compiler.tools import guarded_calls as guarded
from stdsl.compiler.tools.guarded_calls import guarded_calls
from stdsl.errors import EmptyLanguageError

ALPHABET = "ab<>/"
BODIES = ["[ab<>/]*", "a*", "</a>", "(?:<a>|b)*", "[ab]{0,3}", "(?:</a>)?b", "<>", "a|<b", "(?:ab|<)/*"]
texts = st.text(alphabet=ALPHABET, min_size=1, max_size=3)


def _minimal(automaton: Automaton) -> tuple[np.ndarray, np.ndarray]:
    return minimize(automaton.transitions.astype(np.int64), automaton.accepting)


def _alone(head: str, body: str, tail: str, literals: list[str]) -> Automaton | None:
    """The per-tool build: the arguments' product with the guard, laid out between head and tail."""
    guard = build_automaton(not_containing(literals))
    try:
        guarded = intersect(compile_regex(f'"{body}"'), guard)
    except EmptyLanguageError:
        return None
    return concatenation([head.encode(), guarded, tail.encode()])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(texts, st.sampled_from(BODIES), texts), min_size=1, max_size=5),
       st.lists(st.sampled_from(["</a>", "<>", "ab", "/b"]), min_size=1, max_size=2, unique=True), st.booleans())
def test_calls_built_together_equal_each_call_built_alone(calls: list[tuple[str, str, str]], literals: list[str],
                                                          by_levels: bool) -> None:
    """`by_levels`: the trim searches a level of every call per step (as for a big stack), else state by state."""
    guard = build_automaton(not_containing(literals))
    parts = [(head.encode(), compile_regex(f'"{body}"'), tail.encode()) for head, body, tail in calls]
    queued_up_to = guarded.QUEUED_UP_TO
    guarded.QUEUED_UP_TO = -1 if by_levels else queued_up_to
    try:
        built = guarded_calls(parts, guard)
    finally:
        guarded.QUEUED_UP_TO = queued_up_to
    for (head, body, tail), together in zip(calls, built):
        alone = _alone(head, body, tail, literals)
        assert (together is None) == (alone is None)
        if together is None or alone is None:
            continue
        assert together.is_trim()
        for left, right in zip(_minimal(together), _minimal(alone)):
            assert np.array_equal(left, right)
        middle = re.compile(f'"{body}"')
        for text in ("", "a", "<a>", "</a>", "ab/b", "<>"):
            whole = f'{head}"{text}"{tail}'
            expected = middle.fullmatch(f'"{text}"') is not None and not any(lit in f'"{text}"' for lit in literals)
            assert together.accepts(whole.encode()) == expected


@pytest.mark.parametrize(("head", "pattern", "tail"), [("", '"a"', "t"), ("h", '"a"', ""), ("h", "a?", "t"),
                                                       ("h", '"a"b?', "t")])
def test_a_call_that_does_not_lay_out_is_left_to_the_caller(head: str, pattern: str, tail: str) -> None:
    """No head, no tail, arguments that accept the empty text or read on from an accepting state: None, while the
    other calls of the batch are built."""
    guard = build_automaton(not_containing(["</a>"]))
    built = guarded_calls([(head.encode(), compile_regex(pattern), tail.encode()),
                           (b"h", compile_regex('"b"'), b"t")], guard)
    assert built[0] is None and built[1] is not None and built[1].accepts(b'h"b"t')
