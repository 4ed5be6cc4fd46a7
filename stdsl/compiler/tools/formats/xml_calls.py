"""Formats that write each parameter apart in XML-like tags: Qwen3-Coder's `<function=...>`, GLM 4.x and LongCat's
`<arg_key>`.

A string parameter (schema `type` "string") is raw text, any other value is JSON, as each
family's parser reads them; no value contains the tag that ends it or the call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
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
    value_kinds,
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

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
QWEN_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")
CONTAINERS_AND_NULL = frozenset({"object", "array", "null"})
PYTHON_CONSTANTS = {"True": True, "False": False, "None": None}
"""How Qwen3-Coder's template writes a boolean or null parameter (`args_value | string` of the Python value); its
parser reads `True`/`False` by letter case and `None` through `ast.literal_eval`, so they round-trip as JSON's do."""


def _json_or_text(text: str) -> Any:
    """A non-string value (JSON by the grammar); raw text if a caller wrote something else."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _allows(schema: Mapping[str, Any], kind: str, constant: bool | None) -> bool:
    """Whether a `boolean` or `null` parameter schema allows `constant` (its type, `const` and `enum`)."""
    if (constant is None) != (kind == "null"):
        return False
    if "const" in schema and schema["const"] is not constant:
        return False
    return "enum" not in schema or any(value is constant for value in schema["enum"])


def _qwen_value(raw: str, schema: Any) -> Any:
    """A parameter's value as Qwen3-Coder's parser converts it by the schema's type: a string raw, a boolean or
    null also in the template's Python spelling, the rest JSON."""
    if is_string_schema(schema):
        return raw
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if kind in ("boolean", "null") and raw in PYTHON_CONSTANTS:
        return PYTHON_CONSTANTS[raw]
    return _json_or_text(raw)


def _union_of_containers(schema: Any, key: str, tool: ToolSpec) -> bool:
    """Whether a parameter without a `type` is an `anyOf` whose values are objects, arrays or null (Pydantic's
    `Optional[Model]`, `list[str] | None`, a union of models): every Qwen3-Coder parser reads it as JSON (vLLM's
    takes an `anyOf` for an object, mlx-lm's reads an untyped value that is an object or array as JSON, and both
    read `null` as None), so it is written as JSON.  Scalars there would be read apart (mlx-lm's keeps them text)."""
    return (isinstance(schema, Mapping) and "type" not in schema and isinstance(schema.get("anyOf"), list)
            and value_kinds(schema, key, tool) <= CONTAINERS_AND_NULL)


def _union_hint(schema: Any) -> str:
    """Why an untyped `anyOf` parameter is refused (`_union_of_containers` takes only objects, arrays and null)."""
    if isinstance(schema, Mapping) and "type" not in schema and "anyOf" in schema:
        return (" (an anyOf of objects, arrays and null is written as JSON, but a string, number or boolean there "
                "is read as text by one Qwen3-Coder parser and as JSON by another)")
    return ""


class QwenXmlFormat(InputParameterCustomCalls, ToolFormat):
    """`<tool_call>\\n<function=NAME>\\n<parameter=P>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>`
    (Qwen3-Coder, Qwen3.5).  Parameters in schema order, the required ones present."""

    name = "qwen_xml"
    triggers = (CALL_OPEN, "<function=")
    template_marks = ("<function=", "<parameter=")
    markers = (CALL_OPEN, CALL_CLOSE)
    _FUNCTION_HEAD = re.compile(r"<tool_call>\n<function=([A-Za-z0-9_-]{1,64})>\n")
    _PARAMETER_HEAD = re.compile(r"<parameter=([A-Za-z_][A-Za-z0-9_]*)>\n")
    _TAIL = f"</function>\n{CALL_CLOSE}"
    _STOPS = ("</parameter>", CALL_CLOSE)
    separator_spellings = ("\n\n",)

    def value_ir(self, schema: Any, path: str, arguments_ir: ArgumentsIR) -> ir.Node:
        """A parameter's value as Qwen3-Coder's parser converts it, by the schema's single `type` (a number through
        `float`, so within ±2^53 where every integer reads back exactly; a boolean or null also as Python's `True`,
        `False`, `None`, as Qwen3-Coder's template writes them)."""
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind not in QWEN_TYPES:
            raise SchemaError(f"the {self.name} call syntax converts a parameter by its schema's type; give it one "
                              f"type of {', '.join(QWEN_TYPES)}{typing_hint(schema)}{_union_hint(schema)}", path)
        if kind == "string":
            return intersection(raw_string_ir(schema, path, self._STOPS, self.name), not_word("null"))
        if kind in ("integer", "number"):
            schema = read_as_double(schema, path, self.name)
        value = without_literals(arguments_ir(schema, path, self.spacing), self._STOPS)
        if kind in ("boolean", "null"):
            spellings = [text for text, constant in PYTHON_CONSTANTS.items() if _allows(schema, kind, constant)]
            return ir.alt(value, *(ir.literal(text) for text in spellings))
        return value

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        properties, required = properties_of(tool)
        where = parameters_path(tool)
        parts: list[ir.Node] = [self.literal(f"{CALL_OPEN}\n<function={tool.name}>\n")]
        for key, schema in properties.items():
            path = f"{where}/properties/{key}"
            check_key(key, path, self.name)
            if _union_of_containers(schema, key, tool):
                value = without_literals(arguments_ir(schema, path, self.spacing), self._STOPS)
            else:
                value = self.value_ir(schema, path, arguments_ir)
            parameter = ir.seq(self.literal(f"<parameter={key}>\n"), value, self.literal("\n</parameter>\n"))
            parts.append(parameter if key in required else ir.optional(parameter))
        parts.append(self.literal(self._TAIL))
        return ir.seq(*parts)

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """The raw input as the one string parameter `input` (the parser reads a parameter it has no type for raw)."""
        raw = intersection(ir.Embedded(text.transitions, text.accepting), not_containing(list(self._STOPS)),
                           not_word("null"))
        return ir.seq(self.literal(f"{CALL_OPEN}\n<function={tool.name}>\n<parameter={CUSTOM_PARAMETER}>\n"), raw,
                      self.literal(f"\n</parameter>\n{self._TAIL}"))

    def render(self, name: str, arguments: str, index: int = 0) -> str:
        values = json_object_arguments(name, arguments)
        lines = [f"{CALL_OPEN}\n<function={name}>\n"]
        for key, value in values.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"<parameter={key}>\n{shown}\n</parameter>\n")
        lines.append(self._TAIL)
        return "".join(lines)

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        while start >= 0:
            call = self._read_call(reply, start, tools)
            if call is None:
                break
            calls.append(call)
            end = self.separator_end(reply, start + len(call.text))
            start = end if end >= 0 and reply.startswith(CALL_OPEN, end) else -1
        return calls

    def _read_call(self, reply: str, start: int, tools: Tools) -> ParsedCall | None:
        """The complete call at `start`, read in the grammar's order, or None when it is cut or malformed."""
        head = self._FUNCTION_HEAD.match(reply, start)
        if head is None:
            return None
        name, position = head.group(1), head.end()
        properties = tools.get(name, {}).get("properties", {})
        values: dict[str, Any] = {}
        while True:
            if reply.startswith(self._TAIL, position):
                end = position + len(self._TAIL)
                return ParsedCall(name, json.dumps(values), reply[start:end])
            key = self._PARAMETER_HEAD.match(reply, position)
            if key is None:
                return None
            close = reply.find("\n</parameter>\n", key.end() - 1)
            if close < 0:
                return None
            values[key.group(1)] = _qwen_value(reply[key.end(): close], properties.get(key.group(1)))
            position = close + len("\n</parameter>\n")


class GlmFormat(ToolFormat):
    """GLM 4.5/4.6: `<tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>\\n...</tool_call>`; GLM 4.7
    (`glm47`) writes no newlines, LongCat (`longcat`) the same tags prefixed `longcat_`.  A raw string has no
    whitespace at either end (the parser strips it)."""

    name = "glm4"
    newline = "\n"
    prefix = ""
    """What the family writes before each tag name (`<{prefix}tool_call>`)."""
    triggers: tuple[str, ...] = (CALL_OPEN,)
    template_marks: tuple[str, ...] = ("<arg_key>",)
    markers: tuple[str, ...] = (CALL_OPEN, CALL_CLOSE, "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
    needs_an_argument = False
    """Whether the family's parser reads a call only when it has an argument (LongCat's finds the name before one)."""

    def tag(self, name: str, closing: bool = False) -> str:
        return f"<{'/' if closing else ''}{self.prefix}{name}>"

    @property
    def _stops(self) -> tuple[str, str]:
        return self.tag("arg_value", True), self.tag("tool_call", True)

    def _pair_head(self, key: str) -> str:
        return f"{self.tag('arg_key')}{key}{self.tag('arg_key', True)}{self.newline}{self.tag('arg_value')}"

    def recognises(self, template: str) -> bool:
        """GLM 4.5/4.6 put a newline (in the template, often written `\\n`) between a key and its value."""
        return "<arg_key>" in template and any(f"</arg_key>{nl}<arg_value>" in template for nl in ("\n", "\\n"))

    def value_ir(self, schema: Any, path: str, arguments_ir: ArgumentsIR) -> ir.Node:
        if is_string_schema(schema):
            return intersection(raw_string_ir(schema, path, self._stops, self.name), unstripped())
        return without_literals(arguments_ir(schema, path, self.spacing), self._stops)

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        properties, required = properties_of(tool)
        where = parameters_path(tool)
        pairs: list[tuple[ir.Node, bool]] = []
        for key, schema in properties.items():
            path = f"{where}/properties/{key}"
            check_key(key, path, self.name)
            value = self.value_ir(schema, path, arguments_ir)
            pairs.append((ir.seq(self.literal(self._pair_head(key)), value,
                                 self.literal(f"{self.tag('arg_value', True)}{self.newline}")), key in required))
        if self.needs_an_argument and not pairs:
            raise SchemaError(f"the {self.name} parser reads a call only when it has an argument; give the tool a "
                              "parameter", where)
        body = _some_present(pairs) if self.needs_an_argument and not required else ir.seq(
            *(pair if present else ir.optional(pair) for pair, present in pairs))
        return ir.seq(self.literal(f"{self.tag('tool_call')}{tool.name}{self.newline}"), body,
                      self.literal(self.tag("tool_call", True)))

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """The raw input as a JSON string in the one value `input`: the parser strips a raw value and reads an
        untyped one as JSON, so a JSON string carries any input exactly."""
        from stdsl.compiler.json_schema.scalars.escaped_automaton import json_string_of

        value = without_literals(json_string_of(text.transitions, text.accepting), self._stops)
        return ir.seq(self.literal(f"{self.tag('tool_call')}{tool.name}{self.newline}"
                                   f"{self._pair_head(CUSTOM_PARAMETER)}"), value,
                      self.literal(f"{self.tag('arg_value', True)}{self.newline}{self.tag('tool_call', True)}"))

    def custom_arguments(self, raw: str) -> str:
        return json.dumps({CUSTOM_PARAMETER: json.dumps(raw, ensure_ascii=False)}, ensure_ascii=False)

    def custom_input(self, arguments: str) -> str:
        return super().custom_input(str(json_object_arguments("custom", arguments)[CUSTOM_PARAMETER]))

    def render(self, name: str, arguments: str, index: int = 0) -> str:
        values = json_object_arguments(name, arguments)
        text = [f"{self.tag('tool_call')}{name}{self.newline}"]
        for key, value in values.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            text.append(f"{self._pair_head(key)}{shown}{self.tag('arg_value', True)}{self.newline}")
        text.append(self.tag("tool_call", True))
        return "".join(text)

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        nl, call_open, call_close = re.escape(self.newline), self.tag("tool_call"), self.tag("tool_call", True)
        head = re.compile(re.escape(call_open) + r"([A-Za-z0-9_-]{1,64})" + nl)
        pair = re.compile(re.escape(self.tag("arg_key")) + r"([A-Za-z_][A-Za-z0-9_]*)" +
                          re.escape(self.tag("arg_key", True)) + nl + re.escape(self.tag("arg_value")) + r"(.*?)" +
                          re.escape(self.tag("arg_value", True)) + nl, re.DOTALL)
        calls: list[ParsedCall] = []
        while True:
            match = head.match(reply, start)
            if match is None:
                return calls
            name, position = match.group(1), match.end()
            properties = tools.get(name, {}).get("properties", {})
            values: dict[str, Any] = {}
            while (found := pair.match(reply, position)) is not None:
                key, raw = found.group(1), found.group(2)
                values[key] = raw if is_string_schema(properties.get(key)) else _json_or_text(raw)
                position = found.end()
            if not reply.startswith(call_close, position):
                return calls
            end = position + len(call_close)
            calls.append(ParsedCall(name, json.dumps(values), reply[start:end]))
            if not reply.startswith("\n" + call_open, end):
                return calls
            start = end + 1


def _some_present(pairs: list[tuple[ir.Node, bool]]) -> ir.Node:
    """Optional entries in order with at least one present: the first present one, then any of those after it."""
    return ir.alt(*(ir.seq(pair, *(ir.optional(later) for later, _ in pairs[i + 1:]))
                    for i, (pair, _) in enumerate(pairs)))


class Glm47Format(GlmFormat):
    """GLM 4.7: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`."""

    name = "glm47"
    newline = ""

    def recognises(self, template: str) -> bool:
        return "<arg_key>" in template


class LongcatFormat(GlmFormat):
    """LongCat: `<longcat_tool_call>NAME\\n<longcat_arg_key>K</longcat_arg_key>\\n<longcat_arg_value>V
    </longcat_arg_value>\\n...</longcat_tool_call>`, at least one argument (mlx-lm's `longcat` parser finds the name
    before the first key)."""

    name = "longcat"
    prefix = "longcat_"
    triggers = ("<longcat_tool_call>",)
    template_marks = ("<longcat_tool_call>",)
    markers = ("<longcat_tool_call>", "</longcat_tool_call>", "<longcat_arg_key>", "</longcat_arg_key>",
               "<longcat_arg_value>", "</longcat_arg_value>")
    needs_an_argument = True

    def recognises(self, template: str) -> bool:
        return ToolFormat.recognises(self, template)

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """The raw input as the one string parameter `input`, which the parser reads raw (and stripped)."""
        raw = intersection(ir.Embedded(text.transitions, text.accepting), not_containing(list(self._stops)),
                           unstripped())
        return ir.seq(self.literal(f"{self.tag('tool_call')}{tool.name}{self.newline}"
                                   f"{self._pair_head(CUSTOM_PARAMETER)}"), raw,
                      self.literal(f"{self.tag('arg_value', True)}{self.newline}{self.tag('tool_call', True)}"))

    def custom_arguments(self, raw: str) -> str:
        return json.dumps({CUSTOM_PARAMETER: raw}, ensure_ascii=False)

    def custom_input(self, arguments: str) -> str:
        return str(json_object_arguments("custom", arguments)[CUSTOM_PARAMETER])
