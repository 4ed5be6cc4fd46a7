"""`stcon serve` stopped by a signal, in its own process group: SIGTERM stops admission, cancels the rows still
decoding after `--shutdown-seconds` and exits 0 with no process of its group left (compile workers and the
multiprocessing resource tracker included), even with a thread stuck in Python code; a second signal exits at once,
leaving nothing behind either."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest

from tests.server.server_fixtures import free_port, live_group

LONG_TEXT = {"type": "string", "minLength": 900, "maxLength": 1000}
"""A reply of hundreds of tokens: still decoding when the signal comes."""
OVERLAPPING = {"oneOf": [{"type": "object", "required": [f"k{i % 6}", f"k{(i + 1) % 6}"],
                          "properties": {f"k{j}": {"type": "integer", "minimum": (i + j) % 5, "maximum": 10 + i}
                                         for j in range(6)}} for i in range(10)]}
"""Issue 28's schema: a compile that runs to its limit (30 s here), so a worker is busy when the signal comes."""


STUCK_SERVER = """
import sys, threading
from stdsl.server.http.serve import serve

def render_forever():
    while True:
        sum(range(1000))

threading.Thread(target=render_forever, name="stuck-render").start()
serve(port=int(sys.argv[1]), max_rows=4, shutdown_seconds=int(sys.argv[2]))
"""
"""`stcon serve` with a thread stuck in Python code (as a render that never ends): not a daemon, so a normal
exit would wait for it forever."""


@contextmanager
def _server(shutdown_seconds: int, stuck: bool = False) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    command = ([sys.executable, "-c", STUCK_SERVER, str(port), str(shutdown_seconds)] if stuck else
               [sys.executable, "-m", "stdsl.cli", "serve", "--port", str(port), "--max-rows", "4",
                "--shutdown-seconds", str(shutdown_seconds)])
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"stcon serve did not start: {process.stderr.read() if process.stderr else ''}")
        time.sleep(0.3)
    try:
        yield process, base + "/v1"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        for left in live_group(process.pid):
            left.kill()


def _load(url: str) -> tuple[threading.Thread, list[str]]:
    """A finished schema reply, then a stream still decoding and a compile still running; returns the stream's
    thread and what it read (the first chunk has arrived when this returns)."""
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
    ask = [{"role": "user", "content": "Write a long story."}]
    person = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}, "required": ["name"]}
    client.chat.completions.create(model="smollm2", messages=ask, max_tokens=20, response_format={
        "type": "json_schema", "json_schema": {"name": "p", "schema": person, "strict": True}})
    pieces: list[str] = []
    first = threading.Event()

    def stream() -> None:
        try:
            for chunk in client.chat.completions.create(model="smollm2", messages=ask, max_tokens=1200, stream=True,
                                                        response_format={"type": "json_schema", "json_schema": {
                                                            "name": "t", "schema": LONG_TEXT, "strict": True}}):
                pieces.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
                first.set()
        except (openai.APIError, httpx.HTTPError):
            pieces.append("<cut>")
        first.set()

    def compile_forever() -> None:
        try:
            client.chat.completions.create(model="smollm2", messages=ask, max_tokens=8, response_format={
                "type": "json_schema", "json_schema": {"name": "o", "schema": OVERLAPPING, "strict": True}})
        except (openai.APIError, httpx.HTTPError):
            pass

    threading.Thread(target=compile_forever, daemon=True).start()
    streaming = threading.Thread(target=stream, daemon=True)
    streaming.start()
    assert first.wait(120)
    return streaming, pieces


@pytest.mark.timeout(400)
def test_sigterm_drains_within_the_bound_and_leaves_no_process(smollm2_gguf_path) -> None:
    with _server(shutdown_seconds=3) as (process, url):
        streaming, pieces = _load(url)
        assert len(live_group(process.pid)) >= 3  # the server, its compile workers, the resource tracker
        process.send_signal(signal.SIGTERM)
        start = time.monotonic()
        time.sleep(1.0)
        with pytest.raises(httpx.HTTPError):
            httpx.get(url.removesuffix("/v1") + "/health", timeout=2)
        assert process.wait(timeout=3 + 20) == 0, process.stderr.read() if process.stderr else ""
        assert time.monotonic() - start < 3 + 20
        streaming.join(timeout=10)
        assert not streaming.is_alive() and pieces
        assert not live_group(process.pid, within=10)


@pytest.mark.timeout(400)
def test_a_second_signal_exits_at_once_and_leaves_no_process(smollm2_gguf_path) -> None:
    with _server(shutdown_seconds=120) as (process, url):
        _load(url)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        start = time.monotonic()
        assert process.wait(timeout=10) == 128 + signal.SIGINT
        assert time.monotonic() - start < 5
        assert not live_group(process.pid, within=10)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_sigterm_ends_the_server_in_the_bound_with_a_thread_stuck(smollm2_gguf_path) -> None:
    """A thread that never ends no longer keeps the server alive: it exits 0 within `--shutdown-seconds` + 2 s (as
    docs/serving.md says; 3.6 s measured at 2 s), with no compile worker left."""
    with _server(shutdown_seconds=2, stuck=True) as (process, url):
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Name?"}], max_tokens=8,
                                       response_format={"type": "json_schema", "json_schema": {
                                           "name": "t", "schema": {"type": "string", "maxLength": 5}}})
        assert len(live_group(process.pid)) >= 4  # the server, its three compile workers
        process.send_signal(signal.SIGTERM)
        start = time.monotonic()
        assert process.wait(timeout=30) == 0, process.stderr.read() if process.stderr else ""
        assert time.monotonic() - start < 2 + 2 + 1  # the documented bound, and 1 s for a loaded machine
        assert not live_group(process.pid, within=5)
