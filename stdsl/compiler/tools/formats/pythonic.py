"""Pythonic calls (LiquidAI's LFM2 and LFM2.5, read by mlx-lm's `pythonic` parser):
`<|tool_call_start|>[NAME(KEY=VALUE, ...), ...]<|tool_call_end|>`.

The parser reads the list with `ast` and each argument with `ast.literal_eval`, taking the names `true`, `false`
and `null` as JSON's constants (templates render nested values as JSON).  So a value here is a JSON text that
Python reads as the same value: no `\\/` escape (Python keeps the backslash) and no `\\uD800`-`\\uDFFF` escape
(Python reads a surrogate pair as two lone surrogates); every string keeps a spelling without them (the character
itself).  Every `true`, `false`, `null` may also be Python's `True`, `False`, `None`, and every string may be
single-quoted as Python writes it (LFM2 writes both quotes).  Tool and parameter names
are Python identifiers that are not keywords, as a call must be to parse.
"""

from __future__ import annotations

import ast
import json
import keyword
import re
from typing import Any

import numpy as np

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
    """`node`'s texts that Python reads as JSON does, and in a DFA each `true`, `false`, `null` outside strings
    also as Python's `True`, `False`, `None` (a recursive value's bodies are each guarded: they meet outside
    strings, where the guard is back at its start; they keep JSON's names)."""
    if isinstance(node, ir.EmbeddedGrammar):
        from stdsl.compiler.pushdown.embedding import guarded

        return guarded(node, build_automaton(python_reads_alike()))
    alike = build_automaton(intersection(node, python_reads_alike()))
    return with_python_constants(np.asarray(alike.transitions), np.asarray(alike.accepting))


_OUTSIDE, _INSIDE, _ESCAPED = 0, 1, 2


def _string_places(table: np.ndarray) -> np.ndarray:
    """Whether each state of a trim DFA of JSON texts is outside a string, inside one, or after a backslash there
    (one place per state: from one, the unescaped quotes left to read are even, from the other odd)."""
    place = np.full(table.shape[0], -1, dtype=np.int8)
    place[0], pending = _OUTSIDE, [0]
    while pending:
        state = pending.pop()
        for byte in np.flatnonzero(table[state] >= 0).tolist():
            at = int(place[state])
            if at == _ESCAPED:
                nxt = _INSIDE
            elif byte == ord('"'):
                nxt = _INSIDE if at == _OUTSIDE else _OUTSIDE
            else:
                nxt = _ESCAPED if at == _INSIDE and byte == ord("\\") else at
            target = int(table[state, byte])
            if place[target] < 0:
                place[target] = nxt
                pending.append(target)
    return place


def with_python_constants(table: np.ndarray, accepting: np.ndarray) -> ir.Embedded:
    """The DFA of JSON texts (`table` (n, 256), start 0) where each `true`, `false`, `null` outside a string may
    also be written `True`, `False`, `None`, and each string also single-quoted as Python writes it (`'` escaped
    as `\\'`, `"` raw or escaped): fresh states beside the old ones (no JSON text has `T`, `F`, `N` or `'` outside
    a string, so the table stays deterministic)."""
    place = _string_places(table)
    added: list[np.ndarray] = []
    out = table.astype(np.int32)
    base = out.shape[0]

    def row(state: int) -> np.ndarray:
        return out[state] if state < base else added[state - base]

    def fresh() -> int:
        added.append(np.full(256, -1, dtype=np.int32))
        return base + len(added) - 1

    for word, python in (("true", "True"), ("false", "False"), ("null", "None")):
        for state in np.flatnonzero(place == _OUTSIDE).tolist():
            end = state
            for byte in word.encode():
                end = int(table[end, byte]) if end >= 0 else -1
            if end < 0:
                continue
            at = state
            for byte in python.encode()[:-1]:
                at_next = fresh()
                row(at)[byte] = at_next
                at = at_next
            row(at)[python.encode()[-1]] = end
    _single_quoted(table, place, row, fresh)
    marks = np.concatenate([np.asarray(accepting, dtype=bool), np.zeros(len(added), dtype=bool)])
    return ir.Embedded(np.vstack([out, *added]) if added else out, marks)


def _single_quoted(table: np.ndarray, place: np.ndarray, row: Any, fresh: Any) -> None:
    """Add each string's single-quoted spelling: a copy of the states inside strings in which `'` closes, a raw
    `'` of the content is written `\\'` and a `"` of it (written `\\"` in JSON) may also stand raw."""
    quote, single, backslash = ord('"'), ord("'"), ord("\\")
    copy: dict[int, int] = {}
    escape: dict[int, int] = {}
    pending: list[int] = []

    def copied(state: int) -> int:
        if state not in copy:
            copy[state] = fresh()
            pending.append(state)
        return copy[state]

    for state in np.flatnonzero(place == _OUTSIDE).tolist():
        if table[state, quote] >= 0:
            row(state)[single] = copied(int(table[state, quote]))
    while pending:
        state = pending.pop()
        mine = row(copy[state])
        for byte in np.flatnonzero(table[state] >= 0).tolist():
            target = int(table[state, byte])
            if byte == quote:
                mine[single] = target
            elif byte == backslash:
                continue
            elif byte == single:
                escape.setdefault(state, fresh())
                row(escape[state])[single] = copied(target)
            else:
                mine[byte] = copied(target)
        escaped = int(table[state, backslash])
        if escaped >= 0:
            escape.setdefault(state, fresh())
            for byte in np.flatnonzero(table[escaped] >= 0).tolist():
                row(escape[state])[byte] = copied(int(table[escaped, byte]))
            if table[escaped, quote] >= 0:
                mine[quote] = copied(int(table[escaped, quote]))
        if state in escape:
            mine[backslash] = escape[state]


def _check_name(name: str, pattern: re.Pattern[str], what: str, path: str) -> None:
    if not pattern.match(name) or any(keyword.iskeyword(part) for part in name.split(".")):
        raise SchemaError(f"the pythonic call syntax writes {what} as a Python identifier; {name!r} is not one (or "
                          "is a keyword)", path)


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
        """An argument's value: JSON that Python reads alike, its constants also in Python's spelling."""
        return _guarded(without_literals(arguments_ir(schema, path, self.spacing), self.body_excludes))

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
        from stdsl.compiler.json_schema.scalars.escaped_grammar import json_string_leaf

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
    """A call's name and arguments, each argument read as JSON (`_json_value`)."""
    try:
        call = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call) or call.args:
        return None
    arguments: dict[str, Any] = {}
    for argument in call.keywords:
        if argument.arg is None:
            return None
        try:
            arguments[argument.arg] = _json_value(argument.value, text)
        except ValueError:
            return None
    return ast.unparse(call.func), arguments


def _json_value(node: ast.expr, text: str) -> Any:
    """The value of a JSON text in `text` whose constants and strings may be spelled as Python's: containers by
    their parts, every other part by `json.loads` of its spelling (a single-quoted string rewritten in double
    quotes first), so an escape Python reads otherwise is read as JSON reads it."""
    if isinstance(node, ast.List):
        return [_json_value(item, text) for item in node.elts]
    if isinstance(node, ast.Dict):
        keys = [_json_value(key, text) if key is not None else None for key in node.keys]
        if not all(isinstance(key, str) for key in keys):
            raise ValueError("a dict key that is not a string")
        return {key: _json_value(value, text) for key, value in zip(keys, node.values)}
    source = ast.get_source_segment(text, node)
    if source is None:
        raise ValueError("no source")
    if source in PYTHON_CONSTANTS:
        return PYTHON_CONSTANTS[source]
    return json.loads(_double_quoted(source) if source.startswith("'") else source)


def _double_quoted(source: str) -> str:
    """A single-quoted string literal of JSON escapes (and `\\'`) spelled as a JSON string."""
    out, i = ['"'], 1
    while i < len(source) - 1:
        c = source[i]
        if c == "\\" and source[i + 1] == "'":
            out.append("'")
            i += 2
            continue
        if c == "\\":
            out.append(source[i:i + 2])
            i += 2
            continue
        out.append('\\"' if c == '"' else c)
        i += 1
    out.append('"')
    return "".join(out)
