"""Whether a prompt leaves a reasoning model to think first, read from its chat template and the prompt's end.

A template that mentions `<think>`, `enable_thinking` or `reasoning_content` belongs to a thinking
family.  The prompt's end then says where the block stands: opened by the template (the output
starts inside it), closed by the template (thinking is off: nothing changes), or not written (the
model may open it, or must when thinking is asked for).  gpt-oss's analysis channel is a message of
its own before a final-channel answer, not a block before the answer, so asking it to think is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from stdsl.compiler.reasoning import THINK, ThinkingFormat
from stdsl.errors import OptionError

THINKING_MARKS = ("<think>", "enable_thinking", "reasoning_content")
HARMONY_MARK = "<|channel|>"
PROMPT_TAIL_TOKENS = 64
"""Tokens at the end of a prompt read back to see whether it opened a thinking block."""


@dataclass(frozen=True)
class Thinking:
    """The thinking block a request's output has: the family's format and the mode (see `stdsl.compiler.reasoning`)."""

    format: ThinkingFormat
    mode: str


def block_state(prompt_tail: str, fmt: ThinkingFormat) -> str:
    """"open" when the prompt ends inside a block, "closed" when it ends right after one, else "none"."""
    start = prompt_tail.rfind(fmt.open)
    if start < 0:
        return "none"
    end = prompt_tail.find(fmt.close, start)
    if end < 0:
        return "open"
    return "closed" if not prompt_tail[end + len(fmt.close):].strip() else "none"


def thinking_of(template: str | None, prompt_tail: str, requested: bool | None) -> Thinking | None:
    """The thinking block of an output after a prompt ending in `prompt_tail`, or None when there is none.

    `requested`: True asks for thinking (the block is opened by forced text when the prompt did not
    open it), False turns it off, None follows the template and the prompt.
    """
    if requested is False:
        return None
    if template and HARMONY_MARK in template:
        if requested:
            raise OptionError("reasoning", "this chat template writes gpt-oss's analysis channel, whose answer "
                                           "follows in a final-channel message; thinking before a constrained "
                                           "answer is not supported for it (its tool calls may still carry an "
                                           "analysis message: tool_format harmony)")
        return None
    fmt = THINK
    state = block_state(prompt_tail, fmt)
    knows = bool(template) and any(mark in (template or "") for mark in THINKING_MARKS)
    if state == "open":
        return Thinking(fmt, "opened")
    if state == "closed" or not (knows or requested):
        return None
    return Thinking(fmt, "required" if requested else "optional")
