"""Programs a chat request runs and the 400s it can meet: a program may bring the whole chat (`messages: []`),
a missing program argument names `program.arguments`, and every refusal carries a stable `code`."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import httpx
import pytest

from tests.server.server_fixtures import running_server

SERVER = Path(__file__).resolve().parents[2] / "stdsl" / "server"
ASKS = 'param city: str\nuser """Weather in {{ city }}?"""\noutput """{temp: int(-50..50)} degrees"""'


@pytest.fixture(scope="module")
def url(tiny_model):
    with running_server(tiny_model, max_rows=2) as base:
        yield base


def _chat(url: str, **body: object) -> tuple[int, dict]:
    reply = httpx.post(url + "/chat/completions", json={"model": "m", "max_tokens": 12, "temperature": 0, **body},
                       timeout=60)
    return reply.status_code, reply.json()


def test_a_program_with_its_own_messages_needs_none_from_the_request(url: str) -> None:
    status, reply = _chat(url, messages=[], program={"source": ASKS, "arguments": {"city": "Oslo"}})
    assert status == 200, reply
    assert -50 <= json.loads(reply["choices"][0]["message"]["content"])["temp"] <= 50


@pytest.mark.parametrize("program", [None, {"source": 'output """{temp: int(-50..50)} degrees"""'}])
def test_an_empty_chat_is_refused_naming_messages(url: str, program: dict | None) -> None:
    status, reply = _chat(url, messages=[], **({"program": program} if program else {}))
    assert status == 400 and reply["error"]["param"] == "messages" and reply["error"]["code"] == "invalid_value"


def test_a_missing_program_argument_names_the_request_field(url: str) -> None:
    status, reply = _chat(url, messages=[], program={"source": ASKS})
    assert status == 400 and reply["error"]["param"] == "program", reply
    assert "parameter city has no value; give \"city\" in the request's program.arguments" in reply["error"]["message"]


def test_two_constraints_and_an_unknown_path_have_codes(url: str) -> None:
    status, reply = _chat(url, messages=[{"role": "user", "content": "hi"}], guided_regex="[0-9]+",
                          guided_choice=["a", "b"])
    assert status == 400 and reply["error"]["code"] == "multiple_constraints", reply
    missing = httpx.get(url + "/nowhere", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found", missing.text


def test_every_refusal_in_the_server_names_a_code() -> None:
    """Clients branch on `error.code`: each RequestError the server builds gives one (none is left null)."""
    uncoded = []
    for path in sorted(SERVER.rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RequestError" \
                    and not any(keyword.arg == "code" for keyword in node.keywords):
                uncoded.append(f"{path.relative_to(SERVER)}:{node.lineno}")
    assert not uncoded, uncoded
