"""Valid requests of every kind the server takes, and the oracle for its 200 replies: each choice obeys the
constraint its request asked for (a JSON Schema, JSON object, regex, choice or typed tool calls), streamed or not."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Tell me about Paris."}]
CHAT = "/chat/completions"
TEXT = "/completions"

SEEDS: list[tuple[str, dict[str, Any]]] = [
    (CHAT, {"model": "m", "messages": ASK, "max_tokens": 6, "temperature": 0}),
    (CHAT, {"model": "m", "messages": ASK, "max_tokens": 24, "response_format": {
        "type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}}),
    (CHAT, {"model": "m", "messages": ASK, "max_tokens": 16, "response_format": {"type": "json_object"}}),
    (CHAT, {"model": "m", "messages": ASK, "max_tokens": 48, "tools": [WEATHER], "tool_choice": "required"}),
    (CHAT, {"model": "m", "messages": ASK, "max_tokens": 8, "tools": [WEATHER]}),
    (CHAT, {"model": "m", "messages": ASK, "max_tokens": 8, "guided_regex": "[a-c]{2,5}"}),
    (CHAT, {"model": "m", "messages": ASK, "max_tokens": 4, "guided_choice": ["yes", "no"], "n": 2}),
    (CHAT, {"model": "m", "messages": ASK, "max_tokens": 24, "stream": True, "guided_json": PERSON,
            "stream_options": {"include_usage": True}}),
    (CHAT, {"model": "m", "messages": ASK, "max_tokens": 48, "stream": True, "tools": [WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    (TEXT, {"model": "m", "prompt": "Once upon", "max_tokens": 6, "temperature": 0}),
    (TEXT, {"model": "m", "prompt": ["a", "b"], "max_tokens": 6, "n": 2, "structured_outputs": {"regex": "[0-9]+"}}),
    (TEXT, {"model": "m", "prompt": [1, 2, 3], "max_tokens": 4, "stream": True}),
]


class ReplyBroken(AssertionError):
    """A 200 reply that does not obey its request's constraint (or is not a well-formed reply)."""


@dataclass
class Choice:
    content: str = ""
    calls: list[tuple[str, str]] = field(default_factory=list)
    finish: str | None = None


def read_choices(path: str, text: str, stream: bool) -> list[Choice]:
    """The choices of a 200 reply, from its JSON body or its server-sent events."""
    if stream:
        return _stream_choices(path, text)
    reply = json.loads(text)
    choices = []
    for choice in reply["choices"]:
        if path == CHAT:
            message = choice["message"]
            calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or ()]
            choices.append(Choice(message.get("content") or "", calls, choice["finish_reason"]))
        else:
            choices.append(Choice(choice["text"], [], choice["finish_reason"]))
    return choices


def _stream_choices(path: str, text: str) -> list[Choice]:
    choices: dict[int, Choice] = {}
    events = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    for event in events:
        error = json.loads(event).get("error") if event.startswith("{") else None
        if error is not None:  # a refusal found while decoding (a 4xx's body) ends the stream; a server error fails
            if error["type"] == "server_error":
                raise ReplyBroken(f"the stream carries a server error: {error}")
            return []
    if not events or events[-1] != "[DONE]":
        raise ReplyBroken(f"the stream does not end with [DONE]: {text[-300:]!r}")
    for event in events[:-1]:
        chunk = json.loads(event)
        for item in chunk["choices"]:
            choice = choices.setdefault(item["index"], Choice())
            if path == CHAT:
                delta = item.get("delta", {})
                choice.content += delta.get("content") or ""
                choice.calls += [(c["function"]["name"], c["function"]["arguments"]) for c in delta.get("tool_calls")
                                 or ()]
            else:
                choice.content += item.get("text") or ""
            choice.finish = item.get("finish_reason") or choice.finish
    return [choices[i] for i in sorted(choices)]


def _schema_of(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _check_json(content: str, schema: Any) -> None:
    try:
        value = json.loads(content)
    except ValueError:
        raise ReplyBroken(f"not JSON: {content!r}") from None
    if schema is not None:
        try:
            jsonschema.validate(value, schema)
        except jsonschema.ValidationError as error:
            raise ReplyBroken(f"{content!r} breaks its schema: {error.message}") from None


def _python_regex(pattern: str) -> bool:
    """Whether Python's `re` reads `pattern` (the oracle; a pattern it cannot read is not checked)."""
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def check_reply(path: str, body: dict[str, Any], text: str, stream: bool) -> int:
    """Check a 200 reply to `body` (a stream of events when `stream`) against its constraint; the choices checked."""
    choices = read_choices(path, text, stream)
    if not choices and not stream:
        raise ReplyBroken("a reply without choices")
    outputs = body.get("structured_outputs") or {}
    response_format = body.get("response_format") or {}
    for choice in choices:
        if choice.finish is None:
            raise ReplyBroken("a choice without a finish_reason")
        if body.get("tools") and body.get("tool_choice") != "none":
            tools = {t["function"]["name"]: t["function"].get("parameters") or {} for t in body["tools"]}
            for name, arguments in choice.calls:
                if name not in tools:
                    raise ReplyBroken(f"a call of {name!r}, not among {sorted(tools)}")
                _check_json(arguments, tools[name])
                if not isinstance(json.loads(arguments), dict):
                    raise ReplyBroken(f"arguments that are not an object: {arguments!r}")
            if body.get("tool_choice") in ("required",) or isinstance(body.get("tool_choice"), dict):
                if not choice.calls and choice.finish != "length":
                    raise ReplyBroken(f"tool_choice {body['tool_choice']!r} but no call: {choice}")
            continue
        if response_format.get("type") == "json_schema":
            spec = response_format["json_schema"]
            _check_json(choice.content, _schema_of(spec.get("schema", True)) if spec.get("strict") is not False
                        else None)
        elif response_format.get("type") == "json_object" or outputs.get("json_object"):
            _check_json(choice.content, {"type": "object"})
        elif body.get("guided_json") is not None or outputs.get("json") is not None:
            _check_json(choice.content, _schema_of(body.get("guided_json", outputs.get("json"))))
        elif body.get("guided_regex") is not None or outputs.get("regex") is not None:
            pattern = body.get("guided_regex", outputs.get("regex"))
            if _python_regex(pattern) and re.fullmatch(pattern, choice.content) is None:
                raise ReplyBroken(f"{choice.content!r} does not match {pattern!r}")
        elif body.get("guided_choice") is not None or outputs.get("choice") is not None:
            options = body.get("guided_choice") or outputs.get("choice")
            if choice.content not in options:
                raise ReplyBroken(f"{choice.content!r} is not one of {options!r}")
    return len(choices)
