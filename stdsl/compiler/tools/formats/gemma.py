"""Gemma function calls: FunctionGemma's `<start_function_call>call:NAME{k:<escape>text<escape>,n:1}<end_function_call>`
and Gemma 4's `<|tool_call>call:NAME{k:<|"|>text<|"|>,n:1}<tool_call|>`.

Keys are bare identifiers, strings sit between the family's string delimiters, other values are
JSON scalars.  Both parsers read nested values with rules that JSON text can break (a brace ends
FunctionGemma's call; Gemma 4 re-quotes `,word:` inside nested strings), so object and array
parameters are refused rather than written in a form the parser could misread.
"""

from __future__ import annotations

import json
import re
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.tools.formats.base import (
    CUSTOM_PARAMETER,
    ArgumentsIR,
    InputParameterCustomCalls,
    ParsedCall,
    ToolFormat,
    Tools,
    ToolSpec,
    json_object_arguments,
    parameters_path,
    properties_of,
)
from stdsl.compiler.tools.formats.raw_values import check_key, intersection, raw_string_ir, typing_hint
from stdsl.errors import SchemaError

SCALAR_TYPES = ("integer", "number", "boolean", "null")


class FunctionGemmaFormat(InputParameterCustomCalls, ToolFormat):
    """FunctionGemma: `<start_function_call>call:NAME{key:<escape>text<escape>,n:1}<end_function_call>`."""

    name = "function_gemma"
    open_tag, close_tag = "<start_function_call>", "<end_function_call>"
    triggers: tuple[str, ...] = (open_tag,)
    quote = "<escape>"
    separator = ""
    excluded = "}"
    name_pattern = r"[A-Za-z0-9_]{1,64}"
    template_marks: tuple[str, ...] = ("<start_function_call>",)
    markers: tuple[str, ...] = (open_tag, close_tag, quote)

    def value_ir(self, schema: Any, path: str, arguments_ir: ArgumentsIR) -> ir.Node:
        """A string between the quote delimiters; any other value a JSON scalar."""
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind == "string":
            text = raw_string_ir(schema, path, (self.quote, self.close_tag), self.name, self.excluded)
            return ir.seq(self.literal(self.quote), text, self.literal(self.quote))
        if kind not in SCALAR_TYPES:
            raise SchemaError(f"the {self.name} call syntax writes only strings, numbers, booleans and null exactly; "
                              f"give the parameter one of those types{typing_hint(schema)}", path)
        return arguments_ir(schema, path)

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        if not re.fullmatch(self.name_pattern, tool.name):
            raise SchemaError(f"the {self.name} call syntax cannot write the tool name {tool.name!r}",
                              parameters_path(tool))
        properties, required = properties_of(tool)
        where = parameters_path(tool)
        entries: list[tuple[ir.Node, bool]] = []
        for key, schema in properties.items():
            path = f"{where}/properties/{key}"
            check_key(key, path, self.name)
            entries.append((ir.seq(self.literal(f"{key}:"), self.value_ir(schema, path, arguments_ir)),
                            key in required))
        return ir.seq(self.literal(f"{self.open_tag}call:{tool.name}{{"), _comma_list(entries),
                      self.literal(f"}}{self.close_tag}"))

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """The raw input as the one string parameter `input`, between the string delimiters."""
        if not re.fullmatch(self.name_pattern, tool.name):
            raise SchemaError(f"the {self.name} call syntax cannot write the tool name {tool.name!r}",
                              f"tools[{tool.name}].custom")
        bounds = raw_string_ir({"type": "string"}, f"tools[{tool.name}].custom", (self.quote, self.close_tag),
                               self.name, self.excluded)
        raw = intersection(ir.Embedded(text.transitions, text.accepting), bounds)
        return ir.seq(self.literal(f"{self.open_tag}call:{tool.name}{{{CUSTOM_PARAMETER}:{self.quote}"), raw,
                      self.literal(f"{self.quote}}}{self.close_tag}"))

    def render(self, name: str, arguments: str, index: int = 0) -> str:
        values = json_object_arguments(name, arguments)
        shown = ",".join(f"{key}:{self.quote}{value}{self.quote}" if isinstance(value, str)
                         else f"{key}:{json.dumps(value)}" for key, value in values.items())
        return f"{self.open_tag}call:{name}{{{shown}}}{self.close_tag}"

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        quote = re.escape(self.quote)
        head = re.compile(re.escape(self.open_tag) + f"call:({self.name_pattern})" + r"\{")
        entry = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?:" + quote + r"(.*?)" + quote + r"|([^,}]*))", re.DOTALL)
        calls: list[ParsedCall] = []
        while (match := head.match(reply, start)) is not None:
            position, values = match.end(), {}
            while (found := entry.match(reply, position)) is not None:
                raw = found.group(2)
                try:
                    values[found.group(1)] = raw if raw is not None else json.loads(found.group(3) or "null")
                except json.JSONDecodeError:  # a value still being written (a string's closing quote to come)
                    return calls
                position = found.end() + (reply[found.end(): found.end() + 1] == ",")
            tail = "}" + self.close_tag
            if not reply.startswith(tail, position):
                return calls
            end = position + len(tail)
            calls.append(ParsedCall(match.group(1), json.dumps(values), reply[start:end]))
            start = end
        return calls


class Gemma4Format(FunctionGemmaFormat):
    """Gemma 4: `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>`."""

    name = "gemma4"
    open_tag, close_tag = "<|tool_call>", "<tool_call|>"
    triggers: tuple[str, ...] = (open_tag,)
    quote = '<|"|>'
    excluded = ""
    name_pattern = r"[A-Za-z0-9_-]{1,64}"
    template_marks = ("<|tool_call>", "<tool_call|>")
    markers = (open_tag, close_tag, quote)


def _comma_list(entries: list[tuple[ir.Node, bool]]) -> ir.Node:
    """Entries in order, the optional ones may be left out, joined by single commas (none leading or trailing)."""
    after: ir.Node = ir.EMPTY
    first: ir.Node = ir.EMPTY
    for node, required in reversed(entries):
        written = ir.seq(node, after)
        first = written if required else ir.alt(written, first)
        comma = ir.seq(ir.literal(","), node)
        after = ir.seq(comma if required else ir.optional(comma), after)
    return first
