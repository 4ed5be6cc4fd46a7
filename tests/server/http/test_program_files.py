"""A program a client sends can never touch the server's files: every file reference is a 400 naming `program`,
answered at once and quoting nothing of the file, unless the operator named a directory (`--program-dir`), whose
relative paths alone are read."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.server.server_fixtures import running_server

SECRETS = ("root:", "PATH=", "HOME=", "SECRET-4711")


def _program(path: str) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": "yes or no?"}], "max_tokens": 8,
            "temperature": 0, "program": {"source": 'output """Answer: {x: grammar("' + path + '")}"""'}}


def _post(url: str, body: dict) -> tuple[int, dict, float]:
    began = time.monotonic()
    reply = httpx.post(url + "/chat/completions", json=body, timeout=60)
    return reply.status_code, reply.json(), time.monotonic() - began


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("programs")
    (root / "yes_no.lark").write_text('start: "yes" | "no"\n')
    (root.parent / "secret.lark").write_text('start: "SECRET-4711"\n')
    return root


@pytest.mark.parametrize("program_dir", [False, True])
def test_no_request_reads_a_server_file(tiny_model, folder, program_dir) -> None:
    with running_server(tiny_model, max_rows=2, program_dir=str(folder) if program_dir else None) as url:
        for path in ("/etc/passwd", "/proc/self/environ", "/proc/self/cmdline", "/dev/zero", "../secret.lark",
                     str(folder.parent / "secret.lark"), "yes_no.lark" if not program_dir else "/etc/hostname"):
            status, reply, seconds = _post(url, _program(path))
            assert status == 400, (path, reply)
            error = reply["error"]
            assert error["param"] == "program" and error["code"], error
            assert not any(secret in json.dumps(reply) for secret in SECRETS), reply
            # Refused before any read: a read of /dev/zero would run to the 30 s compile limit (a loaded
            # 2-core machine answers a refusal in 8-15 s, an idle one in well under 1 s).
            assert str(folder) not in error["message"] and seconds < 25, (path, seconds)
        if program_dir:
            status, reply, _ = _post(url, _program("yes_no.lark"))
            assert status == 200, reply
            assert json.loads(reply["choices"][0]["message"]["content"])["x"] in ("yes", "no")
        assert httpx.get(url.removesuffix("/v1") + "/health", timeout=5).status_code == 200


def test_rendering_a_program_is_bounded_in_time_and_size(tiny_model) -> None:
    """A program's messages render in a compile worker under the time limit and `--max-prompt-bytes`: nested loops
    and a 20 MB string are 400s naming `program` within the limit, and the server stays healthy."""
    from stdsl.server.http.limits import Limits

    bombs = {
        "loops": 'user """{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}hi"""',
        "product": 'user """{{ "a" * 20000000 }}"""',
        "sum": 'user """{% set s = "ab" * 60000 %}{{ s + s }}"""',
        "output": 'user """{% for i in range(100000) %}abcdefghij{% endfor %}"""',
        "power": 'user """{{ 10 ** 100000000 }}"""',
    }
    limits = Limits(max_prompt_bytes=100_000)
    with running_server(tiny_model, max_rows=2, compile_seconds=2.0, limits=limits) as url:
        warm = _program("x")  # the first job starts the compile workers; time the bombs, not their start-up
        warm["program"]["source"] = 'user """hi"""\noutput """{n: int(0..9)}"""'
        assert _post(url, warm)[0] == 200
        for name, message in bombs.items():
            body = _program("x")
            body["program"]["source"] = message + '\noutput """{n: int(0..9)}"""'
            status, reply, seconds = _post(url, body)
            assert status == 400 and reply["error"]["param"] == "program" and reply["error"]["code"], (name, reply)
            assert seconds < 2.0 * 1.5 + 1, (name, seconds)
        assert httpx.get(url.removesuffix("/v1") + "/health", timeout=5).status_code == 200



def test_a_client_that_leaves_cancels_its_programs_render(tiny_model) -> None:
    """A program's messages render in a compile worker: the client leaving cancels the render (a running one's
    worker is stopped and replaced)."""
    from tests.server.server_fixtures import metric

    source = ('user """{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}hi"""\n'
              'output """{n: int(0..9)}"""')
    body = _program("x")
    body["program"]["source"] = source
    with running_server(tiny_model, max_rows=2, compile_seconds=20.0) as url:
        warm = _program("x")
        warm["program"]["source"] = 'user """hi"""\noutput """{n: int(0..9)}"""'
        assert _post(url, warm)[0] == 200
        with pytest.raises(httpx.TimeoutException):
            httpx.post(url + "/chat/completions", json=body, timeout=0.5)
        deadline = time.monotonic() + 5
        while metric(url, "grammar_compiles_cancelled_total") < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metric(url, "grammar_compiles_cancelled_total") == 1  # running (its worker replaced) or queued
        assert httpx.get(url.removesuffix("/v1") + "/health", timeout=5).status_code == 200
