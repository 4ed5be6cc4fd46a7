"""How much one request, and one client, may ask of the server: rows, prompt bytes and tokens.

A request past a per-request limit is a 400 naming the limit; a client (its API key, or its address
when the server has none) whose rows in flight would pass a per-client limit is a 429 naming it, so
one client cannot take the engine (300 prompts at n=8 were 2,400 rows holding it for a minute).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from stdsl.errors import StdslError
from stdsl.server.openai_api.errors import RequestError
from stdsl.server.openai_api.protocol import ChatCompletionRequest, CompletionRequest
from stdsl.server.requests.chat_render import content_text


@dataclass(frozen=True)
class Limits:
    """The server's limits; each is an `stcon serve` option of the same name (docs/serving.md)."""

    max_body_bytes: int = 4 << 20
    max_request_rows: int = 64
    max_prompt_bytes: int = 1 << 20
    max_request_tokens: int = 1 << 16
    max_client_rows: int = 64
    max_client_tokens: int = 1 << 18

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise StdslError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")


def request_rows(body: ChatCompletionRequest | CompletionRequest) -> int:
    """Rows the request would decode: its prompts times `n`."""
    prompt = getattr(body, "prompt", "")
    prompts = len(prompt) if isinstance(prompt, list) and prompt and isinstance(prompt[0], str) else 1
    return prompts * body.n


def prompt_bytes(body: ChatCompletionRequest | CompletionRequest) -> int:
    """UTF-8 bytes of the text the client sent to be read: message contents and tools, or the prompts."""
    if isinstance(body, CompletionRequest):
        prompt = body.prompt
        texts = [prompt] if isinstance(prompt, str) else [p for p in prompt if isinstance(p, str)]
        return sum(len(t.encode("utf-8")) for t in texts)
    size = sum(len(content_text(m.content).encode("utf-8")) for m in body.messages)
    if body.tools:
        size += len(json.dumps([t.model_dump() for t in body.tools], ensure_ascii=False).encode("utf-8"))
    return size


def _over(what: str, asked: int, limit: int, option: str) -> RequestError:
    return RequestError(f"the request asks for {asked} {what}; this server allows at most {limit} per request "
                        f"({option})", code="request_too_large")


def check_request(body: ChatCompletionRequest | CompletionRequest, limits: Limits) -> None:
    """The per-request limits that can be read off the body, before any tokenization (400)."""
    rows = request_rows(body)
    if rows > limits.max_request_rows:
        error = _over("rows (prompts x n)", rows, limits.max_request_rows, "--max-request-rows")
        error.param = "n" if rows == body.n else "prompt"
        raise error
    size = prompt_bytes(body)
    if size > limits.max_prompt_bytes:
        error = _over("prompt bytes", size, limits.max_prompt_bytes, "--max-prompt-bytes")
        error.param = "prompt" if isinstance(body, CompletionRequest) else "messages"
        raise error


def check_tokens(rows: int, max_tokens: int, limits: Limits) -> int:
    """The request's total token budget (rows x max_tokens), or a 400 past `max_request_tokens`."""
    tokens = rows * max_tokens
    if tokens > limits.max_request_tokens:
        error = _over("tokens (rows x max_tokens)", tokens, limits.max_request_tokens, "--max-request-tokens")
        error.param = "max_tokens"
        raise error
    return tokens


@dataclass
class ClientLedger:
    """Rows and tokens in flight per client; `admit` refuses with a 429 what would pass a client's limit."""

    limits: Limits
    rows: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)

    def admit(self, client: str, rows: int, tokens: int) -> None:
        held_rows, held_tokens = self.rows.get(client, 0), self.tokens.get(client, 0)
        for what, held, asked, limit, option in (
                ("rows", held_rows, rows, self.limits.max_client_rows, "--max-client-rows"),
                ("tokens", held_tokens, tokens, self.limits.max_client_tokens, "--max-client-tokens")):
            if held + asked > limit:
                raise RequestError(f"this client has {held} {what} in flight and asks for {asked} more; the limit "
                                   f"is {limit} per client ({option}); retry when some finish", status=429,
                                   code="client_limit_exceeded", kind="rate_limit_error", retry_after=1)
        self.rows[client] = held_rows + rows
        self.tokens[client] = held_tokens + tokens

    def release(self, client: str, rows: int, tokens: int) -> None:
        self.rows[client] = self.rows.get(client, 0) - rows
        self.tokens[client] = self.tokens.get(client, 0) - tokens
        if self.rows[client] <= 0:
            del self.rows[client]
            self.tokens.pop(client, None)


def client_key(request: Any, api_key: str | None) -> str:
    """Whom the per-client limits count: the API key when the server has one, else the client's address."""
    if api_key is not None:
        return "key"
    client = getattr(request, "client", None)
    return f"address:{client.host}" if client is not None else "address:unknown"
