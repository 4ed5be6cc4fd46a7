"""32 requests over 16 distinct schemas and tool sets at once: every reply valid, grammar memory bounded by the
cache's byte limit as /metrics reports it, and each reply equal to the same request served alone (greedy)."""
from __future__ import annotations

import asyncio
import json

import jsonschema
import openai
import pytest

from tests.server.server_fixtures import metric, running_server

CACHE_BYTES = 24 << 10  # the 16 grammars hold about 57 KB, the largest 5.4 KB: some must be evicted
KINDS = ["string", "integer", "boolean"]


def _schema(i: int) -> dict:
    properties = {f"f{i}_{k}": {"type": KINDS[(i + k) % 3]} for k in range(2 + i % 3)}
    return {"type": "object", "properties": properties, "required": sorted(properties), "additionalProperties": False}


def _tools(i: int) -> list[dict]:
    return [{"type": "function", "function": {"name": f"tool_{i}_{k}", "parameters": _schema(i + k)}}
            for k in range(2)]


def _requests() -> list[dict]:
    out = []
    for i in range(8):
        ask = [{"role": "user", "content": f"Request {i}: fill it in."}]
        out.append({"messages": ask, "response_format": {"type": "json_schema", "json_schema": {
            "name": f"s{i}", "schema": _schema(i), "strict": True}}})
        out.append({"messages": ask, "tools": _tools(i), "tool_choice": "required"})
    return out * 2


def _check(request: dict, reply) -> tuple:
    message = reply.choices[0].message
    if "tools" in request:
        parameters = {t["function"]["name"]: t["function"]["parameters"] for t in request["tools"]}
        assert message.tool_calls
        for call in message.tool_calls:
            jsonschema.validate(json.loads(call.function.arguments), parameters[call.function.name])
        return tuple((c.function.name, c.function.arguments) for c in message.tool_calls)
    jsonschema.validate(json.loads(message.content), request["response_format"]["json_schema"]["schema"])
    return (message.content,)


@pytest.mark.timeout(900)
def test_32_requests_over_16_grammars(tiny_model) -> None:
    requests = _requests()
    assert len({json.dumps(r, sort_keys=True) for r in requests}) == 16
    with running_server(tiny_model, max_rows=8, cache_bytes=CACHE_BYTES) as url:
        async def together() -> list:
            client = openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0, timeout=600)
            return await asyncio.gather(*(client.chat.completions.create(
                model="m", max_tokens=64, temperature=0, **r) for r in requests))

        batched = [_check(r, reply) for r, reply in zip(requests, asyncio.run(together()))]
        assert metric(url, "grammar_compiles_total") == 16
        assert metric(url, "grammar_bytes") <= metric(url, "grammar_bytes_limit") == CACHE_BYTES
        assert metric(url, "grammar_evictions_total") > 0
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=600)
        alone = [_check(r, client.chat.completions.create(model="m", max_tokens=64, temperature=0, **r))
                 for r in requests[:16]]
        assert metric(url, "grammar_bytes") <= CACHE_BYTES
    assert batched[:16] == alone
    assert batched[16:] == alone
