""".stc programs of steps served by name (`stcon serve --steps-program FILE.stc`, named by the file's stem), through
the official `openai` client on a real local port (tiny model): the reply equals the library's run of the program,
with the trace of its steps (a compiled loop among them), streamed or not; argument mistakes are 400s naming the
parameter, a program of steps sent as source is refused with the way to serve it, and a program's mistake stops
`stcon serve` at its position before a model loads."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from stdsl.runtime.program_steps.dataset import run_record
from stdsl.server.http.serve import served_steps_programs
from tests.server.server_fixtures import running_server

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = '''param name: str
param extra: int = 1
user """Name: {{ name }}. List up to three digits."""
output """Digits: {xs: list[int(0..9)](1..3, sep=",")}."""
for x in xs {
  output """ {word: "odd" | "even"}"""
}
call total = plus(extra, 2)
user """Now a yes or no."""
output answer """{ok: bool}"""
return answer.ok
'''
STEPS_SOURCE = 'output """{a: int}"""\noutput """{b: int}"""\n'
ASK = [{"role": "user", "content": "unused"}]


def plus(a: int, b: int) -> int:
    return a + b


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("stc_steps") / "digits.stc"
    path.write_text(PROGRAM)
    return served_steps_programs((str(path),), {"plus": plus})["digits"]


@pytest.fixture(scope="module")
def client(tiny_model, program):
    with running_server(tiny_model, max_rows=4, steps_programs={"digits": program}) as url:
        yield openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)


def call(program_name: str, **arguments: object) -> dict:
    return {"program": {"name": program_name, "arguments": arguments}}


def test_a_stc_steps_program_answers_as_the_library_runs_it(client, tiny_model, program) -> None:
    reply = client.chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=20,
                                           extra_body=call("digits", name="Tom"))
    (checked,), _ = program.bind({"name": "Tom"})
    expected = program.run(tiny_model, checked, temperature=0.0, top_p=1.0, max_tokens=20)
    assert json.loads(reply.choices[0].message.content) == json.loads(json.dumps(run_record(expected)))
    steps = reply.choices[0].message.stdsl["steps"]
    assert [(step["name"], step["kind"]) for step in steps] == [("xs", "looped"), ("total", "call"),
                                                                ("answer", "output")]
    assert len(expected["word"]) == len(expected["xs"]) and expected["total"] == 3
    assert reply.usage.completion_tokens == expected.stats.emitted_tokens
    chunks = list(client.chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=20, stream=True,
                                                 extra_body=call("digits", name="Tom")))
    values = [v for c in chunks for v in (getattr(c.choices[0].delta, "stdsl", None) or [])]
    assert {v["path"][0]: v["value"] for v in values} == json.loads(json.dumps(run_record(expected)))["values"]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == reply.choices[0].message.content


def test_argument_mistakes_and_steps_sources_are_refused(client) -> None:
    with pytest.raises(openai.BadRequestError, match='give "name" in the request\'s program.arguments'):
        client.chat.completions.create(model="m", messages=ASK, extra_body=call("digits"))
    with pytest.raises(openai.BadRequestError, match="parameter extra"):
        client.chat.completions.create(model="m", messages=ASK, extra_body=call("digits", name="x", extra="two"))
    with pytest.raises(openai.BadRequestError, match="--steps-program"):
        client.chat.completions.create(model="m", messages=ASK,
                                       extra_body={"program": {"source": STEPS_SOURCE, "arguments": {}}})


@pytest.mark.parametrize(("text", "fragment"), [
    (PROGRAM.replace("plus(extra", "minus(extra"), "bad.stc:8:14: call of minus, which is not a function registered"),
    ('output """{a: int}"""\n', "bad.stc: a one-step program, not a program of steps"),
])
def test_serve_refuses_a_bad_stc_steps_program_before_loading_a_model(tmp_path, text: str, fragment: str) -> None:
    bad = tmp_path / "bad.stc"
    bad.write_text(text)
    (tmp_path / "tools.py").write_text("def plus(a: int, b: int) -> int:\n    return a + b\n")
    done = subprocess.run([sys.executable, "-m", "stdsl.cli", "serve", "--model", str(tmp_path / "no-model.gguf"),
                           "--steps-program", str(bad), "--functions", str(tmp_path / "tools.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr
    assert fragment in done.stderr and "no-model" not in done.stderr
