"""The server's `finish_reason` is "length" when `max_tokens` shaped a constrained reply (the budget closed a value
early: valid JSON, but not the reply a larger budget gives) and "stop" when it did not (issue 28 item 7), on chat
and text completions, streamed or not, through the `openai` client on a real local port."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.server.server_fixtures import running_server

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "bio": {"type": "string", "maxLength": 12}},
          "required": ["name", "bio"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
ASK = [{"role": "user", "content": "Invent a person."}]


@pytest.fixture(scope="module")
def client(tiny_model):
    with running_server(tiny_model, max_rows=4) as url:
        yield openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)


def _chat(client, max_tokens: int, stream: bool = False) -> tuple[str, str | None, int]:
    if not stream:
        reply = client.chat.completions.create(model="m", messages=ASK, response_format=FORMAT, temperature=0,
                                               max_tokens=max_tokens)
        return reply.choices[0].message.content, reply.choices[0].finish_reason, reply.usage.completion_tokens
    chunks = list(client.chat.completions.create(model="m", messages=ASK, response_format=FORMAT, temperature=0,
                                                 max_tokens=max_tokens, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, [c.choices[0].finish_reason for c in chunks if c.choices][-1], 0


def test_chat_replies_say_length_exactly_when_the_budget_shaped_them(client) -> None:
    full, reason, tokens = _chat(client, 200)
    assert reason == "stop"
    jsonschema.validate(json.loads(full), PERSON)
    for stream in (False, True):
        cut, cut_reason, _ = _chat(client, tokens - 3, stream)
        jsonschema.validate(json.loads(cut), PERSON)
        assert cut != full and cut_reason == "length", (stream, cut)
        same, same_reason, _ = _chat(client, 200, stream)
        assert same == full and same_reason == "stop"


def test_text_completions_say_length_when_the_budget_closed_the_value(client) -> None:
    body = {"guided_json": PERSON}
    full = client.completions.create(model="m", prompt="Person:", max_tokens=200, temperature=0, extra_body=body)
    assert full.choices[0].finish_reason == "stop"
    cut = client.completions.create(model="m", prompt="Person:", max_tokens=full.usage.completion_tokens - 3,
                                    temperature=0, extra_body=body)
    jsonschema.validate(json.loads(cut.choices[0].text), PERSON)
    assert cut.choices[0].text != full.choices[0].text and cut.choices[0].finish_reason == "length"
