"""A chat's prompt token ids: rendered by the chat template, with special tokens only where the template wrote them.

Text a client sends (message contents, names, tool definitions) may spell a control token, such as
`<|im_end|>`; encoded with the template's own text it would become that token and let a user message
open a system turn.  Each such spelling is swapped for a private marker before rendering, and after
rendering the marker is encoded as ordinary text, so the client's text is only ever text.  A prompt
without such spellings renders and encodes exactly as before (the prompt cache still matches).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from stdsl.model_files.chat_template import render_chat_template

MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"
_MARKER = re.compile(f"{MARK_OPEN}(\\d+){MARK_CLOSE}")


class _Shield:
    """Swaps the protected spellings in client text for markers, remembering which spelling each one stands for."""

    def __init__(self, specials: Sequence[str]) -> None:
        self.spellings = sorted({*specials, MARK_OPEN} - {""}, key=len, reverse=True)
        self.pattern = re.compile("|".join(re.escape(s) for s in self.spellings))
        self.index = {s: i for i, s in enumerate(self.spellings)}

    def text(self, value: str) -> str:
        return self.pattern.sub(lambda m: f"{MARK_OPEN}{self.index[m.group()]}{MARK_CLOSE}", value)

    def value(self, value: Any) -> Any:
        """`value` (strings, lists and mappings of them) with every protected spelling swapped for its marker."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self.value(member) for key, member in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(member) for member in value]
        return value


def chat_prompt_ids(tokenizer: Any, template: str, messages: Sequence[Mapping[str, Any]],
                    variables: Mapping[str, Any]) -> list[int]:
    """Render `messages` (with template `variables`) and encode it; the client's text never becomes a special token."""
    shield = _Shield(list(tokenizer.special_tokens))
    text = render_chat_template(template, shield.value(list(messages)), add_generation_prompt=True,
                                bos_token=tokenizer.bos_token, eos_token=tokenizer.eos_token,
                                **shield.value(dict(variables)))
    ids: list[int] = []
    start = 0
    for found in _MARKER.finditer(text):
        if int(found.group(1)) >= len(shield.spellings):
            continue
        if found.start() > start:
            ids += tokenizer.encode(text[start:found.start()])
        ids += tokenizer.encode_ordinary(shield.spellings[int(found.group(1))])
        start = found.end()
    if start < len(text) or not ids:
        ids += tokenizer.encode(text[start:])
    return ids
