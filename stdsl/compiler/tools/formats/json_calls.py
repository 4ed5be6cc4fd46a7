"""Formats whose call carries its arguments as one JSON object: Hermes/Qwen, Llama 3.x, Mistral, DeepSeek V3, Kimi K2
and K3.

Each writes the tool name in a fixed head and the arguments as the JSON value typed by the
tool's schema, so a call's text is its head, the arguments verbatim, and its tail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from stdsl.compiler import ir
from stdsl.compiler.tools.formats.base import JsonArgumentsFormat, ParsedCall, Tools

MISTRAL_ID_LENGTH = 9
"""The length of a call id in Mistral's pre-v11 templates (which raise on any other)."""
_MISTRAL_ID = re.compile(f"[A-Za-z0-9]{{{MISTRAL_ID_LENGTH}}}")


def call_index() -> ir.Node:
    """A call's index in the reply, in decimal without leading zeros (Kimi K2's `:0`, Kimi K3's `index="1"`)."""
    digit = ir.byte_set([(ord("0"), ord("9"))])
    return ir.alt(ir.literal("0"), ir.seq(ir.byte_set([(ord("1"), ord("9"))]), ir.star(digit)))


class _PatternHeadFormat(JsonArgumentsFormat):
    """A format whose call head is read by one regular expression `_HEAD` with a `name` group."""

    _HEAD: re.Pattern[str]

    def head_at(self, reply: str, position: int) -> tuple[str, int] | None:
        match = self._HEAD.match(reply, position)
        return (match.group("name"), match.end()) if match else None


class _NamedJsonFormat(JsonArgumentsFormat):
    """A call head `{prefix}{"name": "NAME", "<key>": `; the tail closes the object."""

    prefix = ""
    key = "arguments"
    tail = "}"

    def head(self, name: str, index: int) -> str:
        return f'{self.prefix}{{"name": {json.dumps(name)}, "{self.key}": '

    def head_at(self, reply: str, position: int) -> tuple[str, int] | None:
        opening = f'{self.prefix}{{"name": '
        if not reply.startswith(opening, position):
            return None
        match = re.compile(r'"(?P<name>[a-zA-Z0-9_-]{1,64})", "' + self.key + '": ').match(
            reply, position + len(opening))
        return (match.group("name"), match.end()) if match else None


class HermesFormat(_NamedJsonFormat):
    """`<tool_call>\\n{"name": "NAME", "arguments": ARGS}\\n</tool_call>` (Hermes, Qwen2.5/3, the default)."""

    name = "hermes"
    triggers = ("<tool_call>",)
    prefix = "<tool_call>\n"
    tail = "}\n</tool_call>"
    separator_spellings = ("\n\n",)
    template_marks = ("<tool_call>",)
    body_excludes = ("</tool_call>",)
    markers = ("<tool_call>", "</tool_call>")


class Llama3JsonFormat(_NamedJsonFormat):
    """`<|python_tag|>{"name": "NAME", "parameters": ARGS}`, several joined by `; ` (Llama 3.1-3.3 JSON tool calls);
    the tag may be left out, as Llama 3.1-3.3's chat templates render a past call.

    A `{` starts the calls, so free text has none: vLLM's `llama3_json` reader decodes a JSON object at every `{`
    of a reply (a call when it has a name, no calls at all when one does not decode)."""

    name = "llama3_json"
    triggers = ("<|python_tag|>", "{")
    section_open = "<|python_tag|>"
    open_spellings = ("",)
    separator = "; "
    key = "parameters"
    template_marks = ("<|python_tag|>",)
    markers = ("<|python_tag|>",)


class MistralFormat(_NamedJsonFormat):
    """`[TOOL_CALLS] [{"name": "NAME", "arguments": ARGS}, ...]` (the space as the v3 templates write it, and
    mistral_common's sentencepiece before the list; also without), the reply's end (Mistral's v3 tokenizer format); a
    call may end `, "id": "ID"}`, as Mistral's pre-v11 templates render every past call (ID nine letters or digits,
    which those templates require), and mlx-lm's parser returns that id."""

    name = "mistral"
    triggers = ("[TOOL_CALLS]",)
    section_open = "[TOOL_CALLS] ["
    open_spellings = ("[TOOL_CALLS][",)
    separator = ", "
    section_close = "]"
    template_marks = ("[TOOL_CALLS]",)
    markers = ("[TOOL_CALLS]",)
    custom_in_object = True
    _ID_TAIL = re.compile(f'(?:, "id": "(?P<id>{_MISTRAL_ID.pattern})")?\\}}')

    def tail_ir(self) -> ir.Node:
        alphanumeric = ir.byte_set([(ord("0"), ord("9")), (ord("A"), ord("Z")), (ord("a"), ord("z"))])
        call_id = ir.seq(ir.literal(', "id": "'), ir.repeat(alphanumeric, MISTRAL_ID_LENGTH, MISTRAL_ID_LENGTH),
                         ir.literal('"'))
        return ir.seq(ir.optional(call_id), ir.literal("}"))

    def tail_at(self, reply: str, position: int) -> tuple[int, str | None]:
        match = self._ID_TAIL.match(reply, position)
        return (match.end(), match.group("id")) if match else (-1, None)

    def render_past(self, name: str, arguments: str, index: int, call_id: str) -> str:
        """With its id where the id is one the templates write (nine letters or digits), as they render it."""
        call = self.render(name, arguments, index)
        if not _MISTRAL_ID.fullmatch(call_id):
            return call
        return f'{call[:-len(self.tail)]}, "id": "{call_id}"{self.tail}'


class DeepSeekV3Format(_PatternHeadFormat):
    """DeepSeek V3 / R1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```
    <｜tool▁call▁end｜>`, calls joined by a newline, then `<｜tool▁calls▁end｜>`."""

    name = "deepseek_v3"
    triggers = ("<｜tool▁calls▁begin｜>",)
    free_excludes = ("<｜tool▁call▁begin｜>",)
    """vLLM's `deepseek_v3` reader takes every spelled-out call of the reply, free text included."""
    section_open = "<｜tool▁calls▁begin｜>"
    separator = "\n"
    section_close = "<｜tool▁calls▁end｜>"
    tail = "\n```<｜tool▁call▁end｜>"
    template_marks = ("<｜tool▁calls▁begin｜>", "```json")
    body_excludes = ("<｜tool▁call▁end｜>",)
    markers = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
               "<｜tool▁sep｜>")
    _HEAD = re.compile(r"<｜tool▁call▁begin｜>function<｜tool▁sep｜>(?P<name>[a-zA-Z0-9_-]{1,64})\n```json\n")

    def head(self, name: str, index: int) -> str:
        return f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n"


class KimiK2Format(_PatternHeadFormat):
    """Kimi K2: `<|tool_calls_section_begin|>` then `<|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>
    ARGS<|tool_call_end|>` per call, then `<|tool_calls_section_end|>`; INDEX is the model's call counter."""

    name = "kimi_k2"
    triggers = ("<|tool_calls_section_begin|>",)
    section_open = "<|tool_calls_section_begin|>"
    separator = ""
    section_close = "<|tool_calls_section_end|>"
    tail = "<|tool_call_end|>"
    template_marks = ("<|tool_calls_section_begin|>",)
    body_excludes = ("<|tool_call_end|>", "<|tool_calls_section_end|>")
    markers = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
               "<|tool_call_argument_begin|>", "<|tool_call_end|>")
    _HEAD = re.compile(r"<\|tool_call_begin\|>functions\.(?P<name>[a-zA-Z0-9_-]{1,64}):(0|[1-9][0-9]*)"
                       r"<\|tool_call_argument_begin\|>")

    def head(self, name: str, index: int) -> str:
        return f"<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>"

    def head_ir(self, name: str) -> ir.Node:
        return ir.seq(self.literal(f"<|tool_call_begin|>functions.{name}:"), call_index(),
                      self.literal("<|tool_call_argument_begin|>"))


class PlainJsonFormat(_NamedJsonFormat):
    """A bare `{"name": "NAME", "arguments": ARGS}` (parallel: also a JSON list of them); any other reply is text.

    Free text is a reply that does not begin with `{` or `[`, so content and calls never overlap.
    """

    name = "json"
    separator = ", "
    _OPENERS = "{["

    def free_ir(self) -> ir.Node:
        first = ir.codepoints([(ord(c), ord(c)) for c in self._OPENERS], negate=True)
        return ir.optional(ir.seq(first, ir.star(ir.any_char())))

    def calls_ir(self, call: ir.Node, parallel: bool) -> ir.Node:
        if not parallel:
            return call
        listed = ir.seq(ir.literal("["), call, ir.star(ir.seq(ir.literal(self.separator), call)), ir.literal("]"))
        return ir.alt(call, listed)

    def reply_ir(self, text: ir.Node, calls: ir.Node, formatted: bool) -> ir.Node:
        """Text or calls: the language of text then optional calls (text that does not begin with `{` or `[`
        already holds any calls after its first character), written so that the first byte decides, which a
        recursive parameter's pushdown needs (one byte of lookahead where its call starts)."""
        return super().reply_ir(text, calls, formatted) if formatted else ir.alt(text, calls)

    def join(self, texts: Sequence[str]) -> str:
        if len(texts) < 2:
            return "".join(texts)
        return "[" + self.separator.join(texts) + "]"

    def call_start(self, reply: str) -> int:
        return 0 if reply[:1] and reply[0] in self._OPENERS else -1

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        if not reply.startswith("["):
            return super().read_calls(reply, start, tools)[:1]
        calls = super().read_calls(reply, start + 1, tools)
        return calls


class MistralV11Format(_PatternHeadFormat):
    """`[TOOL_CALLS]NAME[ARGS]ARGS` per call, back to back, the reply's end (Mistral's v11+ tokenizer format)."""

    name = "mistral_v11"
    triggers = ("[TOOL_CALLS]",)
    separator = ""
    template_marks = ("[TOOL_CALLS]", "[ARGS]")
    markers = ("[TOOL_CALLS]", "[ARGS]")
    _HEAD = re.compile(r"\[TOOL_CALLS\](?P<name>[a-zA-Z0-9_-]{1,64})\[ARGS\]")

    def head(self, name: str, index: int) -> str:
        return f"[TOOL_CALLS]{name}[ARGS]"


class KimiK3Format(_PatternHeadFormat):
    """Kimi K3's XTML calls with the arguments as one JSON block: `<|open|>tools<|sep|>` then per call
    `<|open|>call tool="NAME" index="N"<|sep|><|open|>json type="object"<|sep|>ARGS<|close|>json<|sep|>
    <|close|>call<|sep|>`, then `<|close|>tools<|sep|>`; N is the model's call counter."""

    name = "kimi_k3"
    triggers = ("<|open|>tools<|sep|>",)
    section_open = "<|open|>tools<|sep|>"
    separator = ""
    section_close = "<|close|>tools<|sep|>"
    tail = "<|close|>json<|sep|><|close|>call<|sep|>"
    template_marks = ("<|open|>", "<|close|>call")
    body_excludes = ("<|close|>json<|sep|>", "<|close|>call<|sep|>", "<|close|>tools<|sep|>")
    markers = ("<|open|>", "<|close|>", "<|sep|>")
    custom_in_object = True
    _HEAD = re.compile(r'<\|open\|>call tool="(?P<name>[a-zA-Z0-9_-]{1,64})" index="(0|[1-9][0-9]*)"<\|sep\|>'
                       r'<\|open\|>json type="object"<\|sep\|>')

    def head(self, name: str, index: int) -> str:
        return f'<|open|>call tool="{name}" index="{index + 1}"<|sep|><|open|>json type="object"<|sep|>'

    def head_ir(self, name: str) -> ir.Node:
        return ir.seq(self.literal(f'<|open|>call tool="{name}" index="'), call_index(),
                      self.literal('"<|sep|><|open|>json type="object"<|sep|>'))
