"""The grammar of a reply to a request that offers tools (the paper, D.8), for any tool-call format.

    REPLY = FREE CALLS?                     tool_choice "auto"
    FREE  = text containing no call trigger (Proposition 3, exact)
    CALLS = the format's calls: section open, CALL (separator CALL)*, section close
    CALL  = one call of one offered tool, its arguments typed by the tool's JSON Schema

"required" drops FREE and needs at least one call, a named choice is exactly one call of that
tool, `parallel_tool_calls: false` allows at most one call, and with a response format the reply
is either content in that format or the calls.  A format whose replies have another shape
(Harmony channels) says so through its `content_ir`, `calls_ir` and `reply_ir`.  The budget mask
of the runtime then keeps even a reply cut by `max_tokens` a complete call.
"""

from __future__ import annotations

from collections.abc import Sequence

from stdsl.compiler import ir
from stdsl.compiler.tools.formats import ArgumentsIR, ToolFormat, ToolSpec
from stdsl.errors import CompileError

CHOICES = ("none", "auto", "required")


def reply_ir(
    tools: Sequence[ToolSpec],
    tool_format: ToolFormat,
    arguments_ir: ArgumentsIR,
    *,
    choice: str = "auto",
    parallel: bool = True,
    content: ir.Node | None = None,
) -> ir.Node:
    """The reply grammar for `tools` under `choice` ("none", "auto", "required" or a tool name).

    `content` is the grammar of non-call content (a response format); None is FREE text.
    """
    called = called_tools(tools, choice)
    call = ir.alt(*(tool_format.tool_call_ir(tool, arguments_ir) for tool in called))
    return reply_around(call, tool_format, choice=choice if called else "none", parallel=parallel, content=content)


def called_tools(tools: Sequence[ToolSpec], choice: str) -> list[ToolSpec]:
    """The tools a reply under `choice` may call (none for "none"), after checking the names."""
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise CompileError(f"tool names must be distinct, got {names}")
    if choice == "none" or not tools:
        return []
    if choice not in CHOICES:
        chosen = [tool for tool in tools if tool.name == choice]
        if not chosen:
            raise CompileError(f"tool_choice names {choice!r}, which is not among the tools {names}")
        return chosen
    return list(tools)


def reply_around(call: ir.Node, tool_format: ToolFormat, *, choice: str, parallel: bool,
                 content: ir.Node | None) -> ir.Node:
    """The reply grammar whose one call is `call` (the alternative of the called tools' calls, or a placeholder
    that `tools.reply_automaton` fills in) under `choice`, with `content` as in `reply_ir`."""
    text = content if content is not None else tool_format.free_ir()
    if choice == "none":
        return tool_format.content_ir(text)
    if choice not in CHOICES:
        return tool_format.calls_ir(call, False)
    calls = tool_format.calls_ir(call, parallel)
    if choice == "required":
        return calls
    return tool_format.reply_ir(text, calls, content is not None)
