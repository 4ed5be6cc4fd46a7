"""Whether a prompt leaves a reasoning model to think first, read from its chat template and the prompt's end.

A template that mentions `<think>`, `enable_thinking` or `reasoning_content` belongs to a `<think>`
family, one that writes `<|channel|>` to gpt-oss's Harmony (its analysis-channel message is the block,
its final-channel message the answer).  The prompt's end then says where the block stands: opened
by the template (the output starts inside it), closed by the template (thinking is off), or not
written (the model may open it, or must when thinking is asked for).  Thinking off leaves a `<think>`
output unwrapped; a Harmony answer still goes in the final channel ("off": its header is forced).
"""

from __future__ import annotations

from dataclasses import dataclass

from stdsl.compiler.reasoning import HARMONY, HARMONY_CALLS, THINK, ThinkingFormat
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
    """"open" when the prompt ends inside a block, "closed" when it ends right after one (its closing text
    written), else "none"."""
    start = prompt_tail.rfind(fmt.open)
    if start < 0:
        return "none"
    end = prompt_tail.find(fmt.close, start)
    if end < 0:
        return "open"
    rest = prompt_tail[end + len(fmt.close):].strip()
    return "closed" if rest in ("", fmt.close_text[len(fmt.close):].strip()) else "none"


def thinking_of(template: str | None, prompt_tail: str, requested: bool | None) -> Thinking | None:
    """The thinking block of an output after a prompt ending in `prompt_tail`, or None when there is none.

    `requested`: True asks for thinking (the block is opened by forced text when the prompt did not
    open it), False turns it off, None follows the template and the prompt.
    """
    fmt = HARMONY if template and HARMONY_MARK in template else THINK
    if fmt.answer_head and prompt_tail.rstrip().endswith(fmt.answer_head):
        if requested:
            raise OptionError("reasoning", f"the prompt already opens the answer ({fmt.answer_head!r}), so the "
                                           "model cannot think before it; leave reasoning unset or false")
        return None
    off = thinking_off(fmt)
    if requested is False:
        return off
    state = block_state(prompt_tail, fmt)
    knows = bool(template) and (fmt is HARMONY or any(mark in (template or "") for mark in THINKING_MARKS))
    if state == "open":
        return Thinking(fmt, "opened")
    if state == "closed" or not (knows or requested):
        return off
    return Thinking(fmt, "required" if requested else "optional")


def thinking_off(fmt: ThinkingFormat) -> Thinking | None:
    """What an output without a block has: the answer's head forced where the family writes one, else nothing."""
    return Thinking(fmt, "off") if fmt.answer_head else None


def before_reply(thinking: Thinking | None, writes_channels: bool) -> Thinking | None:
    """`thinking` before an answer that writes its own Harmony channel header (`writes_channels`: a Harmony tool
    reply, a final message or a call), which then takes the place of the final-channel head."""
    if thinking is None or thinking.format is not HARMONY or not writes_channels:
        return thinking
    return None if thinking.mode == "off" else Thinking(HARMONY_CALLS, thinking.mode)
