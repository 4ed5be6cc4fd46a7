"""MiniMax M2's calls: `<minimax:tool_call>` around `<invoke name="NAME">` elements, one
`<parameter name="KEY">VALUE</parameter>` per argument.

mlx-lm's `minimax_m2` parser converts a value by its schema's type (a string raw and stripped, a number
through `float`, an object or array as JSON), so, as in Qwen3-Coder's format, a string is raw text
with no whitespace at either end and not `null`, a number within ±2^53, anything else JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.not_containing import not_containing
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
    without_literals,
)
from stdsl.compiler.tools.formats.raw_values import (
    check_key,
    intersection,
    is_string_schema,
    not_word,
    raw_string_ir,
    read_as_double,
    unstripped,
)
from stdsl.errors import SchemaError

TYPES = ("string", "integer", "number", "boolean", "object", "array")
_INVOKE = re.compile(r'<invoke name="([A-Za-z0-9_-]{1,64})">\n')
_PARAMETER = re.compile(r'<parameter name="([A-Za-z_][A-Za-z0-9_]*)">')


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class MiniMaxM2Format(InputParameterCustomCalls, ToolFormat):
    """`<minimax:tool_call>\\n<invoke name="NAME">\\n<parameter name="K">V</parameter>\\n...</invoke>\\n
    </minimax:tool_call>`; parameters in schema order, the required ones present."""

    name = "minimax_m2"
    triggers = ("<minimax:tool_call>",)
    section_open = "<minimax:tool_call>\n"
    separator = "\n"
    section_close = "\n</minimax:tool_call>"
    template_marks = ("<minimax:tool_call>",)
    markers = ("<minimax:tool_call>", "</minimax:tool_call>")
    _STOPS = ("</parameter>", "</invoke>", "</minimax:tool_call>")

    def value_ir(self, schema: Any, path: str, arguments_ir: ArgumentsIR) -> ir.Node:
        """A parameter's value as the parser converts it by the schema's single `type`."""
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind not in TYPES:
            raise SchemaError(f"the {self.name} parser converts a parameter by its schema's type; give it one type "
                              f"of {', '.join(TYPES)}", path)
        if kind == "string":
            return intersection(raw_string_ir(schema, path, self._STOPS, self.name), unstripped(), not_word("null"))
        if kind == "number":
            schema = read_as_double(schema, path, self.name)
        return without_literals(arguments_ir(schema, path, self.spacing), self._STOPS)

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        properties, required = properties_of(tool)
        where = parameters_path(tool)
        parts: list[ir.Node] = [self.literal(f'<invoke name="{tool.name}">\n')]
        for key, schema in properties.items():
            path = f"{where}/properties/{key}"
            check_key(key, path, self.name)
            parameter = ir.seq(self.literal(f'<parameter name="{key}">'), self.value_ir(schema, path, arguments_ir),
                               self.literal("</parameter>\n"))
            parts.append(parameter if key in required else ir.optional(parameter))
        parts.append(self.literal("</invoke>"))
        return ir.seq(*parts)

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """The raw input as the one string parameter `input` (no edge whitespace, not `null`)."""
        raw = intersection(ir.Embedded(text.transitions, text.accepting), not_containing(list(self._STOPS)),
                           unstripped(), not_word("null"))
        return ir.seq(self.literal(f'<invoke name="{tool.name}">\n<parameter name="{CUSTOM_PARAMETER}">'), raw,
                      self.literal("</parameter>\n</invoke>"))

    def render(self, name: str, arguments: str, index: int = 0) -> str:
        values = json_object_arguments(name, arguments)
        shown = "".join(f'<parameter name="{key}">'
                        f"{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}</parameter>\n"
                        for key, value in values.items())
        return f'<invoke name="{name}">\n{shown}</invoke>'

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        if not reply.startswith(self.section_open, start):
            return calls
        position = start + len(self.section_open)
        while (head := _INVOKE.match(reply, position)) is not None:
            properties = tools.get(head.group(1), {}).get("properties", {})
            values: dict[str, Any] = {}
            cursor = head.end()
            while (key := _PARAMETER.match(reply, cursor)) is not None:
                close = reply.find("</parameter>\n", key.end())
                if close < 0:
                    return calls
                raw = reply[key.end(): close]
                values[key.group(1)] = raw if is_string_schema(properties.get(key.group(1))) else _json_or_text(raw)
                cursor = close + len("</parameter>\n")
            if not reply.startswith("</invoke>", cursor):
                return calls
            end = cursor + len("</invoke>")
            calls.append(ParsedCall(head.group(1), json.dumps(values, ensure_ascii=False), reply[position:end]))
            position = self.separator_end(reply, end)
            if position < 0:
                return calls
        return calls
