"""A prompt checked and turned into token ids: one renderer for the engine and the transformers processor.

A prompt is a str (one user message), chat messages ({"role", "content"} dicts) or token ids.
Every bad prompt is an OptionError naming where it is wrong, before any work; messages go through
the tokenizer's own chat template (Jinja2 sandbox) when it has one and `chat` is on.
"""

from __future__ import annotations

import numbers
import re
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any

from stdsl.errors import OptionError
from stdsl.model_files.tokenizer import Tokenizer

Prompt = str | Sequence[Mapping[str, Any]] | Sequence[int]
PROMPT_SHAPES = "a str, a non-empty list of {'role': str, 'content': str | None} messages, or a list of token ids"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(argument: str, where: str, text: str) -> None:
    """Refuse text holding a lone surrogate (a str that is not Unicode text: no tokenizer can encode it),
    naming where it is and the code point offset."""
    found = _LONE_SURROGATE.search(text)
    if found is not None:
        raise OptionError(argument, f"{where} holds a lone surrogate (U+{ord(found.group()):04X}) at offset "
                                    f"{found.start()}; text must be valid Unicode")


def check_prompt(prompt: Any, vocab_size: int | None = None) -> None:
    """Refuse a prompt that is not a str, chat messages or token ids (ids below `vocab_size` when given),
    or whose text holds a lone surrogate.

    An empty str is a valid prompt; an empty list is neither messages nor ids and is refused.
    """
    if isinstance(prompt, str):
        check_text("prompt", "prompt", prompt)
        return
    if not isinstance(prompt, (list, tuple)) or not prompt:
        raise OptionError("prompt", f"prompt must be {PROMPT_SHAPES}, got {reprlib.repr(prompt)}")
    if all(isinstance(item, Mapping) for item in prompt):
        for index, message in enumerate(prompt):
            _check_message(index, message)
        return
    limit = f" below {vocab_size}" if vocab_size is not None else ""
    for index, token in enumerate(prompt):
        if isinstance(token, bool) or not isinstance(token, numbers.Integral):
            raise OptionError("prompt", f"prompt[{index}] is {reprlib.repr(token)}; prompt must be {PROMPT_SHAPES}")
        if int(token) < 0 or (vocab_size is not None and int(token) >= vocab_size):
            raise OptionError("prompt", f"prompt[{index}] is token id {token}; token ids must be >= 0{limit}")


def _check_message(index: int, message: Mapping[Any, Any]) -> None:
    """Refuse a chat message without a str role and a str (or None) content."""
    role, content = message.get("role"), message.get("content")
    if not isinstance(role, str):
        raise OptionError("prompt", f"prompt[{index}] needs a str 'role', got {reprlib.repr(role)}")
    if "content" not in message or not (content is None or isinstance(content, str)):
        raise OptionError("prompt", f"prompt[{index}] needs a str (or None) 'content', got {reprlib.repr(content)}")
    for key, value in message.items():
        if isinstance(value, str):
            check_text("prompt", f"prompt[{index}][{key!r}]", value)


def prompt_ids(tokenizer: Tokenizer, prompt: Prompt, *, chat: bool = True, variables: Mapping[str, Any] | None = None,
               vocab_size: int | None = None) -> list[int]:
    """Token ids of the prompt: ids as given, else the chat template when the tokenizer has one and `chat`, else
    the text as `plain_text_ids` encodes it.

    A str is one user message; a list of {"role", "content"} dicts is used as is; `variables` go to the
    template; given ids must lie below `vocab_size` (the model's, default the tokenizer's). An empty result
    becomes the tokenizer's bos (or eos) token, so an empty prompt still decodes.
    """
    if not isinstance(prompt, str) and len(prompt) > 0 and all(isinstance(t, numbers.Integral) for t in prompt):
        ids = [int(t) for t in prompt]  # type: ignore[arg-type]
        limit = tokenizer.vocab_size if vocab_size is None else vocab_size
        bad = [t for t in ids if not 0 <= t < limit]
        if bad:
            raise OptionError("prompt", f"prompt token ids must lie in [0, {limit}), got {bad[0]}")
        return ids
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]  # type: ignore[arg-type]
    if chat and getattr(tokenizer, "chat_template", None):
        rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, **(variables or {}))
        ids = list(tokenizer.encode(rendered)) if isinstance(rendered, str) else [int(t) for t in rendered]
    else:
        text = prompt if isinstance(prompt, str) else "\n".join(str(m.get("content") or "") for m in messages)
        ids = plain_text_ids(tokenizer, text)
    if not ids:
        start = tokenizer.bos_id if tokenizer.bos_id is not None else (tokenizer.eos_ids or (0,))[0]
        ids = [int(start)]
    return ids


def plain_text_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """Token ids of a prompt read as plain text (no chat template): with the special tokens the tokenizer adds
    (Gemma's `<bos>`) unless the text starts with the BOS text itself, as mlx-lm's `generate` encodes a prompt; a
    model trained with BOS first degrades without it."""
    bos = tokenizer.bos_token
    return list(tokenizer.encode(text, add_special=not (bos and text.startswith(bos))))
