"""Translate a chat or text completion request into engine work: prompt ids, a constraint spec, options.

Exactly one source may constrain the output: `response_format`, a vLLM extra (`guided_json`,
`guided_regex`, `guided_choice`, `structured_outputs`) or a `.stc` `program`; `tools` then wrap it
in the reply grammar.  Everything the request asks that cannot be honoured exactly is a 400
naming the field, decided here before any engine work.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stdsl.compiler.special_tokens import token_markers
from stdsl.compiler.tools.formats import FORMATS, ToolFormat, format_of_template
from stdsl.compiler.tools.formats.base import CUSTOM_PARAMETERS
from stdsl.errors import ContextLengthError, StdslError
from stdsl.model_files.prompt import plain_text_ids
from stdsl.model_files.tokenizer import CHATML_TEMPLATE
from stdsl.runtime.context_window import context_length as model_context_length
from stdsl.runtime.context_window import output_room
from stdsl.server.openai_api.errors import RequestError
from stdsl.server.openai_api.protocol import (
    MAX_STOP,
    ChatCompletionRequest,
    CompletionRequest,
    CustomTool,
    NamedCustomToolChoice,
    NamedToolChoice,
    ResponseFormatJsonObject,
    ResponseFormatJsonSchema,
    ResponseFormatStructuralTag,
    UserMessage,
    _Sampling,
)
from stdsl.server.requests.chat_prompt import chat_prompt_ids
from stdsl.server.requests.chat_render import CallMemory, chat_messages
from stdsl.server.requests.reasoning_plan import template_kwargs, thinking_spec
from stdsl.server.tools.custom_tools import custom_entry

DEFAULT_CONTEXT = 4096
DEFAULT_MAX_TOKENS = 1024
COMPLETION_MAX_TOKENS = 16


@dataclass
class Plan:
    """What the server submits for one request: a prompt per choice group, the constraint, options, how to read."""

    prompts: list[list[int]]
    spec: dict[str, Any] | None
    options: dict[str, Any]
    n: int
    tool_format: ToolFormat | None = None
    parameters: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    reader_stops: tuple[str, ...] = ()
    program: bool = False
    custom_tools: frozenset[str] = frozenset()
    """The offered tools that are OpenAI custom tools (their calls return raw `input`)."""


def context_length(model: Any) -> int:
    """The model's context window in tokens (its config's max_position_embeddings; DEFAULT_CONTEXT without one)."""
    return model_context_length(model) or DEFAULT_CONTEXT


def _schema_spec(schema: Any, strict: bool, param: str) -> dict[str, Any]:
    """A `json_schema` spec: `strict` (OpenAI's `json_schema.strict`, true when absent) closes objects to their
    declared members; false is the schema's exact open language, any object where the compiler refuses it."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as error:
            raise RequestError(f"{param} is not valid JSON: {error}", param=param, code="invalid_json") from None
    if not isinstance(schema, (dict, bool)):
        raise RequestError(f"{param} must be a JSON Schema (an object or a boolean)", param=param,
                           code="invalid_constraint")
    return {"kind": "json_schema", "schema": schema, "strict": strict}


def _name_special_tokens(spec: dict[str, Any] | None, tokenizer: Any) -> None:
    """A grammar that may name special tokens (`<|python_tag|>`, `<[128010]>`) compiles for the model's tokenizer:
    its special and added tokens go with the spec to the compile worker."""
    if spec is not None and spec["kind"] == "grammar" and "<" in spec["text"]:
        spec["tokens"] = sorted((str(text), int(i)) for text, i in tokenizer.special_tokens.items())


def _grammar_spec(text: str, param: str) -> dict[str, Any]:
    """A grammar (Lark, GBNF or EBNF, told apart as vLLM does); its errors name `param`, line and column."""
    return {"kind": "grammar", "text": text, "syntax": "auto", "source": param}


def _structural_tag_spec(response_format: ResponseFormatStructuralTag) -> dict[str, Any]:
    if response_format.format is None and response_format.structures is None:
        raise RequestError("response_format: a structural tag needs 'format' (or the older 'structures' and "
                           "'triggers')", param="response_format", code="invalid_constraint")
    return {"kind": "structural_tag", "tag": response_format.model_dump(exclude_none=True)}


def _choice_spec(choices: Sequence[str], param: str) -> dict[str, Any]:
    if not choices:
        raise RequestError(f"{param} needs at least one choice", param=param, code="invalid_constraint")
    return {"kind": "choice", "choices": list(choices)}


def output_spec(request: _Sampling, response_format: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The constraint the request asks for (None: free text) and the field that asked for it."""
    found: list[tuple[dict[str, Any], str]] = []
    if isinstance(response_format, ResponseFormatJsonSchema):
        strict = response_format.json_schema.strict is not False
        found.append((_schema_spec(response_format.json_schema.schema_, strict, "response_format"),
                      "response_format"))
    elif isinstance(response_format, ResponseFormatJsonObject):
        found.append(({"kind": "json_object"}, "response_format"))
    elif isinstance(response_format, ResponseFormatStructuralTag):
        found.append((_structural_tag_spec(response_format), "response_format"))
    if request.guided_json is not None:
        found.append((_schema_spec(request.guided_json, True, "guided_json"), "guided_json"))
    if request.guided_regex is not None:
        found.append(({"kind": "regex", "pattern": request.guided_regex}, "guided_regex"))
    if request.guided_choice is not None:
        found.append((_choice_spec(request.guided_choice, "guided_choice"), "guided_choice"))
    if request.guided_grammar is not None:
        found.append((_grammar_spec(request.guided_grammar, "guided_grammar"), "guided_grammar"))
    outputs = request.structured_outputs
    if outputs is not None:
        if outputs.grammar is not None:
            found.append((_grammar_spec(outputs.grammar, "structured_outputs.grammar"), "structured_outputs"))
        if outputs.json_ is not None:
            found.append((_schema_spec(outputs.json_, True, "structured_outputs.json"), "structured_outputs"))
        if outputs.regex is not None:
            found.append(({"kind": "regex", "pattern": outputs.regex}, "structured_outputs"))
        if outputs.choice is not None:
            found.append((_choice_spec(outputs.choice, "structured_outputs.choice"), "structured_outputs"))
        if outputs.json_object:
            found.append(({"kind": "json_object"}, "structured_outputs"))
    if request.program is not None:
        found.append(({"kind": "program", "source": request.program.source,
                       "arguments": request.program.arguments}, "program"))
    if len(found) > 1:
        names = ", ".join(sorted({param for _, param in found}))
        raise RequestError(f"give one output constraint, not several ({names})", param=found[1][1],
                           code="multiple_constraints")
    return found[0] if found else (None, None)


def _refuse_unsupported(request: _Sampling) -> None:
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(request, name):
            raise RequestError(f"{name} is not supported by this server (only 0)", param=name,
                               code="unsupported_parameter")
    if request.logprobs:
        raise RequestError("logprobs are not supported by this server", param="logprobs",
                           code="unsupported_parameter")


def _stops(request: _Sampling) -> tuple[str, ...]:
    stop = request.stop
    stops = (stop,) if isinstance(stop, str) else tuple(stop or ())
    if len(stops) > MAX_STOP or not all(stops):
        raise RequestError(f"stop takes at most {MAX_STOP} non-empty strings", param="stop", code="invalid_value")
    return stops


def _free_text_stops(request: _Sampling, spec: dict[str, Any] | None) -> tuple[str, ...]:
    """The stop strings of a request without an output constraint; with one they are refused (a stop string would
    cut the output short of a valid one)."""
    stops = _stops(request)
    if stops and spec is not None:
        raise RequestError("stop applies to free text only; with an output constraint a stop string would cut the "
                           "output short of a valid one", param="stop", code="stop_with_constraint")
    return stops


def _options(request: _Sampling, max_tokens: int | None, default: int, prompt_len: int, context: int,
             prompt_param: str) -> dict[str, Any]:
    try:
        max_tokens = output_room(prompt_len, max_tokens, context, default)
    except ContextLengthError as error:
        raise RequestError(str(error), param=prompt_param if error.argument == "prompt" else "max_tokens",
                           code="context_length_exceeded") from None
    return {"max_tokens": max_tokens, "temperature": request.temperature, "top_p": request.top_p,
            "top_k": max(request.top_k, 0), "seed": request.seed, "chat": False}


def tool_parameters(index: int, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's `parameters` as an object schema (`{}` reads as any object); anything else is a 400 naming it."""
    if not parameters:
        return {"type": "object"}
    if parameters.get("type") != "object":
        param = f"tools[{index}].function.parameters"
        raise RequestError(f"{param} must be a JSON Schema of an object (\"type\": \"object\"), since a call's "
                           f"arguments are a JSON object; got type {parameters.get('type')!r}", param=param,
                           code="invalid_tool_parameters")
    return dict(parameters)


def _tools_spec(request: ChatCompletionRequest, content: dict[str, Any] | None,
                tool_format: ToolFormat) -> dict[str, Any]:
    choice = request.tool_choice
    named = (choice.function.name if isinstance(choice, NamedToolChoice)
             else choice.custom.name if isinstance(choice, NamedCustomToolChoice) else None)
    names = [_tool_name(tool) for tool in request.tools or ()]
    if named is not None and named not in names:
        raise RequestError(f"tool_choice names {named!r}, which is not among the tools {names}", param="tool_choice",
                           code="invalid_tool_choice")
    tools = [custom_entry(i, t) if isinstance(t, CustomTool) else _function_entry(i, t)
             for i, t in enumerate(request.tools or ())]
    return {"kind": "tools", "format": tool_format.name, "tools": tools, "choice": named or choice or "auto",
            "parallel": request.parallel_tool_calls, "content": content}


def _function_entry(index: int, tool: Any) -> dict[str, Any]:
    """A function tool of the tools spec: its arguments' objects closed to their declared members unless
    `function.strict` is false (OpenAI's field; absent reads as true here)."""
    entry = {"name": tool.function.name, "parameters": tool_parameters(index, tool.function.parameters)}
    if tool.function.strict is False:
        entry["strict"] = False
    return entry


def _tool_name(tool: Any) -> str:
    return str(tool.custom.name if isinstance(tool, CustomTool) else tool.function.name)


def _tool_format(name: str | None, template: str | None) -> ToolFormat:
    """The tool-call format named by the request or the server, else the one the chat template writes."""
    if name is None:
        return format_of_template(template)
    if name not in FORMATS:
        raise RequestError(f"tool_format {name!r} is not one of {', '.join(sorted(FORMATS))}", param="tool_format",
                           code="invalid_value")
    return FORMATS[name]


def chat_plan(request: ChatCompletionRequest, model: Any, memory: CallMemory, tool_format: str | None = None,
              program_dir: str | None = None, program_messages: list[dict[str, str]] | None = None) -> Plan:
    """The engine work of a chat completion request (`tool_format`: the server's tool-call format, None: the
    template's; `program_dir`: the directory a program's files may be read from, None: no file at all;
    `program_messages`: the request's program's messages, rendered in a compile worker (`program_spec`))."""
    _refuse_unsupported(request)
    if request.top_logprobs:
        raise RequestError("top_logprobs is not supported by this server", param="top_logprobs",
                           code="unsupported_parameter")
    if request.tool_choice is not None and not request.tools:
        raise RequestError("tool_choice is only allowed when tools are given", param="tool_choice",
                           code="invalid_tool_choice")
    spec, _ = output_spec(request, request.response_format)
    _name_special_tokens(spec, model.tokenizer)
    if spec is not None and spec["kind"] == "program":
        spec["files"] = program_dir
    if request.tools and spec is not None and spec["kind"] == "program":
        raise RequestError("a program cannot be combined with tools", param="program", code="conflicting_parameters")
    tokenizer = model.tokenizer
    template = tokenizer.chat_template or CHATML_TEMPLATE
    call_format = _tool_format(request.tool_format or tool_format, tokenizer.chat_template)
    tools_spec = _tools_spec(request, spec, call_format) if request.tools else None
    tokens = token_markers(call_format.markers, tokenizer.special_tokens)
    if tools_spec is not None and tokens:
        tools_spec["tokens"] = list(tokens)
    messages = list(request.messages)
    if spec is not None and spec["kind"] == "program":
        if program_messages is None:
            raise StdslError("a program's messages are rendered by a compile worker before its plan is made")
        messages += _as_messages(program_messages)
    if not messages:
        raise RequestError("messages: give at least one message (or a program whose source has messages)",
                           param="messages", code="invalid_value")
    plain, variables = chat_messages(messages, request.tools, call_format, template, memory)
    prompt = chat_prompt_ids(tokenizer, template, plain, {**template_kwargs(request), **variables})
    stops = _stops(request)
    max_tokens = request.max_completion_tokens or request.max_tokens
    options = _options(request, max_tokens, DEFAULT_MAX_TOKENS, len(prompt), context_length(model), "messages")
    plan = Plan([prompt], spec, options, request.n, program=spec is not None and spec["kind"] == "program")
    if tools_spec is not None:
        plan.spec = tools_spec
        plan.tool_format = call_format
        plan.parameters = {t["name"]: t.get("parameters", CUSTOM_PARAMETERS) for t in tools_spec["tools"]}
        plan.custom_tools = frozenset(t["name"] for t in tools_spec["tools"] if "custom" in t)
        plan.reader_stops = stops
    else:
        options["stop"] = _free_text_stops(request, spec)
    plan.spec, thinking_options = thinking_spec(request, tokenizer, prompt, plan.spec)
    options.update(thinking_options)
    return plan


def program_spec(request: ChatCompletionRequest, program_dir: str | None, max_bytes: int) -> dict[str, Any] | None:
    """What a compile worker renders of the request's program (None without one): its source and arguments, the
    directory its files may come from and the bytes its messages may hold, both set by the server."""
    if request.program is None:
        return None
    return {"kind": "program_messages", "source": request.program.source, "arguments": request.program.arguments,
            "files": program_dir, "max_bytes": max_bytes}


def _as_messages(rendered: list[dict[str, str]]) -> list[UserMessage]:
    """A program's rendered messages as chat messages, appended to the chat."""
    from stdsl.server.openai_api.protocol import SystemMessage

    out: list[Any] = []
    for message in rendered:
        role = message["role"]
        out.append(SystemMessage(role="system", content=message["content"]) if role == "system"
                   else UserMessage(role="user", content=message["content"]))
    return out


def completion_plan(request: CompletionRequest, model: Any) -> Plan:
    """The engine work of a text completion request (each prompt of a list is its own group of choices)."""
    _refuse_unsupported(request)
    for name, refused in (("echo", request.echo), ("suffix", request.suffix is not None),
                          ("best_of", (request.best_of or 1) > 1)):
        if refused:
            raise RequestError(f"{name} is not supported by this server", param=name, code="unsupported_parameter")
    spec, _ = output_spec(request, request.response_format)
    _name_special_tokens(spec, model.tokenizer)
    if spec is not None and spec["kind"] == "program":
        raise RequestError("programs run through /v1/chat/completions", param="program",
                           code="unsupported_parameter")
    prompt = request.prompt
    if isinstance(prompt, str):
        prompts = [plain_text_ids(model.tokenizer, prompt)]
    elif prompt and all(isinstance(p, int) for p in prompt):
        prompts = [[int(t) for t in prompt]]
        bad = [t for t in prompts[0] if not 0 <= t < model.vocab_size]
        if bad:
            raise RequestError(f"prompt token id {bad[0]} is outside [0, {model.vocab_size})", param="prompt",
                               code="invalid_value")
    else:
        prompts = [plain_text_ids(model.tokenizer, str(p)) for p in prompt]
    if not prompts:
        raise RequestError("prompt must not be an empty list", param="prompt", code="invalid_value")
    prompts = [p or [_start_token(model)] for p in prompts]
    context = context_length(model)
    options = _options(request, request.max_tokens, COMPLETION_MAX_TOKENS, max(len(p) for p in prompts), context,
                       "prompt")
    options["stop"] = _free_text_stops(request, spec)
    return Plan(prompts, spec, options, request.n)


def _start_token(model: Any) -> int:
    tokenizer = model.tokenizer
    return int(tokenizer.bos_id if tokenizer.bos_id is not None else (tokenizer.eos_ids or (0,))[0])
