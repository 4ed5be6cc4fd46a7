"""Special tokens in grammars compiled without a tokenizer: private spellings, by name and by id, where they may stand.

A reference `<name>` is the bytes 0xFF name 0xFF, which no UTF-8 text holds, so ordinary text that spells
the same characters can never stand in for it; `<[id]>` needs the tokenizer's table of special tokens.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as hs

import stdsl
from stdsl import Grammar
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.special_tokens import special_spans, special_spelling, spelled, visible_bytes
from stdsl.errors import GrammarError

TOKENS = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "<think>": 7, "</think>": 8, "<x>": 9}


def test_a_reference_is_its_private_spelling_and_nothing_else() -> None:
    constraint = stdsl.compile(Grammar('start: "a" <|im_start|> /[0-9]+/'))
    assert constraint.special_tokens == ("<|im_start|>",)
    assert constraint.accepts(b"a" + special_spelling("<|im_start|>") + b"12")
    assert not constraint.accepts(b"a<|im_start|>12"), "text spelling the token must not stand in for it"
    assert constraint.accepts("a<|im_start|>12"), "visible text reads the name as the token"
    assert not constraint.accepts("a<|im_start|>") and not constraint.accepts("a12")


def test_ids_resolve_through_the_tokenizers_table() -> None:
    grammar = Grammar('start: "a" <[1-2]> | "b" <[9]> <[7,8]>').with_special_tokens(TOKENS)
    constraint = stdsl.compile(grammar)
    assert set(constraint.special_tokens) == {"<|im_start|>", "<|im_end|>", "<x>", "<think>", "</think>"}
    for text in ("a<|im_start|>", "a<|im_end|>", "b<x><think>", "b<x></think>"):
        assert constraint.accepts(text), text
    for text in ("a<|endoftext|>", "b<x>", "a", "b<think>"):
        assert not constraint.accepts(text), text


@pytest.mark.parametrize("text, column, words", [
    ('start: "a" <[3]>', 12, "token id 3 is not a special or added token"),
    ('start: "a" <[7-10]>', 12, "token id 10 is not a special or added token"),
    ('start: "a" <|python_tag|>', 12, "<|python_tag|> is not a special or added token"),
])
def test_tokens_the_tokenizer_lacks_are_refused_at_their_position(text: str, column: int, words: str) -> None:
    with pytest.raises(GrammarError, match=words) as caught:
        stdsl.compile(Grammar(text).with_special_tokens(TOKENS))
    assert (caught.value.line, caught.value.column) == (1, column)


def test_ignored_text_may_follow_a_special_token_as_any_terminal() -> None:
    constraint = stdsl.compile(Grammar('start: <think> WORD </think> "!"\nWORD: /[a-z]+/\n%ignore " "'))
    assert constraint.accepts("<think> abc </think> !") and constraint.accepts("<think>abc</think>!")
    assert not constraint.accepts(" <think>abc</think>!")


def test_a_recursive_grammar_with_special_tokens_is_a_pushdown_that_records_them() -> None:
    constraint = stdsl.compile(Grammar('start: item\nitem: <|im_start|> "(" item* ")" <|im_end|> | "x"'))
    assert isinstance(constraint, PushdownConstraint)
    assert constraint.special_tokens == ("<|im_start|>", "<|im_end|>")
    assert constraint.accepts("<|im_start|>(x<|im_start|>()<|im_end|>)<|im_end|>")
    assert not constraint.accepts("<|im_start|>(x)") and not constraint.accepts(b"<|im_start|>()<|im_end|>")


def test_a_grammar_without_special_tokens_records_none() -> None:
    assert stdsl.compile(Grammar('start: "<|im_start|>" /[0-9]/')).special_tokens == ()
    assert stdsl.compile(Grammar('start: "<|im_start|>" /[0-9]/')).accepts("<|im_start|>1")


NAMES = ["<|a|>", "<|ab|>", "<b>", "</b>"]


@given(hs.lists(hs.one_of(hs.sampled_from(NAMES), hs.text(alphabet="ab<>|/ x", max_size=4)), max_size=6))
def test_spelling_and_visible_text_round_trip(pieces: list[str]) -> None:
    """Visible text read with the names gives private bytes whose visible form is the text again, and each
    special span is one whole name."""
    text = "".join(pieces)
    data = spelled(text, NAMES)
    assert visible_bytes(data) == text.encode()
    assert all(visible_bytes(data[a:b]).decode() in NAMES for a, b in special_spans(data))
