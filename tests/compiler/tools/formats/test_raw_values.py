"""A raw value's intersection with its format's guards accepts exactly what the product of their automata accepts,
also where the value is an enum whose literals are filtered through the guards instead of multiplied."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.ops import intersect
from stdsl.compiler.not_containing import not_containing
from stdsl.compiler.tools.formats import raw_values
from stdsl.errors import EmptyLanguageError
from tests.compiler.language_difference import difference

WORDS = st.sampled_from(["null", "NULL", "Null", "nul", "nulls", " null", "null ", "a b", "", "x", "é", "</p>",
                         "a</p>b", " ", "\u3000x", "x\u2028", "asc", "desc"])
GUARDS = {"null": lambda: raw_values.not_word("null"), "stripped": raw_values.unstripped,
          "no end tag": lambda: not_containing(["</p>"])}


@settings(max_examples=60, deadline=None)
@given(words=st.lists(WORDS, min_size=1, max_size=5, unique=True),
       guards=st.lists(st.sampled_from(sorted(GUARDS)), min_size=1, max_size=3, unique=True))
def test_an_enum_keeps_exactly_the_literals_every_guard_accepts(words: list[str], guards: list[str]) -> None:
    enum = ir.alt(*(ir.literal(word) for word in words))
    nodes = [GUARDS[name]() for name in guards]
    product = build_automaton(enum)
    try:
        for node in nodes:
            product = intersect(product, build_automaton(node))
    except EmptyLanguageError:
        with pytest.raises(EmptyLanguageError):
            build_automaton(raw_values.intersection(enum, *nodes))
        return
    assert difference(build_automaton(raw_values.intersection(enum, *nodes)), product) is None
