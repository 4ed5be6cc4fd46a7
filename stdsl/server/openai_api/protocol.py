"""The OpenAI API's request and response bodies as Pydantic models, one per type (the vLLM convention).

A request that does not fit its model is refused with a 400 naming the field before any engine
work.  Unknown fields are ignored, as OpenAI clients send extras; fields we accept but cannot
honour exactly (penalties, logprobs) are refused when set, never silently dropped.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

MAX_CHOICES = 8
MAX_STOP = 4
TOOL_NAME = r"^[a-zA-Z0-9_-]{1,64}$"

ToolName = Annotated[str, StringConstraints(pattern=TOOL_NAME)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TextPart(_Body):
    """A text part of a message's content (the only kind of part this server reads)."""

    type: Literal["text"]
    text: str


Content = str | list[TextPart]


class FunctionCall(_Body):
    name: ToolName
    arguments: str


class ToolCall(_Body):
    """A call the assistant made: `arguments` is JSON text."""

    id: str = Field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")
    type: Literal["function"] = "function"
    function: FunctionCall


class CustomCall(_Body):
    """A custom tool's call: its raw `input` (text in the tool's grammar)."""

    name: ToolName
    input: str


class CustomToolCall(_Body):
    """A call of an OpenAI custom tool (`{"type": "custom", "custom": {"name", "input"}}`)."""

    id: str = Field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")
    type: Literal["custom"] = "custom"
    custom: CustomCall


class SystemMessage(_Body):
    role: Literal["system", "developer"]
    content: Content
    name: str | None = None


class UserMessage(_Body):
    role: Literal["user"]
    content: Content
    name: str | None = None


class AssistantMessage(_Body):
    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[ToolCall | CustomToolCall] | None = None
    name: str | None = None


class ToolMessage(_Body):
    role: Literal["tool"]
    content: Content
    tool_call_id: str


Message = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]


class FunctionDefinition(_Body):
    name: ToolName
    description: str | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


class Tool(_Body):
    type: Literal["function"]
    function: FunctionDefinition


class CustomGrammar(_Body):
    syntax: Literal["lark", "regex"]
    definition: str


class CustomFormat(_Body):
    """A custom tool's input: `text` (any) or a `grammar`, nested as Chat Completions write it
    (`{"type": "grammar", "grammar": {"syntax", "definition"}}`) or flat as the Responses API does."""

    type: Literal["text", "grammar"]
    grammar: CustomGrammar | None = None
    syntax: Literal["lark", "regex"] | None = None
    definition: str | None = None


class CustomDefinition(_Body):
    name: ToolName
    description: str | None = None
    format: CustomFormat | None = None


class CustomTool(_Body):
    """An OpenAI custom tool: the model calls it with raw text in its format's language."""

    type: Literal["custom"]
    custom: CustomDefinition


AnyTool = Annotated[Tool | CustomTool, Field(discriminator="type")]


class NamedFunction(_Body):
    name: ToolName


class NamedToolChoice(_Body):
    type: Literal["function"]
    function: NamedFunction


class NamedCustomToolChoice(_Body):
    type: Literal["custom"]
    custom: NamedFunction


class JsonSchemaFormat(_Body):
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] | bool = Field(default=True, alias="schema")
    strict: bool | None = None


class ResponseFormatText(_Body):
    type: Literal["text"]


class ResponseFormatJsonObject(_Body):
    type: Literal["json_object"]


class ResponseFormatJsonSchema(_Body):
    type: Literal["json_schema"]
    json_schema: JsonSchemaFormat


class ResponseFormatStructuralTag(_Body):
    """XGrammar's structural tag: `format` (a tree of primitives), or the older `structures` and `triggers`."""

    type: Literal["structural_tag"]
    format: dict[str, Any] | None = None
    structures: list[dict[str, Any]] | None = None
    triggers: list[str] | None = None


ResponseFormat = Annotated[ResponseFormatText | ResponseFormatJsonObject | ResponseFormatJsonSchema
                           | ResponseFormatStructuralTag, Field(discriminator="type")]


class StreamOptions(_Body):
    include_usage: bool = False


class StructuredOutputs(_Body):
    """vLLM's `structured_outputs` field: exactly one of its members."""

    json_: dict[str, Any] | bool | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None


class ProgramCall(_Body):
    """A program to run with its arguments: a `.stc` program's `source`, or the `name` of a Python steps program the
    server was started with (`--steps-program`); the reply content is its typed result as JSON."""

    source: str | None = None
    name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_program(self) -> ProgramCall:
        if (self.source is None) == (self.name is None):
            raise ValueError("give a program's source or the name of a served steps program, not both or neither")
        return self


class _Sampling(_Body):
    """What chat and text completions share: sampling, stopping, streaming and the vLLM constraint extras."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=-1)
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1)
    n: int = Field(default=1, ge=1, le=MAX_CHOICES)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    logprobs: bool | int | None = None
    user: str | None = None
    guided_json: dict[str, Any] | bool | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    structured_outputs: StructuredOutputs | None = None
    program: ProgramCall | None = None


class ChatCompletionRequest(_Sampling):
    """POST /v1/chat/completions."""

    messages: list[Message]
    """The chat so far; empty only when a `program` supplies the messages (`chat_plan` checks)."""
    max_completion_tokens: int | None = Field(default=None, ge=1)
    response_format: ResponseFormat | None = None
    tools: list[AnyTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | NamedCustomToolChoice | None = None
    parallel_tool_calls: bool = True
    chat_template_kwargs: dict[str, Any] | None = None
    reasoning_budget: int | None = Field(default=None, ge=0)
    thinking_token_budget: int | None = Field(default=None, ge=0)
    tool_format: str | None = None
    top_logprobs: int | None = None


class CompletionRequest(_Sampling):
    """POST /v1/completions: a text prompt (or token ids); `max_tokens` defaults to 16 as in OpenAI's API."""

    prompt: str | list[int] | list[str] = ""
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None
    response_format: ResponseFormat | None = None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ReplyMessage(BaseModel):
    """The reply; a reasoning model's thinking text is `reasoning_content` (vLLM's and DeepSeek's field)."""

    role: Literal["assistant"] = "assistant"
    content: str | None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall | CustomToolCall] | None = None


class ChatChoice(BaseModel):
    index: int
    message: ReplyMessage
    finish_reason: str
    logprobs: None = None


def _now() -> int:
    return int(time.time())


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(default_factory=_now)
    model: str
    choices: list[ChatChoice]
    usage: Usage


class ToolCallDelta(BaseModel):
    index: int
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class CustomToolCallDelta(BaseModel):
    index: int
    id: str
    type: Literal["custom"] = "custom"
    custom: CustomCall


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDelta | CustomToolCallDelta] | None = None
    stdsl: list[dict[str, Any]] | None = None
    """The typed values this chunk completes (`path`, `value`, `complete`): an extension clients may ignore."""


class ChatCompletionChunk(BaseModel):
    """A streamed chunk; its choices (index, delta, finish_reason) are written by the stream itself."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int = Field(default_factory=_now)
    model: str
    choices: list[dict[str, Any]]
    usage: Usage | None = None


class CompletionChoice(BaseModel):
    index: int
    text: str
    finish_reason: str | None
    logprobs: None = None


class Completion(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int = Field(default_factory=_now)
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=_now)
    owned_by: str = "stdsl"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    """OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`."""

    error: ErrorDetail
