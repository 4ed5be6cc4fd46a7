"""MiniMax M2's calls: `<minimax:tool_call>` around `<invoke name="NAME">` elements, one
`<parameter name="KEY">VALUE</parameter>` per argument; MiniCPM5's bare `<function name="NAME">` elements
with `<param name="KEY">VALUE</param>` (read by the same value conversion).

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
    typing_hint,
    unstripped,
)
from stdsl.errors import SchemaError

TYPES = ("string", "integer", "number", "boolean", "object", "array")


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class MiniMaxM2Format(InputParameterCustomCalls, ToolFormat):
    """`<minimax:tool_call>\\n<invoke name="NAME">\\n<parameter name="K">V</parameter>\\n...</invoke>\\n
    </minimax:tool_call>`; parameters in schema order, the required ones present."""

    name = "minimax_m2"
    triggers: tuple[str, ...] = ("<minimax:tool_call>",)
    section_open = "<minimax:tool_call>\n"
    separator = "\n"
    section_close = "\n</minimax:tool_call>"
    template_marks: tuple[str, ...] = ("<minimax:tool_call>",)
    markers: tuple[str, ...] = ("<minimax:tool_call>", "</minimax:tool_call>")
    call_tag, parameter_tag, newline = "invoke", "parameter", "\n"
    _STOPS: tuple[str, ...] = ("</parameter>", "</invoke>", "</minimax:tool_call>")

    def _head(self, name: str) -> str:
        return f'<{self.call_tag} name="{name}">{self.newline}'

    def _parameter_head(self, key: str) -> str:
        return f'<{self.parameter_tag} name="{key}">'

    @property
    def _parameter_tail(self) -> str:
        return f"</{self.parameter_tag}>{self.newline}"

    def value_ir(self, schema: Any, path: str, arguments_ir: ArgumentsIR) -> ir.Node:
        """A parameter's value as the parser converts it by the schema's single `type`."""
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind not in TYPES:
            raise SchemaError(f"the {self.name} parser converts a parameter by its schema's type; give it one type "
                              f"of {', '.join(TYPES)}{typing_hint(schema)}", path)
        if kind == "string":
            return intersection(raw_string_ir(schema, path, self._STOPS, self.name), unstripped(), not_word("null"))
        if kind == "number":
            schema = read_as_double(schema, path, self.name)
        return without_literals(arguments_ir(schema, path, self.spacing), self._STOPS)

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        properties, required = properties_of(tool)
        where = parameters_path(tool)
        parts: list[ir.Node] = [self.literal(self._head(tool.name))]
        for key, schema in properties.items():
            path = f"{where}/properties/{key}"
            check_key(key, path, self.name)
            parameter = ir.seq(self.literal(self._parameter_head(key)), self.value_ir(schema, path, arguments_ir),
                               self.literal(self._parameter_tail))
            parts.append(parameter if key in required else ir.optional(parameter))
        parts.append(self.literal(f"</{self.call_tag}>"))
        return ir.seq(*parts)

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """The raw input as the one string parameter `input` (no edge whitespace, not `null`)."""
        raw = intersection(ir.Embedded(text.transitions, text.accepting), not_containing(list(self._STOPS)),
                           unstripped(), not_word("null"))
        return ir.seq(self.literal(self._head(tool.name) + self._parameter_head(CUSTOM_PARAMETER)), raw,
                      self.literal(f"{self._parameter_tail}</{self.call_tag}>"))

    def render(self, name: str, arguments: str, index: int = 0) -> str:
        values = json_object_arguments(name, arguments)
        shown = "".join(self._parameter_head(key) + (value if isinstance(value, str) else json.dumps(
            value, ensure_ascii=False)) + self._parameter_tail for key, value in values.items())
        return f"{self._head(name)}{shown}</{self.call_tag}>"

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        if not reply.startswith(self.section_open, start):
            return calls
        position = start + len(self.section_open)
        call = re.compile(f'<{self.call_tag} name="([A-Za-z0-9_-]{{1,64}})">{self.newline}')
        parameter = re.compile(f'<{self.parameter_tag} name="([A-Za-z_][A-Za-z0-9_]*)">')
        call_close = f"</{self.call_tag}>"
        while (head := call.match(reply, position)) is not None:
            properties = tools.get(head.group(1), {}).get("properties", {})
            values: dict[str, Any] = {}
            cursor = head.end()
            while (key := parameter.match(reply, cursor)) is not None:
                close = reply.find(self._parameter_tail, key.end())
                if close < 0:
                    return calls
                raw = reply[key.end(): close]
                values[key.group(1)] = raw if is_string_schema(properties.get(key.group(1))) else _json_or_text(raw)
                cursor = close + len(self._parameter_tail)
            if not reply.startswith(call_close, cursor):
                return calls
            end = cursor + len(call_close)
            calls.append(ParsedCall(head.group(1), json.dumps(values, ensure_ascii=False), reply[position:end]))
            position = self.separator_end(reply, end)
            if position < 0:
                return calls
        return calls


class MiniCpm5Format(MiniMaxM2Format):
    """MiniCPM5: `<function name="NAME"><param name="K">V</param>...</function>`, calls back to back with no
    wrapper.  mlx-lm's `minicpm5` parser unwraps a CDATA value, so a raw string never holds `<![CDATA[`."""

    name = "minicpm5"
    triggers = ("<function name=",)
    section_open = ""
    separator = ""
    separator_spellings = ("\n",)
    section_close = ""
    template_marks = ("<function name=", "<param name=")
    markers = ()
    call_tag, parameter_tag, newline = "function", "param", ""
    _STOPS = ("</param>", "</function>", "<![CDATA[")
