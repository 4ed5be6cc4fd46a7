"""Bad input and faults: malformed bodies never give a 5xx, errors are OpenAI bodies naming the field,
a client that disconnects mid-stream frees its row, overload gives 429 with Retry-After, the API key is enforced."""
from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.server_fixtures import metric, running_server

BASE = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}
FIELDS = ["model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop", "seed",
          "stream", "stream_options", "response_format", "tools", "tool_choice", "parallel_tool_calls",
          "guided_json", "guided_regex", "guided_choice", "structured_outputs", "program", "logprobs"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8)
messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "tool", "bot"]),
                                           "content": json_values}), max_size=3)


@pytest.fixture(scope="module")
def server(tiny_model):
    with running_server(tiny_model, max_rows=4) as url:
        yield url


def _small(body: dict) -> dict:
    """Keep accidentally valid bodies cheap: token limits that are valid integers are clamped to 3, n to 2."""
    for key in ("max_tokens", "max_completion_tokens"):
        if isinstance(body.get(key), int) and not isinstance(body.get(key), bool) and 0 < body[key]:
            body[key] = min(body[key], 3)
    if body.get("max_tokens") is None and body.get("max_completion_tokens") is None:
        body["max_tokens"] = 3
    if isinstance(body.get("n"), int) and not isinstance(body.get("n"), bool) and body["n"] > 2:
        body["n"] = 2
    return body


def _mutated() -> st.SearchStrategy[dict]:
    def mutate(draw_field: str, value: object, delete: bool) -> dict:
        body = dict(BASE)
        if delete:
            body.pop(draw_field, None)
        else:
            body[draw_field] = value
        return _small(body)

    return st.builds(mutate, st.sampled_from(FIELDS), json_values | messages, st.booleans())


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=_mutated() | json_values.map(lambda v: v if not isinstance(v, dict) else _small(v)))
def test_malformed_bodies_never_give_a_server_error(server, body) -> None:
    for path in ("/chat/completions", "/completions"):
        response = httpx.post(server + path, json=body, timeout=120)
        assert response.status_code < 500, (body, response.text)
        if response.status_code >= 400:
            error = response.json()["error"]
            assert error["message"] and error["type"]


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=st.binary(max_size=40) | st.text(max_size=40).map(str.encode))
def test_bytes_that_are_not_json_are_a_400(server, raw) -> None:
    response = httpx.post(server + "/chat/completions", content=raw, timeout=60,
                          headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500


def _error(server: str, body: dict, path: str = "/chat/completions") -> tuple[int, dict]:
    response = httpx.post(server + path, json=body, timeout=60)
    return response.status_code, response.json().get("error", {})


def test_errors_name_the_field(server) -> None:
    status, error = _error(server, {**BASE, "n": 0})
    assert status == 400 and error["param"] == "n"
    status, error = _error(server, {**BASE, "max_tokens": 0})
    assert status == 400 and error["param"] == "max_tokens"
    status, error = _error(server, {**BASE, "messages": "hello"})
    assert status == 400 and error["param"] == "messages"
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}}
    status, error = _error(server, {**BASE, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": schema, "strict": True}}})
    assert status == 400 and "#/properties/a/pattern" in error["message"] and error["code"] == "unsupported_schema"
    status, error = _error(server, {**BASE, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"unevaluatedProperties": False}}}})
    assert status == 400 and "unevaluatedProperties" in error["message"]
    status, error = _error(server, {**BASE, "messages": [{"role": "user", "content": "word " * 5000}]})
    assert status == 400 and error["code"] == "context_length_exceeded"
    status, error = _error(server, {**BASE, "max_tokens": 10**6})
    assert status == 400 and error["code"] == "context_length_exceeded"
    status, error = _error(server, {**BASE, "tools": [{"type": "function", "function": {"name": "f"}}],
                                    "tool_choice": {"type": "function", "function": {"name": "g"}}})
    assert status == 400 and error["param"] == "tool_choice"
    status, error = _error(server, {**BASE, "guided_grammar": "start: 'a' ("})
    assert status == 400 and error["param"] == "guided_grammar" and "guided_grammar:1:" in error["message"]
    status, error = _error(server, {**BASE, "presence_penalty": 0.5})
    assert status == 400 and error["param"] == "presence_penalty"
    response = httpx.get(server + "/nothing-here")
    assert response.status_code == 404 and response.json()["error"]["type"] == "not_found_error"


def _rows_active(server: str) -> float:
    return metric(server, "rows_active")


def test_a_client_that_disconnects_mid_stream_frees_its_row(server) -> None:
    body = {**BASE, "max_tokens": 3000, "stream": True}
    with httpx.stream("POST", server + "/chat/completions", json=body, timeout=60) as response:
        lines = response.iter_lines()
        seen = [next(lines) for _ in range(6)]
        assert any(line.startswith("data: {") for line in seen)
        assert _rows_active(server) == 1
    deadline = time.monotonic() + 20
    while _rows_active(server) != 0:
        assert time.monotonic() < deadline, "the row was not freed after the client left"
        time.sleep(0.1)


def test_overload_gives_429_with_retry_after(tiny_model) -> None:
    with running_server(tiny_model, max_rows=1, max_queue=0) as url:
        started = threading.Event()
        body = {**BASE, "max_tokens": 3000, "stream": True}

        def hold() -> None:
            with httpx.stream("POST", url + "/chat/completions", json=body, timeout=60) as response:
                for _ in response.iter_lines():
                    started.set()
                    if stop.is_set():
                        return

        stop = threading.Event()
        holder = threading.Thread(target=hold, daemon=True)
        holder.start()
        assert started.wait(60)
        response = httpx.post(url + "/chat/completions", json=BASE, timeout=60)
        stop.set()
        holder.join(timeout=60)
        assert response.status_code == 429
        assert int(response.headers["retry-after"]) >= 1
        assert response.json()["error"]["type"] == "rate_limit_error"


def test_api_key_is_required_when_set(tiny_model) -> None:
    with running_server(tiny_model, api_key="sekret") as url:
        assert httpx.post(url + "/chat/completions", json=BASE).status_code == 401
        wrong = httpx.get(url + "/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
        good = httpx.post(url + "/chat/completions", json=BASE, headers={"Authorization": "Bearer sekret"}, timeout=60)
        assert good.status_code == 200 and json.loads(good.text)["choices"]
        assert httpx.get(url.removesuffix("/v1") + "/health").status_code == 200
        assert httpx.get(url.removesuffix("/v1") + "/metrics").status_code == 401


def test_the_chat_template_stays_sandboxed(tiny_model) -> None:
    import dataclasses

    from stdsl.runtime.model.loading import Model

    escape = "{{ ''.__class__.__mro__[1].__subclasses__() }}{% for m in messages %}{{ m.content }}{% endfor %}"
    tokenizer = dataclasses.replace(tiny_model.tokenizer, chat_template=escape)
    model = Model(net=tiny_model.net, tokenizer=tokenizer, name="unsafe-template")
    with running_server(model) as url:
        response = httpx.post(url + "/chat/completions", json=BASE, timeout=60)
        assert response.status_code == 400
        message = response.json()["error"]["message"]
        assert message.startswith("chat template") and "is unsafe" in message, message
