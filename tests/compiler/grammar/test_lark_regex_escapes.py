"""Backslashes before a quote in a Lark regex literal, read as Lark reads them (oracle: Lark's own Earley parser
with the dynamic lexer): Lark drops the backslash before every `"` after doubling the escapes, so `/[^\\\\"]/` is
`[^"]` to Lark."""
from __future__ import annotations

import itertools

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl import Grammar, compile
from stdsl.errors import GrammarError

ALPHABET = ["\\", '"', "a"]
STRINGS = ["".join(chars) for size in range(1, 4) for chars in itertools.product(ALPHABET, repeat=size)]


def _agree(body: str) -> None:
    text = f"start: /{body}/\n"
    try:
        parser = lark.Lark(text, lexer="dynamic")
    except Exception:  # Lark refuses the literal (a bad escape, a regex error from `re` or `regex`): nothing to compare
        return
    try:
        constraint = compile(Grammar(text))
    except GrammarError:
        return
    for s in STRINGS:
        try:
            parser.parse(s)
            expected = True
        except lark.exceptions.LarkError:
            expected = False
        assert constraint.accepts(s) == expected, (text, s)


@pytest.mark.parametrize("body", ['[\\\\"a]', '[^\\\\"]', '\\\\"', '\\\\\\\\"', '\\\\\\"', 'a\\\\', '[\\\\a]"'])
def test_backslash_runs_before_a_quote(body: str) -> None:
    _agree(body)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["\\\\", "\\", '"', "a", "[", "]", "^", "*"]), min_size=1, max_size=6).map("".join))
def test_random_bodies_read_as_lark_reads_them(body: str) -> None:
    _agree(body)
