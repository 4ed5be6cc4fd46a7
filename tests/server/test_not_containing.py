"""The not-containing expression (Proposition 3, and the Aho-Corasick form for other literal sets) against brute force:
every string up to length 6, and random strings."""
from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.not_containing import not_containing
from stdsl.errors import CompileError

LITERAL_SETS = [
    ["<ab"],
    ["<a", "<ab"],
    ["<ab", "<b", "<aab"],
    ["<aba", "<ab", "<bb"],
    ["<"],
    ["<a", "<"],
    ["ab"],
    ["<a<b"],
    ["aa", "<b"],
    ["[T]", "<a", "a]"],
]
TOOL_TAGS = ["<tool_call>", "<function="]


def _alphabet(literals: list[str]) -> str:
    return "".join(sorted({c for literal in literals for c in literal} | {"<", "z"}))


def _brute(text: str, literals: list[str]) -> bool:
    return not any(literal in text for literal in literals)


@pytest.mark.parametrize("literals", LITERAL_SETS)
def test_equals_brute_force_on_every_string_up_to_length_6(literals: list[str]) -> None:
    automaton = build_automaton(not_containing(literals))
    alphabet = _alphabet(literals)
    for length in range(7):
        for chars in itertools.product(alphabet, repeat=length):
            text = "".join(chars)
            assert automaton.accepts(text.encode()) == _brute(text, literals), (literals, text)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(alphabet="abc", min_size=0, max_size=3).map(lambda s: "<" + s), min_size=1, max_size=4,
                unique=True))
def test_equals_brute_force_on_generated_literal_sets(literals: list[str]) -> None:
    automaton = build_automaton(not_containing(literals))
    alphabet = _alphabet(literals)
    for length in range(6):
        for chars in itertools.product(alphabet, repeat=length):
            text = "".join(chars)
            assert automaton.accepts(text.encode()) == _brute(text, literals), (literals, text)


def _random_text(rng: random.Random, literals: list[str]) -> str:
    """Random text glued from literal pieces, unicode letters and '<', so near-misses are common."""
    pieces: list[str] = []
    for _ in range(rng.randint(0, 8)):
        kind = rng.random()
        if kind < 0.4:
            literal = rng.choice(literals)
            pieces.append(literal[: rng.randint(1, len(literal))])
        elif kind < 0.6:
            pieces.append("<")
        else:
            pieces.append("".join(rng.choice("ab fé€😀\n{}_=") for _ in range(rng.randint(1, 4))))
    return "".join(pieces)


@pytest.mark.parametrize("literals", [TOOL_TAGS, ["<tool_call>"], ["</parameter>"], *LITERAL_SETS])
def test_equals_brute_force_on_random_strings(literals: list[str]) -> None:
    automaton = build_automaton(not_containing(literals))
    rng = random.Random(12)
    hits = 0
    for _ in range(2000):
        text = _random_text(rng, literals)
        expected = _brute(text, literals)
        hits += not expected
        assert automaton.accepts(text.encode()) == expected, (literals, text)
    assert hits > 100


def test_tool_tags_on_every_short_string_over_their_alphabet_prefixes() -> None:
    automaton = build_automaton(not_containing(TOOL_TAGS))
    for length in range(5):
        for chars in itertools.product("<tfz", repeat=length):
            text = "".join(chars)
            for wrapped in (text, text + "<tool_call>", "<function" + text, text + "<function=x"):
                assert automaton.accepts(wrapped.encode()) == _brute(wrapped, TOOL_TAGS), wrapped


@pytest.mark.parametrize("bad", [[""], [3]])
def test_empty_or_non_text_literals_are_refused(bad: list) -> None:
    with pytest.raises(CompileError):
        not_containing(bad)


@pytest.mark.parametrize("literals", [["<e>"], ["ab", "<e>"], []])
def test_excluded_characters_never_occur(literals: list[str]) -> None:
    automaton = build_automaton(not_containing(literals, excluded="}b"))
    for length in range(5):
        for chars in itertools.product("<e>b}a", repeat=length):
            text = "".join(chars)
            expected = _brute(text, literals) and "}" not in text and "b" not in text
            assert automaton.accepts(text.encode()) == expected, (literals, text)
