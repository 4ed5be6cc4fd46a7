"""How a tool call is written in a reply: Hermes-style JSON in `<tool_call>` tags, or Qwen's XML form.

Each syntax gives the grammar of one call (arguments typed by the tool's JSON Schema), the tags
free text must not contain, the text of a call (so an assistant turn is re-rendered verbatim),
and the reader that splits a finished reply into its free text and its calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stdsl.compiler import ir
from stdsl.errors import SchemaError, StdslError

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
CALL_SEPARATOR = "\n"


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: its name and the JSON Schema of its arguments (an object)."""

    name: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class ParsedCall:
    """One call read from a reply: the tool name, the arguments as JSON text, and the call's exact text."""

    name: str
    arguments: str
    text: str


ArgumentsIR = Callable[[Mapping[str, Any], str], ir.Node]
"""Lowers a JSON Schema (with its path for errors) to the IR of one JSON value."""


class HermesSyntax:
    """`<tool_call>\\n{"name": "NAME", "arguments": ARGS}\\n</tool_call>` (Hermes, Qwen2.5, the default)."""

    name = "hermes"
    free_literals: tuple[str, ...] = (CALL_OPEN,)

    @staticmethod
    def head(name: str) -> str:
        return f'{CALL_OPEN}\n{{"name": {json.dumps(name)}, "arguments": '

    @staticmethod
    def tail() -> str:
        return f"}}\n{CALL_CLOSE}"

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        """One call of `tool`; the arguments are a JSON value of its `parameters` schema."""
        arguments = arguments_ir(tool.parameters, f"tools[{tool.name}].function.parameters")
        return ir.seq(ir.literal(self.head(tool.name)), arguments, ir.literal(self.tail()))

    def render(self, name: str, arguments: str) -> str:
        """The text of a call, as the model writes it under `call_ir`."""
        return self.head(name) + arguments + self.tail()

    def parse(self, reply: str, tools: Mapping[str, Mapping[str, Any]]) -> tuple[str, list[ParsedCall]]:
        """The free text before the first call and every complete call (a cut last call is dropped)."""
        start = reply.find(CALL_OPEN)
        content = reply if start < 0 else reply[:start]
        calls: list[ParsedCall] = []
        tail = "\n" + CALL_CLOSE
        while start >= 0 and reply.startswith(CALL_OPEN + "\n", start):
            try:
                call, end = _DECODER.raw_decode(reply, start + len(CALL_OPEN) + 1)
                name, arguments = str(call["name"]), json.dumps(call["arguments"])
            except (ValueError, KeyError, TypeError):
                break
            if not reply.startswith(tail, end):
                break
            text = reply[start: end + len(tail)]
            head = self.head(name)
            if text.startswith(head) and text.endswith(self.tail()):
                arguments = text[len(head): -len(self.tail())]
            calls.append(ParsedCall(name, arguments, text))
            start = reply.find(CALL_OPEN, end + len(tail))
        return content, calls


_DECODER = json.JSONDecoder()
_FUNCTION_HEAD = re.compile(r"<tool_call>\n<function=([^>\n]*)>\n")
_PARAMETER_HEAD = re.compile(r"<parameter=([^>\n]*)>\n")
_FUNCTION_TAIL = f"</function>\n{CALL_CLOSE}"


class QwenXmlSyntax:
    """`<tool_call>\\n<function=NAME>\\n<parameter=P>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>`.

    A string parameter's value is raw text (no `</parameter>` in it); any other value is JSON.
    """

    name = "qwen_xml"
    free_literals: tuple[str, ...] = (CALL_OPEN, "<function=")

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        """One call of `tool`: its parameters in schema order, required ones present, values typed."""
        from stdsl.server.not_containing import not_containing

        where = f"tools[{tool.name}].function.parameters"
        properties = tool.parameters.get("properties", {})
        if not isinstance(properties, Mapping):
            raise SchemaError("properties must be an object", f"{where}/properties")
        required = set(tool.parameters.get("required", ()))
        parts: list[ir.Node] = [ir.literal(f"{CALL_OPEN}\n<function={tool.name}>\n")]
        for key, schema in properties.items():
            path = f"{where}/properties/{key}"
            if _is_plain_string(schema):
                value = not_containing(["</parameter>"])
            elif isinstance(schema, Mapping) and schema.get("type") == "string" and "enum" in schema:
                value = ir.alt(*(ir.literal(str(v)) for v in schema["enum"]))
            elif isinstance(schema, Mapping) and schema.get("type") == "string":
                extra = sorted(set(schema) - {"type", "description", "title", "enum", "default"})
                raise SchemaError(f"the XML call syntax writes strings raw and cannot enforce {extra[0]!r}", path)
            else:
                value = arguments_ir(schema, path)
            parameter = ir.seq(ir.literal(f"<parameter={key}>\n"), value, ir.literal("\n</parameter>\n"))
            parts.append(parameter if key in required else ir.optional(parameter))
        parts.append(ir.literal(f"</function>\n{CALL_CLOSE}"))
        return ir.seq(*parts)

    def render(self, name: str, arguments: str) -> str:
        """The text of a call from its JSON arguments (strings raw, other values as compact JSON)."""
        try:
            values = json.loads(arguments) if arguments else {}
        except ValueError:
            values = None
        if not isinstance(values, dict):
            raise StdslError(f"the arguments of a {name!r} tool call are not a JSON object: {arguments[:80]!r}")
        lines = [f"{CALL_OPEN}\n<function={name}>\n"]
        for key, value in values.items():
            shown = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            lines.append(f"<parameter={key}>\n{shown}\n</parameter>\n")
        lines.append(f"</function>\n{CALL_CLOSE}")
        return "".join(lines)

    def parse(self, reply: str, tools: Mapping[str, Mapping[str, Any]]) -> tuple[str, list[ParsedCall]]:
        """The free text before the first call and every complete call; string parameters stay raw text."""
        start = reply.find(CALL_OPEN)
        content = reply if start < 0 else reply[:start]
        calls: list[ParsedCall] = []
        while start >= 0:
            call = _read_xml_call(reply, start, tools)
            if call is None:
                break
            calls.append(call)
            start = reply.find(CALL_OPEN, start + len(call.text))
        return content, calls


def _read_xml_call(reply: str, start: int, tools: Mapping[str, Mapping[str, Any]]) -> ParsedCall | None:
    """The complete call at `start`, read in the grammar's order (a value ends at the first `</parameter>`,
    which it cannot contain), or None when the call is cut or malformed."""
    head = _FUNCTION_HEAD.match(reply, start)
    if head is None:
        return None
    name, position = head.group(1), head.end()
    properties = tools.get(name, {}).get("properties", {})
    values: dict[str, Any] = {}
    while True:
        if reply.startswith(_FUNCTION_TAIL, position):
            end = position + len(_FUNCTION_TAIL)
            return ParsedCall(name, json.dumps(values), reply[start:end])
        key = _PARAMETER_HEAD.match(reply, position)
        if key is None:
            return None
        close = reply.find("</parameter>\n", key.end())
        if close < 0 or reply[close - 1] != "\n":
            return None
        raw = reply[key.end(): close - 1]
        values[key.group(1)] = raw if _is_string(properties.get(key.group(1))) else _json_or_text(raw)
        position = close + len("</parameter>\n")


def _is_plain_string(schema: Any) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "string" and set(schema) <= {
        "type", "description", "title", "default"}


def _is_string(schema: Any) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "string"


def _json_or_text(text: str) -> Any:
    """A non-string parameter's value (JSON by the grammar); raw text if a caller wrote something else."""
    try:
        return json.loads(text)
    except ValueError:
        return text


CallSyntax = HermesSyntax | QwenXmlSyntax
SYNTAXES: dict[str, CallSyntax] = {"hermes": HermesSyntax(), "qwen_xml": QwenXmlSyntax()}


def syntax_of_template(template: str | None) -> CallSyntax:
    """Qwen's XML form when the chat template writes `<function=`, else Hermes-style JSON calls."""
    return SYNTAXES["qwen_xml"] if template and "<function=" in template else SYNTAXES["hermes"]

