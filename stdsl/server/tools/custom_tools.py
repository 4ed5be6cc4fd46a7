"""OpenAI custom tools: a tool whose call carries raw text in its own language (a Lark grammar, a regex, or any
text) instead of JSON arguments.

A request's custom tool becomes the spec entry `{"name", "custom": {"syntax", "definition", "field"}}`
(`custom_entry`), and the compile worker turns its language into one DFA (`custom_input.input_language`).
Each tool-call format writes and reads the input its own way (`ToolFormat.custom_call_ir`,
`custom_arguments`, `custom_input`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stdsl.compiler.tools.formats import ToolFormat
    from stdsl.server.openai_api.protocol import CustomTool

FIELD = re.compile(r"^(tools\[\d+\]\.custom\.format(?:\.grammar)?\.definition)")


def custom_entry(index: int, tool: CustomTool) -> dict[str, Any]:
    """The spec entry of the request's `index`-th tool, a custom one (a 400 naming the field when its format is
    incomplete)."""
    from stdsl.server.openai_api.errors import RequestError

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
                           "'definition': ...}} (or 'syntax' and 'definition' beside 'type')", param=where,
                           code="invalid_value")
    return {"name": tool.custom.name, "custom": {"syntax": syntax, "definition": definition, "field": field}}


def template_tool(tool: CustomTool, tool_format: ToolFormat) -> dict[str, Any]:
    """A custom tool as chat templates know tools (a function): its input described by its format, as the
    parameter `input` where the format writes parameters apart, else as the one string of the arguments."""
    from stdsl.compiler.tools.formats.base import CUSTOM_PARAMETER, CUSTOM_PARAMETERS, JsonArgumentsFormat

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
