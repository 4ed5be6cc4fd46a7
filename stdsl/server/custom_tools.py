"""OpenAI custom tools: a tool whose call carries raw text in its own language (a Lark grammar, a regex, or any
text) instead of JSON arguments.

A request's custom tool becomes the spec entry `{"name", "custom": {"syntax", "definition", "field"}}`
(`custom_entry`), and the compile worker turns its language into one DFA (`input_language`).  The call
is part of the reply's automaton, so a recursive grammar (a pushdown) is refused naming the field, as is
one with special tokens.  Each tool-call format writes and reads the input its own way
(`ToolFormat.custom_call_ir`, `custom_arguments`, `custom_input`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint import Constraint, Regex
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.errors import CompileError, CompileTimeError, RegexError, StdslError

if TYPE_CHECKING:
    from stdsl.server.protocol import CustomTool
    from stdsl.server.tool_formats import ToolFormat

FIELD = re.compile(r"^(tools\[\d+\]\.custom\.format(?:\.grammar)?\.definition)")


def custom_entry(index: int, tool: CustomTool) -> dict[str, Any]:
    """The spec entry of the request's `index`-th tool, a custom one (a 400 naming the field when its format is
    incomplete)."""
    from stdsl.server.errors import RequestError

    where = f"tools[{index}].custom.format"
    fmt = tool.custom.format
    if fmt is None or fmt.type == "text":
        return {"name": tool.custom.name, "custom": {"syntax": "text", "definition": "", "field": where}}
    if fmt.grammar is not None:
        syntax, definition, field = fmt.grammar.syntax, fmt.grammar.definition, f"{where}.grammar.definition"
    elif fmt.syntax is not None and fmt.definition is not None:
        syntax, definition, field = fmt.syntax, fmt.definition, f"{where}.definition"
    else:
        raise RequestError(f"{where}: a grammar format needs 'grammar': {{'syntax': 'lark' | 'regex', "
                           "'definition': ...}} (or 'syntax' and 'definition' beside 'type')", param=where)
    return {"name": tool.custom.name, "custom": {"syntax": syntax, "definition": definition, "field": field}}


@lru_cache(maxsize=1)
def _any_text() -> Automaton:
    return build_automaton(ir.star(ir.any_char()))


def _regex_error(field: str, error: RegexError) -> CompileError:
    """A malformed regex located at line and column of the definition."""
    before = error.pattern[: error.position]
    line, column = before.count("\n") + 1, error.position - (before.rfind("\n") + 1) + 1
    reason = str(error).split(" at position ")[0]
    return CompileError(f"{field}:{line}:{column}: {reason}")


def input_language(custom: Mapping[str, Any], seconds: float) -> Automaton:
    """The DFA of a custom tool's raw input (`custom`: its spec entry), compiled within `seconds`; errors name
    the definition's field (and the line and column where the grammar is malformed)."""
    syntax, field = custom["syntax"], custom["field"]
    if syntax == "text":
        return _any_text()
    try:
        if syntax == "regex":
            compiled = compile_constraint(Regex(custom["definition"]), max_seconds=seconds)
        else:
            from stdsl.compiler.grammar import Grammar

            compiled = compile_constraint(Grammar(custom["definition"], syntax="lark", source=field),
                                          max_seconds=seconds)
    except RegexError as error:
        raise _regex_error(field, error) from None
    except CompileTimeError:
        raise
    except StdslError as error:
        text = str(error)
        raise CompileError(text if text.startswith(field) else f"{field}: {text}") from None
    if not isinstance(compiled, Constraint):
        raise CompileError(f"{field}: the grammar is recursive (it compiles to a pushdown), but a custom tool's "
                           "input is written inside the reply's tool-call automaton, which needs a regular "
                           "language: bound the nesting (unroll the recursive rule a fixed number of levels), or "
                           "send the grammar as the whole reply (structured_outputs.grammar)")
    if compiled.special_tokens:
        raise CompileError(f"{field}: special tokens ({', '.join(sorted(compiled.special_tokens)[:3])}) cannot be "
                           "part of a custom tool's input, which is text")
    return compiled.automaton


def template_tool(tool: CustomTool, tool_format: ToolFormat) -> dict[str, Any]:
    """A custom tool as chat templates know tools (a function): its input described by its format, as the
    parameter `input` where the format writes parameters apart, else as the one string of the arguments."""
    from stdsl.server.tool_formats.base import CUSTOM_PARAMETER, CUSTOM_PARAMETERS, JsonArgumentsFormat

    fmt = tool.custom.format
    grammar = fmt.grammar if fmt is not None else None
    syntax = grammar.syntax if grammar is not None else (fmt.syntax if fmt is not None else None)
    definition = grammar.definition if grammar is not None else (fmt.definition if fmt is not None else None)
    about = f"raw text in this {syntax} grammar:\n{definition}" if syntax and definition is not None else "raw text"
    if isinstance(tool_format, JsonArgumentsFormat) and not tool_format.custom_in_object:
        parameters: dict[str, Any] = {"type": "string", "description": about}
    else:
        parameters = {**CUSTOM_PARAMETERS, "properties": {CUSTOM_PARAMETER: {"type": "string", "description": about}}}
    function = {"name": tool.custom.name, "parameters": parameters}
    if tool.custom.description is not None:
        function["description"] = tool.custom.description
    return {"type": "function", "function": function}


def error_field(message: str) -> str | None:
    """The custom tool field an error message starts with (the request field to name in a 400), if any."""
    found = FIELD.match(message)
    return found.group(1) if found else None
