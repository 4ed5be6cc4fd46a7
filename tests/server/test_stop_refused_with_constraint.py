"""A request with an output constraint and `stop` is a 400 naming `stop` (a stop string would cut the constrained
output short of a valid one; before, the server silently dropped it); free text keeps its stop strings."""
from __future__ import annotations

import httpx
import pytest

from tests.server.server_fixtures import running_server


@pytest.fixture(scope="module")
def server(tiny_model):
    with running_server(tiny_model, max_rows=2) as url:
        yield url


@pytest.mark.parametrize("path,body", [
    ("/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                           "response_format": {"type": "json_object"}}),
    ("/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "guided_regex": "[0-9]+"}),
    ("/completions", {"prompt": "hi", "guided_json": {"type": "integer"}}),
])
def test_the_server_answers_400_naming_stop(server, path: str, body: dict) -> None:
    reply = httpx.post(server + path, json={"model": "m", "max_tokens": 4, "stop": ["}"], **body}, timeout=60)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == "stop" and reply.json()["error"]["code"] == "stop_with_constraint"
    free = {k: v for k, v in body.items() if k in ("messages", "prompt")}
    plain = httpx.post(server + path, json={"model": "m", "max_tokens": 4, "stop": ["}"], **free}, timeout=60)
    assert plain.status_code == 200, plain.text
