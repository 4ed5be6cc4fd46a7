"""Which thinking block an output has, read from the chat template and the prompt's end: `<think>` families and
gpt-oss's Harmony (its analysis channel the block, its final channel the answer's head), every switch value."""
from __future__ import annotations

import pytest

from stdsl.compiler.reasoning import HARMONY, HARMONY_CALLS, THINK
from stdsl.errors import OptionError
from stdsl.runtime.model.thinking_template import Thinking, before_reply, block_state, thinking_of
from tests.runtime.thinking_templates import CHOOSING, HARMONY_TEMPLATE, OPENING

ASKED = "<|start|>user<|message|>hi<|end|>"
GENERATION = ASKED + "<|start|>assistant"


@pytest.mark.parametrize("tail, requested, expected", [
    (GENERATION, None, "optional"),
    (GENERATION, True, "required"),
    (GENERATION, False, "off"),
    (GENERATION + HARMONY.open, None, "opened"),
    (GENERATION + HARMONY.open + "so", True, "opened"),
    (GENERATION + HARMONY.open + "so" + HARMONY.close_text, None, "off"),
    (GENERATION + HARMONY.open + "so" + HARMONY.close_text + "<|channel|>commentary to=functions.f <|constrain|>json"
     "<|message|>{}<|call|><|start|>functions.f to=assistant<|channel|>commentary<|message|>1<|end|>"
     "<|start|>assistant", True, "required"),
])
def test_harmony_modes_follow_the_prompt_and_the_switch(tail: str, requested: bool | None, expected: str) -> None:
    assert thinking_of(HARMONY_TEMPLATE, tail, requested) == Thinking(HARMONY, expected)


def test_a_prompt_that_opened_the_final_channel_cannot_think_first() -> None:
    answering = GENERATION + HARMONY.answer_head
    assert thinking_of(HARMONY_TEMPLATE, answering, None) is None
    assert thinking_of(HARMONY_TEMPLATE, answering, False) is None
    with pytest.raises(OptionError, match="already opens the answer"):
        thinking_of(HARMONY_TEMPLATE, answering, True)


def test_think_families_are_unchanged() -> None:
    assert thinking_of(OPENING, "<|im_start|>assistant\n<think>\n", None) == Thinking(THINK, "opened")
    assert thinking_of(CHOOSING, "<|im_start|>assistant\n", None) == Thinking(THINK, "optional")
    assert thinking_of(CHOOSING, "<|im_start|>assistant\n", False) is None
    assert thinking_of(CHOOSING, "<|im_start|>assistant\n<think>\n\n</think>\n\n", None) is None
    assert thinking_of(None, "x", None) is None and thinking_of(None, "x", True) == Thinking(THINK, "required")


def test_the_closed_state_reads_each_familys_closing_text() -> None:
    assert block_state("<think>a</think>\n\n", THINK) == "closed"
    assert block_state(HARMONY.open + "a" + HARMONY.close_text, HARMONY) == "closed"
    assert block_state(HARMONY.open + "a<|end|><|start|>user", HARMONY) == "none"
    assert block_state(HARMONY.open + "a", HARMONY) == "open"


def test_a_harmony_tool_reply_takes_the_place_of_the_final_head() -> None:
    for mode in ("opened", "required", "optional"):
        assert before_reply(Thinking(HARMONY, mode), True) == Thinking(HARMONY_CALLS, mode)
        assert before_reply(Thinking(HARMONY, mode), False) == Thinking(HARMONY, mode)
    assert before_reply(Thinking(HARMONY, "off"), True) is None
    assert before_reply(Thinking(THINK, "required"), True) == Thinking(THINK, "required")
    assert before_reply(None, True) is None
