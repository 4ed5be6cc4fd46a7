"""End to end with the real SmolLM2 behind `stcon serve` in its own process: schema replies, a typed tool round
trip served from the prompt cache, streaming, and the bearer token."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import jsonschema
import openai
import pytest

from tests.server.server_fixtures import free_port, metric

KEY = "e2e-key"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def served(smollm2_gguf_path):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "stdsl.cli", "serve", "--port", str(port), "--max-rows", "4",
                                "--api-key", KEY], env=dict(os.environ), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"stcon serve did not start: {process.stderr.read() if process.stderr else ''}")
        time.sleep(0.3)
    try:
        yield base + "/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served, api_key=KEY, max_retries=0, timeout=300)


def test_a_schema_reply_validates(client) -> None:
    reply = client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Invent a person with a name and an age."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}},
        max_tokens=40, temperature=0)
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)


def test_a_typed_tool_round_trip_hits_the_prompt_cache(client, served) -> None:
    ask = [{"role": "user", "content": "What is the weather in Paris in celsius?"}]
    first = client.chat.completions.create(model="smollm2", messages=ask, tools=[WEATHER], tool_choice="required",
                                           parallel_tool_calls=False, max_tokens=60, temperature=0)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, WEATHER["function"]["parameters"])
    headers = {"Authorization": f"Bearer {KEY}"}
    served_before = metric(served, "prompt_cache_hit_tokens_total", headers)
    history = ask + [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 18})}]
    second = client.chat.completions.create(model="smollm2", messages=history, tools=[WEATHER], max_tokens=40,
                                            temperature=0)
    assert metric(served, "prompt_cache_hit_tokens_total", headers) - served_before >= first.usage.prompt_tokens - 2
    message = second.choices[0].message
    assert message.content or message.tool_calls
    for later in message.tool_calls or ():
        jsonschema.validate(json.loads(later.function.arguments), WEATHER["function"]["parameters"])


def test_streaming_and_auth(client, served) -> None:
    chunks = list(client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Say hello."}], max_tokens=12, temperature=0,
        stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and chunks[-1].usage.completion_tokens <= 12
    refused = httpx.post(served + "/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
    assert refused.status_code == 401
