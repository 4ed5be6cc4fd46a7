"""A property-based fuzz of the server on 127.0.0.1: random JSON bodies and random mutations of valid requests to
every endpoint (lone surrogates, NUL, control-token text, deep nesting, huge numbers, wrong types, huge `n` and
prompt lists, raw non-JSON numbers).  Property: never a 5xx, `/health` keeps answering fast, and every 200 reply
obeys its request's constraint.  The default run is bounded; `-m slow` runs STDSL_FUZZ_EXAMPLES (default 3000)."""
from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from typing import Any

import httpx
import psutil
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.server.reply_checks import SEEDS, check_reply
from tests.server.server_fixtures import running_server

FIELDS = ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
          "n", "stop", "seed", "stream", "stream_options", "response_format", "tools", "tool_choice",
          "parallel_tool_calls", "guided_json", "guided_regex", "guided_choice", "structured_outputs", "program",
          "logprobs", "logit_bias", "functions", "function_call", "echo", "suffix", "best_of", "user"]
HOSTILE_TEXT = ["\ud800", "\udfff", "a\udc00b", "\u0000", "<|im_end|>\n<|im_start|>system\n", "<|endoftext|>",
                "\ue0003\ue001", "\ufeff", "\U0010ffff", "é" * 50, "{{ 7*7 }}", "<tool_call>"]
RAW_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "9" * 5000, "1" * 41, "0.0000001e-999"]
ENDPOINTS = ["/chat/completions", "/completions"]

texts = st.text(max_size=12) | st.sampled_from(HOSTILE_TEXT) | st.tuples(
    st.text(max_size=4), st.sampled_from(HOSTILE_TEXT), st.text(max_size=4)).map("".join)
scalars = (st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70)
           | st.sampled_from([2**63, -2**63, 10**40]) | st.floats(allow_nan=False, allow_infinity=False) | texts)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(texts, inner, max_size=3), max_leaves=10)


RAW = "\u0001RAW:"


def _deep(depth: int, opener: str) -> str:
    """A raw marker for `depth` nested arrays or objects (kept as text, so that printing an example stays shallow)."""
    return RAW + ("[" * depth + "1" + "]" * depth if opener == "[" else '{"a":' * depth + "1" + "}" * depth)


values = (json_values | st.builds(_deep, st.integers(30, 400), st.sampled_from("[{")) | st.integers(9, 10**6)
          | st.lists(st.sampled_from(["a", "b", "\ud800"]), min_size=60, max_size=400))


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A valid request with 1-3 mutations: a field set, deleted, or a string inside it replaced."""
    path, body = draw(st.sampled_from(SEEDS))
    body = json.loads(json.dumps(body))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["set", "delete", "text", "raw", "wrap"]))
        name = draw(st.sampled_from(FIELDS + list(body)))
        if kind == "set":
            body[name] = draw(values)
        elif kind == "delete":
            body.pop(name, None)
        elif kind == "raw":
            body[name] = RAW + draw(st.sampled_from(RAW_NUMBERS))
        elif kind == "wrap":
            body[name] = _deep(draw(st.integers(100, 3000)), draw(st.sampled_from("[{")))
        else:
            _replace_a_string(body, draw(texts), draw(st.integers(0, 50)))
    if draw(st.booleans()):
        path = draw(st.sampled_from(ENDPOINTS))
    return path, body


def _replace_a_string(value: Any, text: str, pick: int) -> None:
    """Replace the `pick`-th string (mod their count) inside `value` with `text`."""
    slots: list[tuple[Any, Any]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        members = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for key, member in members:
            if isinstance(member, str):
                slots.append((item, key))
            else:
                stack.append(member)
    if slots:
        container, key = slots[pick % len(slots)]
        container[key] = text


def _encode(body: Any) -> bytes:
    """The body as JSON text (lone surrogates as escapes), each raw marker string replaced by its bare token."""
    return re.sub(r'"\\u0001RAW:((?:[^"\\]|\\")*)"', lambda m: m.group(1).replace('\\"', '"'),
                  json.dumps(body)).encode()


@pytest.fixture(scope="module")
def fuzzed(tiny_model):
    with running_server(tiny_model, max_rows=4, compile_seconds=5.0) as url:
        tally: Counter[str] = Counter()
        rss = psutil.Process().memory_info().rss
        yield url, tally
        tally["rss_before_mb"] = rss >> 20
        tally["rss_after_mb"] = psutil.Process().memory_info().rss >> 20
        print(f"\nfuzz tally: {dict(tally)}")


def _integer(text: str) -> int | float:
    """A JSON integer as the server reads it, where Python's int() refuses more than 4,300 digits."""
    return int(text) if len(text) < 4300 else float(text)


def _send(url: str, tally: Counter[str], path: str, body: Any) -> None:
    """Post `body` (raw markers as their bare tokens) and check the reply; a 200 is checked against the body as
    sent, so that a raw schema (a deep `guided_json`) is the server's, not its marker string."""
    raw = _encode(body)
    response = httpx.post(url + path, content=raw, headers={"content-type": "application/json"}, timeout=120)
    tally["sent"] += 1
    tally[f"{response.status_code // 100}xx"] += 1
    assert response.status_code < 500, (path, raw[:500], response.text[:500])
    if response.status_code == 200:
        stream = response.headers["content-type"].startswith("text/event-stream")
        sent = json.loads(raw, parse_int=_integer)
        tally["choices_validated"] += check_reply(path, sent, response.text, stream)
        tally["replies_validated"] += 1
    else:
        error = response.json()["error"]
        assert error["message"] and error["type"], response.text
    begin = time.monotonic()
    assert httpx.get(url.removesuffix("/v1") + "/health", timeout=30).status_code == 200
    assert time.monotonic() - begin < 1.0, "/health was slow"


def _fuzz(fuzzed: tuple[str, Counter[str]], case: tuple[str, Any]) -> None:
    url, tally = fuzzed
    _send(url, tally, *case)


EXAMPLES = int(os.environ.get("STDSL_FUZZ_EXAMPLES", "3000"))
cases = mutated() | st.tuples(st.sampled_from(ENDPOINTS), json_values)


def test_every_seed_is_valid_and_obeys_its_constraint(fuzzed) -> None:
    url, tally = fuzzed
    for path, body in SEEDS:
        response = httpx.post(url + path, json=body, timeout=120)
        assert response.status_code == 200, (body, response.text)
        check_reply(path, body, response.text, bool(body.get("stream")))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=cases)
@example(case=("/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "Tell me about Paris."}],
                                     "max_tokens": 6, "temperature": 0, "guided_json": _deep(30, "{")}))
def test_fuzz_never_a_server_error(fuzzed, case) -> None:
    _fuzz(fuzzed, case)


@pytest.mark.slow
@pytest.mark.timeout(max(600, EXAMPLES * 5))
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(case=cases)
def test_fuzz_never_a_server_error_long(fuzzed, case) -> None:
    _fuzz(fuzzed, case)

