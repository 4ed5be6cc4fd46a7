"""Python steps programs served by name (`create_app(steps_programs=...)`, `stcon serve --steps-program`), through
the official `openai` client on a real local port (tiny model): the reply equals the library's run of the program,
streamed or not; unknown names, bad arguments and bad program files are refused with their reasons."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from stdsl.programs import load_steps_program
from stdsl.runtime.program_steps.dataset import run_record
from tests.server.server_fixtures import metric, running_server

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = '''
import stdsl as stcon
from stdsl import gen, select


@stcon.program(max_tokens=12)
def label(s, name: str):
    s += f"Name: {name}\\nKind: "
    s += select("kind", ["cat", "dog"])
    s += "\\nWord: "
    s += gen("word", stcon.Regex("[a-z]{2,6}"))
    return s["word"].upper()
'''
ASK = [{"role": "user", "content": "unused"}]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("steps") / "served_label.py"
    path.write_text(PROGRAM)
    return load_steps_program(f"{path}:label")


@pytest.fixture(scope="module")
def client(tiny_model, program):
    with running_server(tiny_model, max_rows=4, steps_programs={"label": program}) as url:
        yield openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)


def test_a_named_steps_program_answers_as_the_library_runs_it(client, tiny_model, program) -> None:
    reply = client.chat.completions.create(model="m", messages=ASK, temperature=0,
                                           extra_body={"program": {"name": "label", "arguments": {"name": "Tom"}}})
    expected = program.run(tiny_model, name="Tom", temperature=0.0, top_p=1.0)
    assert json.loads(reply.choices[0].message.content) == run_record(expected)
    assert [step["name"] for step in reply.choices[0].message.stdsl["steps"]] == ["kind", "word"]
    assert reply.usage.completion_tokens == expected.stats.emitted_tokens
    chunks = list(client.chat.completions.create(model="m", messages=ASK, temperature=0, stream=True,
                                                 extra_body={"program": {"name": "label",
                                                                         "arguments": {"name": "Tom"}}}))
    values = [v for c in chunks for v in (getattr(c.choices[0].delta, "stdsl", None) or [])]
    assert values == [{"path": [name], "value": value, "complete": True} for name, value in expected.items()]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == reply.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_unknown_names_and_bad_arguments_are_refused(client) -> None:
    with pytest.raises(openai.NotFoundError, match="no steps program named 'other'.*served: label"):
        client.chat.completions.create(model="m", messages=ASK, extra_body={"program": {"name": "other"}})
    with pytest.raises(openai.BadRequestError, match="missing a required argument: 'name'"):
        client.chat.completions.create(model="m", messages=ASK, extra_body={"program": {"name": "label"}})
    with pytest.raises(openai.BadRequestError, match="not both or neither"):
        client.chat.completions.create(model="m", messages=ASK,
                                       extra_body={"program": {"name": "label", "source": "x"}})


def test_serve_refuses_a_bad_steps_program_before_loading_a_model(tmp_path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('bad file')\n")
    done = subprocess.run([sys.executable, "-m", "stdsl.cli", "serve", "--model", str(tmp_path / "no-model.gguf"),
                           "--steps-program", f"{broken}:x"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    assert "importing it failed: ValueError: bad file" in done.stderr and "no-model" not in done.stderr


WATCHED = '''
import threading

import stdsl as stcon
from stdsl import gen, select

GATE = threading.Event()
OPENED = []
CALLS = []


@stcon.program(max_tokens=12)
def gated(s, name: str):
    s += f"Name: {name}\\nKind: "
    s += select("kind", ["cat", "dog"])
    s.call("opened", lambda: OPENED.append(GATE.wait(60)) or len(OPENED))
    s += "\\nWord: "
    s += gen("word", stcon.Regex("[a-z]{2,6}"))
    return s["word"]


@stcon.program
def endless(s):
    s += "Letters: "
    for i in range(40):
        s += gen(f"w{i}", stcon.Regex("[a-z]{30}"), max_tokens=30)
        s.call(f"n{i}", CALLS.append, i)
'''


@pytest.fixture(scope="module")
def watched(tiny_model, tmp_path_factory):
    path = tmp_path_factory.mktemp("watched") / "served_watched.py"
    path.write_text(WATCHED)
    programs = {name: load_steps_program(f"{path}:{name}") for name in ("gated", "endless")}
    with running_server(tiny_model, max_rows=4, steps_programs=programs) as url:
        yield url, programs["gated"].function.__globals__


def test_a_stream_sends_each_value_as_its_step_ends(watched) -> None:
    url, names = watched
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
    values, content = [], ""
    call = {"program": {"name": "gated", "arguments": {"name": "Tom"}}}
    for chunk in client.chat.completions.create(model="m", messages=ASK, temperature=0, stream=True, extra_body=call):
        delta = chunk.choices[0].delta
        for value in getattr(delta, "stdsl", None) or []:
            values.append(value)
            if value["path"] == ["kind"]:
                names["GATE"].set()  # the run waits on this until its first value reached the client
        content += delta.content or ""
    assert names["OPENED"] == [True]
    assert [value["path"] for value in values] == [["kind"], ["opened"], ["word"]]
    assert {value["path"][0]: value["value"] for value in values} == json.loads(content)["values"]
    assert all(value["complete"] for value in values)


def test_a_client_that_leaves_mid_stream_stops_the_run(watched) -> None:
    url, names = watched
    body = {"model": "m", "messages": ASK, "stream": True, "program": {"name": "endless", "arguments": {}}}
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=120) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if '"stdsl"' in line:
                break  # the first value came: leave
    deadline = time.monotonic() + 60
    while metric(url, "rows_active") or metric(url, "rows_queued"):
        assert time.monotonic() < deadline, "the run's rows were not released"
        time.sleep(0.05)
    steps, requests = len(names["CALLS"]), metric(url, "requests_total")
    time.sleep(1.5)
    assert len(names["CALLS"]) == steps < 40 and metric(url, "requests_total") == requests
    assert metric(url, "rows_active") == 0
