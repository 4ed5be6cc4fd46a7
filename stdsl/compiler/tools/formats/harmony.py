"""gpt-oss Harmony: a reply is messages on channels, after the prompt's `<|start|>assistant`.

    REPLY    = ANALYSIS? ( FINAL | CALL )
    ANALYSIS = <|channel|>analysis<|message|> TEXT <|end|><|start|>assistant
    FINAL    = <|channel|>final<|message|> CONTENT
    CALL     = <|channel|>commentary to=functions.NAME <|constrain|>json<|message|> ARGS <|call|>

ANALYSIS is the thinking block of the Harmony format (`stdsl.compiler.reasoning.HARMONY_CALLS`,
TEXT: no `<|end|>`), composed before this format's grammar of FINAL | CALL where the chat template is
Harmony's, so the analysis text is the reply's reasoning and `reasoning_budget` bounds it; the reader
here still skips one at the start of a reply.  `<|call|>` ends the turn, so a reply holds at most one
call (`parallel_tool_calls` changes nothing).  The content is the final channel's text, known only once
the channel is, so it is sent when the reply ends.  mlx-lm has no Harmony parser: the reader here
follows OpenAI's published format.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from stdsl.compiler import ir
from stdsl.compiler.not_containing import not_containing
from stdsl.compiler.reasoning import HARMONY
from stdsl.compiler.tools.formats.base import JsonArgumentsFormat, ParsedCall, Tools, read_json

_ANALYSIS = re.compile(re.escape(HARMONY.open) + ".*?" + re.escape(HARMONY.close_text), re.DOTALL)
_HEAD = re.compile(r"<\|channel\|>commentary to=functions\.([A-Za-z0-9_-]{1,64}) <\|constrain\|>json<\|message\|>")


class HarmonyFormat(JsonArgumentsFormat):
    """gpt-oss's Harmony channels (see the module docstring)."""

    name = "harmony"
    triggers = ("<|channel|>commentary",)
    tail = "<|call|>"
    streams_content = False
    template_marks = ("<|channel|>", "<|constrain|>")
    body_excludes = ("<|call|>",)
    markers = ("<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|constrain|>", "<|call|>")
    spacing = None
    """Compact, as OpenAI's Harmony format writes a call's JSON (`{"location":"Tokyo"}`)."""

    def head(self, name: str, index: int) -> str:
        return f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"

    def head_at(self, reply: str, position: int) -> tuple[str, int] | None:
        match = _HEAD.match(reply, position)
        return (match.group(1), match.end()) if match else None

    def free_ir(self) -> ir.Node:
        return not_containing(["<|"])

    def content_ir(self, content: ir.Node) -> ir.Node:
        return ir.seq(self.literal(HARMONY.answer_head), content)

    def calls_ir(self, call: ir.Node, parallel: bool) -> ir.Node:
        return call

    def reply_ir(self, text: ir.Node, calls: ir.Node, formatted: bool) -> ir.Node:
        """A final-channel message or a call: a Harmony reply is messages on channels, never text before them."""
        return ir.alt(self.content_ir(text), calls)

    def join(self, texts: Sequence[str]) -> str:
        return "".join(texts[:1])

    def parse(self, reply: str, tools: Tools) -> tuple[str, list[ParsedCall]]:
        analysis = _ANALYSIS.match(reply)
        position = analysis.end() if analysis else 0
        if reply.startswith(HARMONY.answer_head, position):
            return reply[position + len(HARMONY.answer_head):], []
        head = self.head_at(reply, position)
        value = read_json(reply, head[1]) if head is not None else None
        if head is None or value is None or not reply.startswith(self.tail, value[1]):
            return "", []
        end = value[1] + len(self.tail)
        return "", [ParsedCall(head[0], reply[head[1]: value[1]], reply[position:end])]
