"""THINK · CLOSE · ANSWER compiled as one constraint: equal to the oracle "no closing tag in the thinking text,
then the closing text, then an answer", for a DFA answer and a pushdown one, in every mode."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.constraint import Constraint
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.reasoning import THINK, think_then
from stdsl.compiler.special_tokens import special_spelling
from stdsl.errors import CompileError

REGEX = stdsl.Regex(r"(yes|no)-[0-9]{1,2}")
TREE = {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "$ref": "#/$defs/node"}
THOUGHTS = st.text(alphabet="<>/thinkx\n ", max_size=14)
ANSWERS = st.sampled_from(["yes-1", "no-42", "yes-", "maybe", "", "[]", "[[],[[]]]", "[[]", "</think>no-1"])


@pytest.fixture(scope="module")
def answers() -> list:
    return [stdsl.compile(REGEX), stdsl.compile(TREE)]


def oracle(answer, mode: str, text: str) -> bool:
    """Whether `text` is a thinking block (as `mode` writes it) followed by an answer."""
    if mode == "optional" and answer.accepts(text):
        return True
    if mode != "opened":
        if not text.startswith(THINK.open):
            return False
        text = text[len(THINK.open):]
    end = text.find(THINK.close)
    return end >= 0 and text[end:].startswith(THINK.close_text) and answer.accepts(text[end + len(THINK.close_text):])


@pytest.mark.parametrize("mode", ["opened", "required", "optional"])
@settings(max_examples=150, deadline=None)
@given(thought=THOUGHTS, answer_text=ANSWERS, opened=st.booleans(), which=st.integers(0, 1))
def test_the_composed_constraint_equals_the_oracle(answers, mode, thought, answer_text, opened, which) -> None:
    answer = answers[which]
    composed = think_then(answer, THINK, mode)
    head = THINK.open if opened else ""
    for text in (head + thought + THINK.close_text + answer_text, head + thought + answer_text, answer_text):
        assert composed.accepts(text) == oracle(answer, mode, text), text


def test_composed_constraints_are_a_dfa_or_a_pushdown_like_their_answer(answers) -> None:
    regex, tree = (think_then(a, THINK, "opened").constraint for a in answers)
    assert isinstance(regex, Constraint) and isinstance(tree, PushdownConstraint)
    assert tree.grammar.max_depth == answers[1].grammar.max_depth + 1


def test_an_optional_block_before_an_answer_that_may_begin_like_it_is_refused() -> None:
    tagged = stdsl.compile(stdsl.Regex(r"<think>[a-z]*"))
    with pytest.raises(CompileError, match="ambiguous"):
        think_then(tagged, THINK, "optional")
    assert think_then(tagged, THINK, "required").accepts("<think></think>\n\n<think>a")


TAGS = ("<think>", "</think>")


@pytest.mark.parametrize("mode", ["opened", "required", "optional"])
@settings(max_examples=100, deadline=None)
@given(thought=THOUGHTS, answer_text=ANSWERS, opened=st.booleans(), which=st.integers(0, 1))
def test_tags_written_as_tokens_equal_the_oracle_on_their_spelling(answers, mode, thought, answer_text, opened,
                                                                   which) -> None:
    """With the tags as tokens, the composed constraint is the oracle read with each tag's token in place of its
    text (the thinking text still never spells the closing tag), and text tags are refused where tokens stand."""
    answer = answers[which]
    composed = think_then(answer, THINK, mode, TAGS)
    opening, close = special_spelling(THINK.open), special_spelling(THINK.close)
    head = opening if opened else b""
    tail = THINK.close_text[len(THINK.close):].encode()
    for text in (head + thought.encode() + close + tail + answer_text.encode(), answer_text.encode()):
        assert composed.accepts(text) == token_oracle(answer, mode, text), text
    text_tags = (THINK.open if mode != "opened" else "") + "x" + THINK.close_text + ("yes-1", "[]")[which]
    assert not composed.accepts(text_tags.encode()) and composed.accepts(text_tags)
    assert set(composed.constraint.special_tokens) == ({THINK.close} if mode == "opened" else set(TAGS))


def token_oracle(answer, mode: str, data: bytes) -> bool:
    """`oracle` over bytes in which the tags are their tokens' spellings (and appear nowhere else)."""
    opening, close = special_spelling(THINK.open), special_spelling(THINK.close)
    close_text = close + THINK.close_text[len(THINK.close):].encode()
    if mode == "optional" and answer.accepts(data):
        return True
    if mode != "opened":
        if not data.startswith(opening):
            return False
        data = data[len(opening):]
    end = data.find(close)
    thought = data[:end]
    return (end >= 0 and THINK.close.encode() not in thought and b"\xff" not in thought
            and data[end:].startswith(close_text) and answer.accepts(data[end + len(close_text):]))


@pytest.mark.parametrize("mode", ["opened", "required", "optional"])
def test_the_answers_special_tokens_are_kept(mode) -> None:
    answer = stdsl.compile(stdsl.Grammar('start: "n" <|im_start|> /[0-9]/'))
    composed = think_then(answer, THINK, mode, TAGS)
    assert "<|im_start|>" in composed.constraint.special_tokens
    head = special_spelling(THINK.open) if mode != "opened" else b""
    assert composed.accepts(head + b"hm" + special_spelling(THINK.close) + b"\n\nn" + special_spelling("<|im_start|>")
                            + b"7")
    tree = stdsl.compile({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"})
    assert set(think_then(tree, THINK, mode, TAGS).constraint.special_tokens) <= set(TAGS)


def test_a_tag_the_format_does_not_have_is_refused(answers) -> None:
    with pytest.raises(CompileError, match="<|python_tag|>"):
        think_then(answers[0], THINK, "opened", ("<|python_tag|>",))
