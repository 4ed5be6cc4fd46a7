"""The server through the official `openai` client (sync, async, streaming), on a real local port, tiny model."""
from __future__ import annotations

import asyncio
import json

import jsonschema
import openai
import pytest

from tests.server.server_fixtures import metric

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 20}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "maxLength": 20}, "limit": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["query", "limit"], "additionalProperties": False}}}
TOOLS = [WEATHER, SEARCH]
PARAMETERS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def _person_format(schema: dict = PERSON) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}}


def _check_calls(message, names: set[str]) -> None:
    assert message.tool_calls, message
    for call in message.tool_calls:
        assert call.type == "function" and call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), PARAMETERS[call.function.name])


def test_models_lists_the_served_model(client) -> None:
    assert [m.id for m in client.models.list().data] == ["tiny-random-llama"]


def test_json_schema_replies_validate_and_n_gives_valid_choices(client) -> None:
    reply = client.chat.completions.create(model="m", messages=ASK, response_format=_person_format(), n=3,
                                           max_tokens=40, temperature=1.0, seed=3)
    assert [c.index for c in reply.choices] == [0, 1, 2]
    for choice in reply.choices:
        jsonschema.validate(json.loads(choice.message.content), PERSON)
        assert choice.finish_reason in ("stop", "length")
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_json_object_replies_parse(client) -> None:
    reply = client.chat.completions.create(model="m", messages=ASK, response_format={"type": "json_object"},
                                           max_tokens=30, temperature=0)
    assert isinstance(json.loads(reply.choices[0].message.content), dict)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "search"}}])
def test_tool_calls_have_typed_arguments(client, choice) -> None:
    reply = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=choice,
                                           max_tokens=60, temperature=0)
    names = {"search"} if isinstance(choice, dict) else set(PARAMETERS)
    _check_calls(reply.choices[0].message, names)
    assert reply.choices[0].finish_reason in ("tool_calls", "repetition", "length")


def test_tool_choice_auto_and_none(client) -> None:
    for seed in range(3):
        reply = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=40,
                                               temperature=1.0, seed=seed, parallel_tool_calls=False)
        message = reply.choices[0].message
        assert "<tool_call>" not in (message.content or "")
        assert len(message.tool_calls or ()) <= 1
        if message.tool_calls:
            _check_calls(message, set(PARAMETERS))
    reply = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="none",
                                           max_tokens=30, temperature=0)
    assert reply.choices[0].message.tool_calls is None
    assert "<tool_call>" not in reply.choices[0].message.content


def test_a_tool_round_trip_is_served_from_the_prompt_cache(client, base_url) -> None:
    first = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required",
                                           parallel_tool_calls=False, max_tokens=60, temperature=0)
    call = first.choices[0].message.tool_calls[0]
    hits_before = metric(base_url, "prompt_cache_hit_tokens_total")
    history = ASK + [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'}]
    second = client.chat.completions.create(model="m", messages=history, tools=TOOLS, max_tokens=20,
                                            temperature=0)
    served = metric(base_url, "prompt_cache_hit_tokens_total") - hits_before
    assert served >= first.usage.prompt_tokens - 2
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens - 2


def test_stop_ends_free_text_before_the_stop_string(client) -> None:
    full = client.chat.completions.create(model="m", messages=ASK, max_tokens=24, temperature=0)
    text = full.choices[0].message.content
    assert full.choices[0].finish_reason == "length" and full.usage.completion_tokens == 24
    stop = text[len(text) // 2: len(text) // 2 + 3]
    cut = client.chat.completions.create(model="m", messages=ASK, max_tokens=24, temperature=0, stop=[stop])
    assert cut.choices[0].message.content == text[: text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_streaming_gives_the_same_text_and_usage(client) -> None:
    whole = client.chat.completions.create(model="m", messages=ASK, max_tokens=20, temperature=0)
    chunks = list(client.chat.completions.create(model="m", messages=ASK, max_tokens=20, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens == 20


def test_streamed_tool_calls(client) -> None:
    chunks = list(client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required",
                                                 max_tokens=60, temperature=0, stream=True))
    deltas = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or ())]
    assert deltas
    for delta in deltas:
        jsonschema.validate(json.loads(delta.function.arguments), PARAMETERS[delta.function.name])
    assert [d.index for d in deltas] == list(range(len(deltas)))


def test_async_client_serves_requests_together(base_url) -> None:
    async def run() -> list:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)
        jobs = [client.chat.completions.create(model="m", messages=ASK, response_format=_person_format(),
                                               max_tokens=40, temperature=0) for _ in range(4)]
        return await asyncio.gather(*jobs)

    replies = asyncio.run(run())
    contents = {r.choices[0].message.content for r in replies}
    assert len(contents) == 1
    jsonschema.validate(json.loads(contents.pop()), PERSON)


def test_vllm_extras_and_programs(client) -> None:
    choice = client.chat.completions.create(model="m", messages=ASK, max_tokens=10, temperature=0,
                                            extra_body={"guided_choice": ["yes", "no"]})
    assert choice.choices[0].message.content in ("yes", "no")
    regex = client.chat.completions.create(model="m", messages=ASK, max_tokens=10, temperature=0,
                                           extra_body={"guided_regex": "[0-9]{3}-[a-z]{2}"})
    assert len(regex.choices[0].message.content) == 6
    schema = client.chat.completions.create(model="m", messages=ASK, max_tokens=40, temperature=0,
                                            extra_body={"structured_outputs": {"json": PERSON}})
    jsonschema.validate(json.loads(schema.choices[0].message.content), PERSON)
    program = {"source": 'param city: str\nuser """Weather in {{ city }}?"""\n'
                         'output """{temp: int(-50..50)} degrees, {sky: "sunny" | "rainy"}"""',
               "arguments": {"city": "Oslo"}}
    result = client.chat.completions.create(model="m", messages=ASK, max_tokens=20, temperature=0,
                                            extra_body={"program": program})
    value = json.loads(result.choices[0].message.content)
    assert -50 <= value["temp"] <= 50 and value["sky"] in ("sunny", "rainy")


def test_text_completions(client) -> None:
    reply = client.completions.create(model="m", prompt="Once upon a time", max_tokens=8, temperature=0, n=2)
    assert len(reply.choices) == 2 and reply.choices[0].text == reply.choices[1].text
    assert reply.usage.completion_tokens == 16
    regex = client.completions.create(model="m", prompt="Code:", max_tokens=8, temperature=0,
                                      extra_body={"guided_regex": "[A-Z]{4}"})
    assert len(regex.choices[0].text) == 4 and regex.choices[0].text.isupper()


def test_a_required_call_closes_under_every_feasible_budget(client) -> None:
    named = {"type": "function", "function": {"name": "search"}}
    feasible = []
    for budget in range(8, 60, 2):
        try:
            reply = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice=named,
                                                   max_tokens=budget, temperature=1.0, seed=budget)
        except openai.BadRequestError as error:
            assert not feasible and error.body["code"] == "max_tokens_too_small"
            continue
        feasible.append(budget)
        _check_calls(reply.choices[0].message, {"search"})
        assert reply.usage.completion_tokens <= budget
    assert len(feasible) > 5
