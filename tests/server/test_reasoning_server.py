"""A reasoning model behind the real server and the `openai` client: the thinking text in `reasoning_content`,
the constrained answer in `content` (or tool calls), streamed and not, and `usage` counting both."""
from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.runtime.thinking_templates import CHOOSING, CLOSE, OPENING, with_template
from tests.server.server_fixtures import running_server

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
    "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Ann Lee is 34. Who is it?"}]


@pytest.fixture(scope="module")
def client(tiny_model):
    with running_server(with_template(tiny_model, OPENING, "tiny-thinking"), max_rows=4) as url:
        yield openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)


def test_thinking_is_reasoning_content_and_the_answer_is_content(client) -> None:
    for budget_field in ("reasoning_budget", "thinking_token_budget"):
        reply = client.chat.completions.create(model="tiny-thinking", messages=ASK, response_format=FORMAT,
                                               max_tokens=48, temperature=1.0, seed=4, extra_body={budget_field: 5})
        message = reply.choices[0].message
        jsonschema.validate(json.loads(message.content), PERSON)
        assert isinstance(message.reasoning_content, str) and CLOSE not in message.reasoning_content
        assert reply.usage.completion_tokens <= 48 and reply.choices[0].finish_reason == "stop"
        assert reply.usage.completion_tokens > len(message.content) // 8


def test_streamed_deltas_keep_thinking_and_answer_apart(client) -> None:
    thinking, content = "", ""
    stream = client.chat.completions.create(model="tiny-thinking", messages=ASK, response_format=FORMAT,
                                            max_tokens=40, temperature=1.0, seed=7, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"reasoning_budget": 6})
    usage = None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            thinking += getattr(choice.delta, "reasoning_content", None) or ""
            content += choice.delta.content or ""
    jsonschema.validate(json.loads(content), PERSON)
    assert thinking and CLOSE not in thinking and "{" not in thinking[-1:]
    assert usage is not None and usage.completion_tokens <= 40


def test_tool_calls_follow_the_thinking_block(client) -> None:
    reply = client.chat.completions.create(model="tiny-thinking", messages=ASK, tools=[WEATHER], tool_choice="required",
                                           max_tokens=60, temperature=1.0, seed=1, extra_body={"reasoning_budget": 4})
    message = reply.choices[0].message
    assert message.tool_calls and message.reasoning_content is not None
    jsonschema.validate(json.loads(message.tool_calls[0].function.arguments), WEATHER["function"]["parameters"])


def test_enable_thinking_false_leaves_no_reasoning_and_bad_fields_are_400(client) -> None:
    reply = client.chat.completions.create(model="tiny-thinking", messages=ASK, response_format=FORMAT, max_tokens=40,
                                           extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert reply.choices[0].message.reasoning_content is None
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)
    for body, param in (({"chat_template_kwargs": {"enable_thinking": "yes"}}, "chat_template_kwargs.enable_thinking"),
                        ({"reasoning_budget": 2, "thinking_token_budget": 3}, "thinking_token_budget"),
                        ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs.messages")):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="tiny-thinking", messages=ASK, max_tokens=8, extra_body=body)
        assert caught.value.body["param"] == param
    with pytest.raises(openai.BadRequestError, match="no valid output fits"):
        client.chat.completions.create(model="tiny-thinking", messages=ASK, response_format=FORMAT, max_tokens=4)


def test_a_model_that_may_choose_thinks_when_asked(tiny_model) -> None:
    with running_server(with_template(tiny_model, CHOOSING, "tiny-choosing"), max_rows=2) as url:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        asked = {"reasoning_budget": 3, "chat_template_kwargs": {"enable_thinking": True}}
        reply = client.chat.completions.create(model="tiny-choosing", messages=ASK, response_format=FORMAT,
                                               max_tokens=48, extra_body=asked)
        message = reply.choices[0].message
        assert message.reasoning_content is not None
        jsonschema.validate(json.loads(message.content), PERSON)
