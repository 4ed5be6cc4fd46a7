"""Chat messages (with tools) rendered to prompt text through the model's own chat template, sandboxed.

Tools reach the model through the template when it takes a `tools` variable, else as a
Hermes-style system prompt.  An assistant turn that carried tool calls is re-rendered as the exact
text the model wrote (its free text, then its calls in the tool-call format), so the next request's
prompt repeats the previous one token for token and the prompt cache serves it.  Tool results go
to templates that know the `tool` role as is, else as a user turn in `<tool_response>` tags.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from stdsl.compiler.tools.formats import ToolFormat
from stdsl.server.openai_api.protocol import (
    AssistantMessage,
    Content,
    CustomTool,
    CustomToolCall,
    Message,
    SystemMessage,
    Tool,
    ToolCall,
    ToolMessage,
)
from stdsl.server.tools.custom_tools import template_tool

HERMES_SYSTEM = (
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
    "XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>"
)
MEMORY_SIZE = 4096


class CallMemory:
    """The exact text of the calls this server returned, by call id (bounded), for verbatim re-rendering."""

    def __init__(self, size: int = MEMORY_SIZE) -> None:
        self.size = size
        self._texts: OrderedDict[str, tuple[str, str, str]] = OrderedDict()

    def remember(self, call_id: str, name: str, arguments: str, text: str) -> None:
        self._texts[call_id] = (name, arguments, text)
        while len(self._texts) > self.size:
            self._texts.popitem(last=False)

    def text(self, call_id: str, name: str, arguments: str, tool_format: ToolFormat, index: int = 0) -> str:
        """The call as the model wrote it when the client sent it back unchanged, else written afresh."""
        kept = self._texts.get(call_id)
        if kept is not None and kept[:2] == (name, arguments):
            return kept[2]
        return tool_format.render_past(name, arguments, index, call_id)


def content_text(content: Content | None) -> str:
    """A message's content as one string (text parts joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content)


def _template_takes_tools(template: str) -> bool:
    return re.search(r"\btools\b", template) is not None


def _template_knows_tool_role(template: str) -> bool:
    return re.search(r"""['"]tool['"]""", template) is not None


def tool_definitions(tools: Sequence[Tool | CustomTool], tool_format: ToolFormat) -> list[dict[str, Any]]:
    """The tools as the OpenAI API (and Hugging Face templates) write function tools; a custom tool as the
    function whose arguments carry its input in `tool_format`."""
    return [template_tool(tool, tool_format) if isinstance(tool, CustomTool) else tool.model_dump(exclude_none=True)
            for tool in tools]


def call_text(call: ToolCall | CustomToolCall, tool_format: ToolFormat, memory: CallMemory, index: int) -> str:
    """An assistant turn's call as the model wrote it (a custom call's input carried as the format carries it)."""
    if isinstance(call, CustomToolCall):
        arguments = tool_format.custom_arguments(call.custom.input)
        return memory.text(call.id, call.custom.name, arguments, tool_format, index)
    return memory.text(call.id, call.function.name, call.function.arguments, tool_format, index)


def chat_messages(messages: Sequence[Message], tools: Sequence[Tool | CustomTool] | None, tool_format: ToolFormat,
                  template: str, memory: CallMemory) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Plain role/content dicts for the template, and the extra template variables (`tools`)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": content_text(message.content)})
        elif isinstance(message, AssistantMessage):
            calls = [call_text(c, tool_format, memory, i) for i, c in enumerate(message.tool_calls or ())]
            out.append({"role": "assistant", "content": content_text(message.content) + tool_format.join(calls)})
        elif isinstance(message, ToolMessage):
            if _template_knows_tool_role(template):
                out.append({"role": "tool", "content": content_text(message.content),
                            "tool_call_id": message.tool_call_id})
            else:
                out.append({"role": "user",
                            "content": f"<tool_response>\n{content_text(message.content)}\n</tool_response>"})
        else:
            out.append({"role": "user", "content": content_text(message.content)})
    variables: dict[str, Any] = {}
    if tools:
        if _template_takes_tools(template):
            variables["tools"] = tool_definitions(tools, tool_format)
        else:
            listing = "\n".join(json.dumps(t) for t in tool_definitions(tools, tool_format))
            system = HERMES_SYSTEM.format(tools=listing)
            if out and out[0]["role"] == "system":
                out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + system}
            else:
                out.insert(0, {"role": "system", "content": system})
    return out, variables
