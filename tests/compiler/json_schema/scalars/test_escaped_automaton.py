"""A grammar's DFA as JSON strings (`json_string_of`) against `json.loads` and the grammar's own automaton: every
string `s` of the language is accepted as `json.dumps(s, ensure_ascii=False)` and with any escape of its
quotation marks, backslashes and controls; a mutation of `s` is accepted exactly when it is in the language; and
every JSON string the construction accepts decodes (strictly) to a string of the language."""
from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.grammar import Grammar
from stdsl.compiler.json_schema.scalars.escaped_automaton import ESCAPED, escape_spellings, json_string_of
from tests.compiler.accepting_walks import random_accepted

LANGUAGES = [
    Grammar(r'''start: expr
expr: term (SP ("+" | "-") SP term)*
term: NUMBER | "(" NUMBER ")"
SP: " "
%import common.NUMBER''', syntax="lark"),
    Grammar(r'''start: line ("\n" line)*
line: /[a-z"\\]{1,6}/ ("\t" | "é" | "\u0001")?''', syntax="lark"),
    Grammar(r'''start: "SELECT " COLS " FROM " NAME (" WHERE " NAME "=" VALUE)?
COLS: "*" | NAME (", " NAME)*
NAME: /[a-z_]+/
VALUE: /'[^'\n]*'/ | /[0-9]+/''', syntax="lark"),
    stdsl.Regex(r'[\x00-\x1f"\\/a]{0,5}'),
    stdsl.Regex(r"[^\n]{0,8}\n?ok"),
]


@functools.cache
def _machines(index: int) -> tuple[Automaton, Automaton]:
    """(the language's DFA, the DFA of its JSON strings)."""
    language = stdsl.compile(LANGUAGES[index]).automaton
    return language, build_automaton(json_string_of(language.transitions, language.accepting))


def _accepts(automaton: Automaton, text: str) -> bool:
    state = 0
    for byte in text.encode("utf-8", "surrogatepass"):
        state = int(automaton.transitions[state, byte])
        if state < 0:
            return False
    return bool(automaton.accepting[state])


def _in_language(index: int, text: str) -> bool:
    return _accepts(_machines(index)[0], text)


def _respelled(value: str, draw_index: int) -> str:
    """`value` as a JSON string with each escaped character in one of its escapes (chosen by `draw_index`)."""
    out = ['"']
    for k, char in enumerate(value):
        code = ord(char)
        if code in ESCAPED:
            spellings = escape_spellings(code)
            out.append(spellings[(draw_index + k) % len(spellings)].decode())
        else:
            out.append(char)
    return "".join(out) + '"'


MUTATION_CHARS = st.sampled_from(['"', "\\", "\n", "\t", "\x00", "\x1f", "a", "é", "/", "+", " ", "1", "'", "*"])


@st.composite
def _member_and_mutants(draw: st.DrawFn, index: int) -> tuple[str, list[str]]:
    language, _ = _machines(index)
    seed = draw(st.integers(0, 2**32 - 1))
    member = random_accepted(language, np.random.default_rng(seed), wander=draw(st.integers(0, 30))).decode()
    mutants = []
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, len(member)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        char = draw(MUTATION_CHARS)
        if kind == "insert":
            mutants.append(member[:position] + char + member[position:])
        elif kind == "delete":
            mutants.append(member[:position] + member[position + 1:])
        else:
            mutants.append(member[:position] + char + member[position + 1:])
    return member, mutants


@pytest.mark.parametrize("index", range(len(LANGUAGES)))
@settings(max_examples=40, deadline=None, derandomize=True)
@given(data=st.data())
def test_accepts_exactly_the_json_spellings_of_the_language(index: int, data: st.DataObject) -> None:
    member, mutants = data.draw(_member_and_mutants(index))
    strings = _machines(index)[1]
    assert _in_language(index, member)
    assert _accepts(strings, json.dumps(member, ensure_ascii=False)), member
    assert _accepts(strings, _respelled(member, data.draw(st.integers(0, 7)))), member
    for mutant in mutants:
        assert _accepts(strings, json.dumps(mutant, ensure_ascii=False)) == _in_language(index, mutant), mutant


@pytest.mark.parametrize("index", range(len(LANGUAGES)))
def test_every_accepted_json_string_decodes_into_the_language(index: int) -> None:
    strings = _machines(index)[1]
    rng = np.random.default_rng(index)
    for _ in range(300):
        text = random_accepted(strings, rng, wander=int(rng.integers(0, 40))).decode("utf-8")
        value = json.loads(text)
        assert isinstance(value, str) and _in_language(index, value), text


def test_ordinary_characters_are_written_raw_only() -> None:
    strings = _machines(3)[1]
    assert _accepts(strings, '"/a"') and _accepts(strings, r'"\u0000\"\\"') and _accepts(strings, r'"\u001F\b"')
    assert not _accepts(strings, r'"\/"') and not _accepts(strings, r'"\u0061"') and not _accepts(strings, '"\n"')
