"""A chat request to a reasoning model: the template's thinking switch, the budget, and the spec wrapped after THINK.

`chat_template_kwargs` reach the chat template as variables (vLLM's and SGLang's field;
`enable_thinking` turns Qwen3's thinking on or off).  When the rendered prompt leaves the model to
think (`thinking_of`), the output constraint becomes a `reasoning` spec: the thinking block, then
the answer under the request's constraint (free text, a format, tool calls); a Harmony answer goes in
the final channel, or is the Harmony tool reply, which writes its own channel (`before_reply`).  `reasoning_budget`
(or vLLM's `thinking_token_budget`) closes the block after that many tokens.  The tags the model's tokenizer
has as one token (`tokens`) are written as those tokens.
"""

from __future__ import annotations

from typing import Any

from stdsl.compiler.special_tokens import token_markers
from stdsl.errors import OptionError
from stdsl.runtime.model.thinking_template import PROMPT_TAIL_TOKENS, before_reply, thinking_of, thinking_off
from stdsl.server.openai_api.errors import RequestError
from stdsl.server.openai_api.protocol import ChatCompletionRequest

RESERVED_VARIABLES = ("messages", "tools", "add_generation_prompt", "bos_token", "eos_token")
SWITCH = "enable_thinking"


def template_kwargs(request: ChatCompletionRequest) -> dict[str, Any]:
    """The request's `chat_template_kwargs`, checked: no variable the server sets itself, a bool switch."""
    kwargs = dict(request.chat_template_kwargs or {})
    for name in RESERVED_VARIABLES:
        if name in kwargs:
            raise RequestError(f"chat_template_kwargs.{name} is set by the server, not the request",
                               param=f"chat_template_kwargs.{name}", code="unsupported_parameter")
    if not isinstance(kwargs.get(SWITCH, False), bool):
        raise RequestError(f"chat_template_kwargs.{SWITCH} must be true or false",
                           param=f"chat_template_kwargs.{SWITCH}", code="invalid_value")
    return kwargs


def reasoning_budget(request: ChatCompletionRequest) -> int | None:
    """The thinking budget in tokens, by either name (both given must agree)."""
    ours, vllm = request.reasoning_budget, request.thinking_token_budget
    if ours is not None and vllm is not None and ours != vllm:
        raise RequestError(f"reasoning_budget {ours} and thinking_token_budget {vllm} disagree; give one",
                           param="thinking_token_budget", code="conflicting_parameters")
    return ours if ours is not None else vllm


def thinking_spec(request: ChatCompletionRequest, tokenizer: Any, prompt: list[int], spec: dict[str, Any] | None
                  ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The spec to compile (wrapped after the thinking block where the prompt leaves the model to think) and the
    engine options that go with it."""
    budget = reasoning_budget(request)
    switch = template_kwargs(request).get(SWITCH)
    tail = tokenizer.decode(prompt[-PROMPT_TAIL_TOKENS:])
    try:
        thinking = thinking_of(tokenizer.chat_template, tail, switch)
    except OptionError as error:
        raise RequestError(str(error), param=f"chat_template_kwargs.{SWITCH}", code="invalid_value") from None
    if thinking is not None and thinking.mode == "optional" and budget == 0:
        thinking = thinking_off(thinking.format)
    harmony_reply = spec is not None and spec.get("kind") == "tools" and spec.get("format") == "harmony"
    thinking = before_reply(thinking, harmony_reply)
    if thinking is None:
        return spec, {"reasoning": False}
    tokens = token_markers(thinking.format.markers, tokenizer.special_tokens)
    wrapped = {"kind": "reasoning", "format": thinking.format.name, "mode": thinking.mode, "answer": spec,
               "tokens": list(tokens)}
    return wrapped, {"reasoning_budget": budget}
