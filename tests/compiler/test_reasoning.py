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
