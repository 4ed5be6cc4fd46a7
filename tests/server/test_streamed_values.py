"""Typed values in streamed chat replies (`delta.stdsl`), through the official `openai` client on a real local port
(tiny model): the client parses the chunks as usual, and every value sent equals the final content's at its path."""
from __future__ import annotations

import json
from typing import Any

import httpx
import openai
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ASK = [{"role": "user", "content": "Describe a person."}]
LEAVES = st.sampled_from([{"type": "integer", "minimum": 0, "maximum": 99}, {"type": "boolean"},
                          {"type": "string", "maxLength": 6}, {"enum": ["a", "b", None]},
                          {"type": "array", "items": {"type": "number"}, "maxItems": 2}])


def at(document: Any, path: list[str | int]) -> Any:
    for step in path:
        document = document[step]
    return document


def streamed(client: openai.OpenAI, **request: Any) -> tuple[str, list[dict[str, Any]], str | None]:
    """The streamed content, the typed values of every chunk (read off the parsed chunks' extra member) and the
    finish reason."""
    chunks = list(client.chat.completions.create(model="m", messages=ASK, stream=True, temperature=0, **request))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    values = [v for c in chunks if c.choices for v in (getattr(c.choices[0].delta, "stdsl", None) or [])]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
    return content, values, finish


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(st.text("pqrs", min_size=1, max_size=3), min_size=1, max_size=3, unique=True), data=st.data())
def test_streamed_values_equal_the_final_content(client, names, data) -> None:
    schema = {"type": "object", "required": names, "additionalProperties": False,
              "properties": {name: data.draw(LEAVES) for name in names}}
    content, values, _ = streamed(client, max_tokens=80, response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}})
    final = json.loads(content)  # valid even when the budget shaped it (finish_reason "length")
    for value in values:
        expected = at(final, value["path"])
        assert value["value"] == expected if value["complete"] else expected.startswith(value["value"])
    assert values[-1] == {"path": [], "value": final, "complete": True}
    assert [v["path"][0] for v in values if v["complete"] and len(v["path"]) == 1] == names


def test_a_program_streams_each_field_as_it_ends(client) -> None:
    program = {"source": 'param city: str\nuser """Weather in {{ city }}?"""\n'
                         'output """{temp: int(-50..50)} degrees, {sky: "sunny" | "rainy"}"""',
               "arguments": {"city": "Oslo"}}
    content, values, _ = streamed(client, max_tokens=20, extra_body={"program": program})
    assert values == [{"path": [name], "value": value, "complete": True}
                      for name, value in json.loads(content).items()]


def test_a_regex_reply_sends_its_value_once_and_free_text_none(client) -> None:
    content, values, _ = streamed(client, max_tokens=10, extra_body={"guided_regex": "[0-9]{3}-[a-z]{2}"})
    assert values == [{"path": [], "value": content, "complete": True}]
    _, free, _ = streamed(client, max_tokens=6)
    assert free == []


def test_values_arrive_in_the_raw_event_stream_beside_the_content(base_url) -> None:
    body = {"model": "m", "messages": ASK, "stream": True, "temperature": 0, "max_tokens": 30,
            "guided_json": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}}
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=120) as reply:
        events = [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: {")]
    deltas = [e["choices"][0]["delta"] for e in events if e.get("choices")]
    assert any("stdsl" in delta for delta in deltas)
    assert all("stdsl" not in delta or delta["stdsl"] for delta in deltas)
