"""Pythonic calls (LiquidAI's LFM2 and LFM2.5, read by mlx-lm's `pythonic` parser):
`<|tool_call_start|>[NAME(KEY=VALUE, ...), ...]<|tool_call_end|>`.

The parser reads the list with `ast` and each argument with `ast.literal_eval`, taking the names `true`, `false`
and `null` as JSON's constants (templates render nested values as JSON).  So a value here is a JSON text that
Python reads as the same value: no `\\/` escape (Python keeps the backslash) and no `\\uD800`-`\\uDFFF` escape
(Python reads a surrogate pair as two lone surrogates); every string keeps a spelling without them (the character
itself).  A plain boolean or null argument may also be Python's `True`, `False`, `None`.  Tool and parameter names
are Python identifiers that are not keywords, as a call must be to parse.
"""

from __future__ import annotations

import ast
import json
import keyword
import re
from collections.abc import Mapping
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.scalars.escaped_automaton import json_string_of
from stdsl.compiler.tools.formats.base import (
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
from stdsl.compiler.tools.formats.raw_values import intersection
from stdsl.errors import SchemaError

CALL_START, CALL_END = "<|tool_call_start|>", "<|tool_call_end|>"
PYTHON_CONSTANTS = {"True": True, "False": False, "None": None}
_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PARAMETER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLAIN = {"type", "description", "title", "default", "examples"}


def _any_byte_but(*excluded: str) -> ir.Node:
    codes = sorted(ord(c) for c in excluded)
    ranges, low = [], 0
    for code in codes:
        if low < code:
            ranges.append((low, code - 1))
        low = code + 1
    ranges.append((low, 0xFF))
    return ir.byte_set(ranges)


def python_reads_alike() -> ir.Node:
    """JSON texts whose strings hold no `\\/` and no surrogate `\\u` escape: where Python reads them as JSON does."""
    any_byte = _any_byte_but()
    escape = ir.seq(ir.literal("\\"), ir.alt(
        _any_byte_but("/", "u"),
        ir.seq(ir.literal("u"), _any_byte_but("d", "D"), any_byte, any_byte, any_byte),
        ir.seq(ir.literal("u"), ir.byte_set([(ord("d"), ord("d")), (ord("D"), ord("D"))]),
               ir.byte_set([(ord("0"), ord("7"))]), any_byte, any_byte)))
    string = ir.seq(ir.literal('"'), ir.star(ir.alt(_any_byte_but('"', "\\"), escape)), ir.literal('"'))
    outside = ir.star(_any_byte_but('"'))
    return ir.seq(outside, ir.star(ir.seq(string, outside)))


def _guarded(node: ir.Node) -> ir.Node:
    """`node`'s texts that Python reads as JSON does (a recursive value's bodies each guarded: they meet outside
    strings, where the guard is back at its start)."""
    if isinstance(node, ir.EmbeddedGrammar):
        from stdsl.compiler.pushdown.embedding import guarded

        return guarded(node, build_automaton(python_reads_alike()))
    return intersection(node, python_reads_alike())


def _check_name(name: str, pattern: re.Pattern[str], what: str, path: str) -> None:
    if not pattern.match(name) or any(keyword.iskeyword(part) for part in name.split(".")):
        raise SchemaError(f"the pythonic call syntax writes {what} as a Python identifier; {name!r} is not one (or "
                          "is a keyword)", path)


def _allows(schema: Mapping[str, Any], constant: bool | None) -> bool:
    """Whether a plain boolean or null schema allows `constant`."""
    return schema.get("type") == ("null" if constant is None else "boolean") and set(schema) <= _PLAIN


def _joined(items: list[tuple[ir.Node, bool]]) -> ir.Node:
    """The present items in order joined by `, ` (each required one present)."""
    def after(start: int) -> ir.Node:
        return ir.seq(*(ir.seq(ir.literal(", "), node) if required else ir.optional(ir.seq(ir.literal(", "), node))
                        for node, required in items[start:]))

    choices: list[ir.Node] = []
    for i, (node, required) in enumerate(items):
        choices.append(ir.seq(node, after(i + 1)))
        if required:
            return ir.alt(*choices)
    return ir.alt(ir.EMPTY, *choices)


class PythonicFormat(InputParameterCustomCalls, ToolFormat):
    """`<|tool_call_start|>[NAME(KEY=VALUE, ...), ...]<|tool_call_end|>`; parameters in schema order, the required
    ones present, joined by `, ` as LFM2 writes them."""

    name = "pythonic"
    triggers = (CALL_START,)
    section_open = f"{CALL_START}["
    separator = ", "
    section_close = f"]{CALL_END}"
    template_marks = ("<|tool_call_start|>",)
    body_excludes = (CALL_END,)
    markers = (CALL_START, CALL_END)

    def recognises(self, template: str) -> bool:
        """As mlx-lm picks its parser: the template names the tool list or the call tokens."""
        return "<|tool_list_start|>" in template or CALL_START in template

    def value_ir(self, schema: Any, path: str, arguments_ir: ArgumentsIR) -> ir.Node:
        """An argument's value: JSON that Python reads alike, or Python's name of a plain boolean or null."""
        value = _guarded(without_literals(arguments_ir(schema, path, self.spacing), self.body_excludes))
        if not isinstance(schema, Mapping):
            return value
        names = [text for text, constant in PYTHON_CONSTANTS.items() if _allows(schema, constant)]
        return ir.alt(value, *(ir.literal(text) for text in names))

    def call_ir(self, tool: ToolSpec, arguments_ir: ArgumentsIR) -> ir.Node:
        properties, required = properties_of(tool)
        where = parameters_path(tool)
        _check_name(tool.name, _TOOL_NAME, "a tool name", where)
        items: list[tuple[ir.Node, bool]] = []
        for key, schema in properties.items():
            path = f"{where}/properties/{key}"
            _check_name(key, _PARAMETER, "a parameter name", path)
            items.append((ir.seq(ir.literal(f"{key}="), self.value_ir(schema, path, arguments_ir)), key in required))
        return ir.seq(ir.literal(f"{tool.name}("), _joined(items), ir.literal(")"))

    def custom_call_ir(self, tool: ToolSpec, text: Automaton) -> ir.Node:
        """The raw input as the one string argument `input`, a JSON string whose only escapes (`\\"`, `\\\\`,
        control characters) Python reads alike."""
        _check_name(tool.name, _TOOL_NAME, "a tool name", parameters_path(tool))
        value = without_literals(json_string_of(text.transitions, text.accepting), self.body_excludes)
        return ir.seq(ir.literal(f"{tool.name}(input="), value, ir.literal(")"))

    def recursive_custom_call_ir(self, tool: ToolSpec, grammar: ir.EmbeddedGrammar) -> ir.Node:
        """A recursive input as that JSON string, each grammar body escaped alike."""
        from stdsl.compiler.pushdown.embedding import json_string_leaf

        _check_name(tool.name, _TOOL_NAME, "a tool name", parameters_path(tool))
        value = without_literals(json_string_leaf(grammar), self.body_excludes)
        return ir.seq(ir.literal(f"{tool.name}(input="), value, ir.literal(")"))

    def render(self, name: str, arguments: str, index: int = 0) -> str:
        values = json_object_arguments(name, arguments)
        shown = [f"{key}={value!r}" if value is None or isinstance(value, bool) else
                 f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in values.items()]
        return f"{name}({', '.join(shown)})"

    def read_calls(self, reply: str, start: int, tools: Tools) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        if not reply.startswith(self.section_open, start):
            return calls
        position = start + len(self.section_open)
        while (end := _call_end(reply, position)) >= 0:
            call = _read_call(reply[position:end])
            if call is None:
                break
            calls.append(ParsedCall(call[0], json.dumps(call[1], ensure_ascii=False), reply[position:end]))
            if not reply.startswith(self.separator, end):
                break
            position = end + len(self.separator)
        return calls


def _call_end(reply: str, position: int) -> int:
    """Where the call at `position` ends (past its closing parenthesis), or -1 when it is cut: brackets are counted
    outside quoted strings."""
    depth, quote, i = 0, "", position
    while i < len(reply):
        c = reply[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1 if c == ")" else -1
        i += 1
    return -1


def _read_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """A call's name and arguments: each argument read as JSON, or as Python's name of a constant."""
    try:
        call = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call) or call.args:
        return None
    arguments: dict[str, Any] = {}
    for argument in call.keywords:
        source = ast.get_source_segment(text, argument.value)
        if argument.arg is None or source is None:
            return None
        try:
            arguments[argument.arg] = PYTHON_CONSTANTS[source] if source in PYTHON_CONSTANTS else json.loads(source)
        except ValueError:
            return None
    return ast.unparse(call.func), arguments
