"""The grammar of a reply to a request that offers tools (the paper, D.8).

    REPLY = FREE (CALL (\\n CALL)*)?        tool_choice "auto", parallel calls allowed
    FREE  = text containing no call tag     (Proposition 3, exact)
    CALL  = one call of one offered tool, its arguments typed by the tool's JSON Schema

"required" drops FREE and needs at least one call, a named choice is exactly one call of that
tool, `parallel_tool_calls: false` allows at most one call, and with a response format the reply
is either content in that format or the calls.  The budget mask of the runtime then keeps even a
reply cut by `max_tokens` a complete call.
"""

from __future__ import annotations

from collections.abc import Sequence

from stdsl.compiler import ir
from stdsl.errors import CompileError
from stdsl.server.call_syntax import CALL_SEPARATOR, ArgumentsIR, CallSyntax, ToolSpec
from stdsl.server.not_containing import not_containing

CHOICES = ("none", "auto", "required")


def free_text(syntax: CallSyntax) -> ir.Node:
    """Any text that cannot start a call in `syntax`."""
    return not_containing(list(syntax.free_literals))


def reply_ir(
    tools: Sequence[ToolSpec],
    syntax: CallSyntax,
    arguments_ir: ArgumentsIR,
    *,
    choice: str = "auto",
    parallel: bool = True,
    content: ir.Node | None = None,
) -> ir.Node:
    """The reply grammar for `tools` under `choice` ("none", "auto", "required" or a tool name).

    `content` is the grammar of non-call content (a response format); None is FREE text.
    """
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise CompileError(f"tool names must be distinct, got {names}")
    text = content if content is not None else free_text(syntax)
    if choice == "none" or not tools:
        return text
    if choice not in CHOICES:
        chosen = [tool for tool in tools if tool.name == choice]
        if not chosen:
            raise CompileError(f"tool_choice names {choice!r}, which is not among the tools {names}")
        return syntax.call_ir(chosen[0], arguments_ir)
    call = ir.alt(*(syntax.call_ir(tool, arguments_ir) for tool in tools))
    calls = ir.seq(call, ir.star(ir.seq(ir.literal(CALL_SEPARATOR), call))) if parallel else call
    if choice == "required":
        return calls
    if content is not None:
        return ir.alt(content, calls)
    return ir.seq(text, ir.optional(calls))
