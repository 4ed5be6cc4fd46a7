"""A program's transcript: the text the model has been given and has written, its token ids, and its chat messages.

The ids grow only at the end: text appended since the last step is tokenized on its own and added, and a step's
generated tokens are added as the model wrote them. So the prompt of every step extends the sequence the engine
decoded for the previous one, and the prompt cache serves all of it: a step prefills only the text that is new.

Chat messages take their markers from the model's own chat template: rendering the messages so far with and
without one more message (whose content is a sentinel) gives the text that opens and closes it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from stdsl.errors import StdslError

SENTINEL = "\x00stdsl-step-content\x00"
ROLES = ("system", "user", "assistant")


class TranscriptError(StdslError):
    """The transcript cannot be built as asked (no chat template, a template that rewrites earlier messages)."""


@dataclass
class Transcript:
    """Text and token ids of one branch of a program; `messages` are the closed chat messages."""

    tokenizer: Any
    text: str = ""
    ids: list[int] = field(default_factory=list)
    tokenized: int = 0
    """How much of `text` `ids` holds: the rest was appended since and is tokenized at the next step."""
    messages: list[dict[str, str]] = field(default_factory=list)
    role: str | None = None
    """The role of the open message (None: no message is open)."""
    content_start: int = 0
    footer: str = ""

    def copy(self) -> Transcript:
        """An independent copy (a fork's branch starts from it)."""
        twin = copy.copy(self)
        twin.ids = list(self.ids)
        twin.messages = [dict(m) for m in self.messages]
        return twin

    def append(self, text: str) -> None:
        """Append literal text (tokenized with the next step's prompt)."""
        self.text += text

    def prompt(self) -> list[int]:
        """The token ids of the whole transcript, tokenizing only what was appended since the last step."""
        if self.tokenized < len(self.text):
            self.ids += self.tokenizer.encode(self.text[self.tokenized :])
            self.tokenized = len(self.text)
        return list(self.ids)

    def add_generated(self, text: str, tokens: list[int]) -> None:
        """Append a step's output: its tokens as the model wrote them when they spell exactly `text` (a stop string
        may cut the text short of the tokens: then the text is tokenized with the next step's prompt)."""
        exact = self.tokenized == len(self.text) and self.tokenizer.decode(tokens) == text
        self.text += text
        if exact:
            self.ids += tokens
            self.tokenized = len(self.text)

    def open(self, role: str) -> None:
        """Open a message of `role` (closing the open one first) with the chat template's markers."""
        if role not in ROLES:
            raise TranscriptError(f"a message's role must be one of {', '.join(ROLES)}, got {role!r}")
        self.close()
        if not getattr(self.tokenizer, "chat_template", None):
            raise TranscriptError("this model's tokenizer has no chat template: append plain text with s += ... "
                                  "instead of messages")
        before = self._render(self.messages)
        after = self._render([*self.messages, {"role": role, "content": SENTINEL}])
        at = after.find(SENTINEL, len(before))
        if not after.startswith(before) or at < 0:
            raise TranscriptError("this model's chat template renders earlier messages differently once a message "
                                  "is added, so a program cannot extend its transcript step by step")
        self.text += after[len(before) : at]
        self.footer = after[at + len(SENTINEL) :]
        self.role = role
        self.content_start = len(self.text)

    def close(self) -> None:
        """Close the open message, if any."""
        if self.role is None:
            return
        self.messages.append({"role": self.role, "content": self.text[self.content_start :]})
        self.text += self.footer
        self.role = None

    def _render(self, messages: list[dict[str, str]]) -> str:
        if not messages:
            return ""
        try:
            rendered = self.tokenizer.apply_chat_template(messages, add_generation_prompt=False)
        except StdslError:
            raise
        except Exception as error:  # the template's own refusal (e.g. roles that must alternate)
            raise TranscriptError(f"the chat template refused the messages: {type(error).__name__}: {error}") from error
        return str(rendered)
