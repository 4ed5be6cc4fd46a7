"""A model's context window and the one check of a request against it, for the library and the server alike.

A prompt that fills the window leaves no room for output, and a row whose prompt and output pass it would
decode on positions the model was never trained for (or, before this check, run for minutes without an answer):
both are refused at once, naming the token counts.
"""

from __future__ import annotations

from typing import Any

from stdsl.errors import ContextLengthError


def context_length(model: Any) -> int | None:
    """The model's context window in tokens (its config's `max_position_embeddings`), None when it gives none."""
    size = getattr(getattr(getattr(model, "net", None), "args", None), "max_position_embeddings", None)
    return int(size) if size else None


def output_room(prompt_tokens: int, max_tokens: int | None, context: int, default: int | None = None) -> int:
    """The `max_tokens` a request gets within `context`: as asked, or `default` (else all the room) capped to
    the room the prompt leaves when not asked; ContextLengthError when the prompt leaves no room or the asked
    `max_tokens` does not fit beside it."""
    if prompt_tokens >= context:
        raise ContextLengthError("prompt", f"the prompt has {prompt_tokens} tokens; this model's context is "
                                           f"{context} tokens")
    room = context - prompt_tokens
    if max_tokens is None:
        return room if default is None else min(default, room)
    if max_tokens > room:
        raise ContextLengthError("max_tokens", f"max_tokens {max_tokens} plus the prompt's {prompt_tokens} tokens "
                                               f"exceed this model's context of {context} tokens (at most "
                                               f"{room} fit)")
    return max_tokens
