"""A grammar sent to the server names the model's special tokens (`<[id]>`, `<name>`): the server compiles it for the
model's tokenizer in its compile worker."""

from __future__ import annotations

import httpx

from tests.server.server_fixtures import running_server


def _post(url: str, body: dict) -> tuple[int, dict, float]:
    reply = httpx.post(url + "/chat/completions", json=body, timeout=60)
    return reply.status_code, reply.json(), 0.0


def test_a_grammar_names_special_tokens_by_id_through_the_server(tiny_model) -> None:
    """`<[id]>` needs the model's tokenizer, which the server now sends with the grammar to its compile worker
    (it was refused, telling the HTTP client to 'pass the grammar uncompiled to generate')."""
    name, token = sorted(tiny_model.tokenizer.special_tokens.items(), key=lambda item: item[1])[0]
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "max_tokens": 8, "temperature": 0,
            "structured_outputs": {"grammar": f'start: "a" <[{token}]> "b"'}}
    with running_server(tiny_model, max_rows=2) as url:
        status, reply, _ = _post(url, body)
        assert status == 200, reply
        assert reply["choices"][0]["message"]["content"] == f"a{name}b"
        body["structured_outputs"]["grammar"] = 'start: "a" <[99999999]>'
        status, reply, _ = _post(url, body)
        assert status == 400 and "99999999" in reply["error"]["message"] and "uncompiled" not in reply["error"][
            "message"], reply
