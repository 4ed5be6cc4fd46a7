"""Muse Spark's XML calls: `<atem:function_calls>` around `<atem:invoke name="NAME">` elements, one
`<atem:parameter name="KEY">VALUE</atem:parameter>` per argument.

mlx-lm's `muse_spark` parser reads a value as JSON when it decodes and as stripped text otherwise, so
every value is written as JSON (a string as a JSON string): then the parser reads back exactly the
value written, whatever the parameter's schema.
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
    read_json,
    without_literals,
)
from stdsl.compiler.tools.formats.raw_values import check_key

_PARAMETER_CLOSE = "</atem:parameter>"
_INVOKE_CLOSE = "</atem:invoke>"
_INVOKE = re.compile(r'<atem:invoke name="([A-Za-z0-9_-]{1,64})">\n')
_PARAMETER = re.compile(r'<atem:parameter name="([A-Za-z_][A-Za-z0-9_]*)">')


class MuseSparkFormat(InputParameterCustomCalls, ToolFormat):
    """`<atem:function_calls>\\n<atem:invoke name="NAME">\\n<atem:parameter name="K">JSON</atem:parameter>\\n...
    </atem:invoke>\\n</atem:function_calls>`; parameters in schema order, the required ones present."""

    name = "muse_spark"
    triggers = ("<atem:function_calls>",)
    section_open = "<atem:function_calls>\n"
    separator = "\n"
    section_close = "\n</atem:function_calls>"
    template_marks = ("<atem:function_calls>", "<atem:invoke")
    body_excludes = (_PARAMETER_CLOSE,)

    def _parameter(self, key: str, value: ir.Node) -> ir.Node:
        return ir.seq(self.literal(f'<atem:parameter name="{key}">'), without_literals(value, self.body_excludes),
                      self.literal(f"{_PARAMETER_CLOSE}\n"))

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        properties, required = properties_of(tool)
        where = parameters_path(tool)
        parts: list[ir.Node] = [self.literal(f'<atem:invoke name="{tool.name}">\n')]
        for key, schema in properties.items():
            path = f"{where}/properties/{key}"
            check_key(key, path, self.name)
            parameter = self._parameter(key, arguments_ir(schema, path, self.spacing))
            parts.append(parameter if key in required else ir.optional(parameter))
        parts.append(self.literal(_INVOKE_CLOSE))
        return ir.seq(*parts)

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """The raw input as the JSON string of the one parameter `input`."""
        from stdsl.compiler.json_schema.scalars.escaped_automaton import json_string_of

        value = json_string_of(text.transitions, text.accepting)
        return ir.seq(self.literal(f'<atem:invoke name="{tool.name}">\n'), self._parameter(CUSTOM_PARAMETER, value),
                      self.literal(_INVOKE_CLOSE))

    def render(self, name: str, arguments: str, index: int = 0) -> str:
        values = json_object_arguments(name, arguments)
        shown = "".join(f'<atem:parameter name="{key}">{json.dumps(value, ensure_ascii=False)}{_PARAMETER_CLOSE}\n'
                        for key, value in values.items())
        return f'<atem:invoke name="{name}">\n{shown}{_INVOKE_CLOSE}'

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        if not reply.startswith(self.section_open, start):
            return calls
        position = start + len(self.section_open)
        while (head := _INVOKE.match(reply, position)) is not None:
            values: dict[str, Any] = {}
            cursor = head.end()
            while (key := _PARAMETER.match(reply, cursor)) is not None:
                value = read_json(reply, key.end())
                if value is None or not reply.startswith(f"{_PARAMETER_CLOSE}\n", value[1]):
                    return calls
                values[key.group(1)] = value[0]
                cursor = value[1] + len(_PARAMETER_CLOSE) + 1
            if not reply.startswith(_INVOKE_CLOSE, cursor):
                return calls
            end = cursor + len(_INVOKE_CLOSE)
            calls.append(ParsedCall(head.group(1), json.dumps(values, ensure_ascii=False), reply[position:end]))
            position = self.separator_end(reply, end)
            if position < 0:
                return calls
        return calls
