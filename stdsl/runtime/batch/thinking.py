"""A request's thinking block: found from the chat template and the prompt's end, composed before the answer once.

A request whose prompt leaves a reasoning model to think (`thinking_of`) decodes under THINK ·
CLOSE · ANSWER (`stdsl.compiler.reasoning`), and its row carries the `ReasoningPolicy` that splits
the thinking text from the answer and closes the block at `reasoning_budget`; a tag the tokenizer has as one
token is written as that token (`token_markers`).  A constraint that
already is a `ReasoningConstraint` (the server composes its own in the compile worker) is used as is.
"""

from __future__ import annotations

from typing import Any

from stdsl.caches import CacheKind
from stdsl.compiler.reasoning import ReasoningConstraint, think_then
from stdsl.compiler.special_tokens import token_markers
from stdsl.control.reasoning_budget import ReasoningPolicy
from stdsl.control.thinking_region import ThinkingRegion
from stdsl.runtime.model.thinking_template import (
    PROMPT_TAIL_TOKENS,
    Thinking,
    before_reply,
    thinking_of,
    thinking_off,
)
from stdsl.runtime.options import DecodeOptions

_COMPOSED: CacheKind[ReasoningConstraint] = CacheKind("composed thinking constraints")


def template_variables(options: DecodeOptions) -> dict[str, Any]:
    """What the chat template is told: `enable_thinking` when the request says (Qwen3's and vLLM's spelling)."""
    return {} if options.reasoning is None else {"enable_thinking": options.reasoning}


def thinking_for(model: Any, prompt_ids: list[int], options: DecodeOptions) -> Thinking | None:
    """The thinking block the output of this prompt has (None: none; an optional one with a zero budget is off)."""
    tokenizer = model.tokenizer
    tail = tokenizer.decode(prompt_ids[-PROMPT_TAIL_TOKENS:])
    thinking = thinking_of(getattr(tokenizer, "chat_template", None), tail, options.reasoning)
    if thinking is not None and thinking.mode == "optional" and options.reasoning_budget == 0:
        return thinking_off(thinking.format)
    return thinking


def harmony_reply(compiled: Any) -> bool:
    """Whether `compiled` is a Harmony tool reply (it writes its own channel header)."""
    source = getattr(compiled, "source", None)
    return getattr(compiled, "kind", None) == "tools" and isinstance(source, dict) and source.get("format") == "harmony"


def reasoning_constraint(model: Any, compiled: Any, prompt_ids: list[int], options: DecodeOptions
                         ) -> ReasoningConstraint | None:
    """The thinking block before `compiled` after this prompt, composed once per constraint and format (a
    `stdsl.caches` entry), or None."""
    if isinstance(compiled, ReasoningConstraint):
        return compiled
    thinking = before_reply(thinking_for(model, prompt_ids, options), harmony_reply(compiled))
    if thinking is None:
        return None
    tokens = token_markers(thinking.format.markers, getattr(model.tokenizer, "special_tokens", None) or {})
    return _COMPOSED.get((compiled,), lambda: think_then(compiled, thinking.format, thinking.mode, tokens),
                         (thinking.format, thinking.mode, tokens))


def reasoning_policy(constraint: ReasoningConstraint, options: DecodeOptions) -> ReasoningPolicy:
    """The row policy of a reasoning constraint under the request's `reasoning_budget`."""
    return ReasoningPolicy(ThinkingRegion(constraint.format, constraint.mode, constraint.tokens),
                           options.reasoning_budget)
