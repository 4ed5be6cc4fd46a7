"""Programs over many inputs: `Program.map` and resumable dataset runs (`stcon run --input --output`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import stdsl
from stdsl.errors import OptionError, StdslError
from stdsl.programs import Program
from stdsl.runtime.dataset_files import finished_lines
from stdsl.runtime.program_result import ProgramResult
from stdsl.runtime.program_runs import run_dataset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUN_PROCESS = Path(__file__).with_name("dataset_run_process.py")
PROGRAM = '''
param name: str
param n: int = 2
user """Describe {{ name }} in {{ n }} words."""
output """Kind: {kind: "cat" | "dog" | "bird"}
Size: {size: int(1..99)}
"""
'''


def test_map_equals_one_run_per_input_and_isolates_failures(tiny_model) -> None:
    program = Program(PROGRAM)
    inputs = [{"name": "Rex"}, {"n": 3}, {"name": "Tom", "n": 4}, "not a dict"]
    results = program.map(inputs, model=tiny_model, max_tokens=20)
    assert isinstance(results[0], ProgramResult) and isinstance(results[2], ProgramResult)
    assert isinstance(results[1], StdslError) and "name" in str(results[1])
    assert isinstance(results[3], StdslError)
    for args, result in ((inputs[0], results[0]), (inputs[2], results[2])):
        alone = program.run(tiny_model, args, max_tokens=20)
        assert result.to_dict() == alone.to_dict() and result.text == alone.text
        assert result.kind in ("cat", "dog", "bird") and 1 <= result.size <= 99


def test_map_refuses_arguments_of_the_wrong_type_per_input(tiny_model) -> None:
    results = Program(PROGRAM).map([{"name": "Rex", "n": "five"}, {"name": 7}, {"name": "Tom"}], model=tiny_model,
                                   max_tokens=20)
    assert isinstance(results[0], OptionError) and "parameter n expects int" in str(results[0])
    assert isinstance(results[1], OptionError) and "parameter name expects str" in str(results[1])
    assert isinstance(results[2], ProgramResult)


def test_program_function_map(tiny_model) -> None:
    @stdsl.program
    def kind(name: str):
        '''
        user """Is {{ name }} a cat or a dog?"""
        output """{answer: "cat" | "dog"}"""
        '''

    results = kind.map([{"name": "Rex"}, {"name": "Tom"}], model=tiny_model)
    assert [r.answer in ("cat", "dog") for r in results] == [True, True]
    assert results[1].to_dict() == kind("Tom", model=tiny_model).to_dict()


def test_dataset_run_resumes_after_an_interruption(tiny_model, tmp_path) -> None:
    program = Program(PROGRAM)
    data = tmp_path / "data.jsonl"
    lines = [json.dumps({"name": f"pet{i}", "n": i % 5 + 1}) for i in range(7)]
    lines.insert(3, "{not json")
    lines.insert(5, json.dumps({"n": 2}))
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "results.jsonl"

    class Interrupt(Exception):
        pass

    seen = []

    def stop_after_three(error: bool) -> None:
        seen.append(error)
        if len(seen) == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        run_dataset(program, tiny_model, data, out, progress=stop_after_three, max_tokens=20)
    with open(out, "a", encoding="utf-8") as sink:
        sink.write('{"line": 9, "res')
    first = finished_lines(out)
    assert len(first) == 3 and out.read_bytes().endswith(b"\n")
    written, skipped = run_dataset(program, tiny_model, data, out, max_tokens=20)
    assert skipped == 3 and written == len(lines) - 3
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["line"] for r in records) == list(range(1, len(lines) + 1))
    errors = {r["line"]: r["error"] for r in records if "error" in r}
    assert set(errors) == {4, 6}
    assert "data.jsonl:4" in errors[4] and "name" in errors[6]
    for record in records:
        if "result" in record:
            assert record["result"]["kind"] in ("cat", "dog", "bird")


def test_every_malformed_line_becomes_an_error_record_and_the_run_goes_on(tiny_model, tmp_path) -> None:
    program = Program(PROGRAM)
    good = json.dumps({"name": "Rex", "n": 3}).encode()
    malformed = {
        "a 5,000-digit integer": b'{"name": "Rex", "n": ' + b"7" * 5000 + b"}",
        "deep nesting": b'{"name": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        "invalid JSON": b'{"name": "Rex",',
        "not an object": b'["Rex", 3]',
        "a wrong parameter type": b'{"name": "Rex", "n": "five"}',
        "a bool for an int": b'{"name": "Rex", "n": true}',
        "invalid UTF-8": b'{"name": "R\xffx"}',
        "a lone surrogate": b'{"name": "\\ud800"}',
        "a missing parameter": b'{"n": 2}',
    }
    raws = [good, *malformed.values(), json.dumps({"name": "a\u2028b\x85c"}, ensure_ascii=False).encode(), good]
    data = tmp_path / "data.jsonl"
    data.write_bytes(b"\n".join(raws) + b"\n")
    out = tmp_path / "results.jsonl"
    written, skipped = run_dataset(program, tiny_model, data, out, max_tokens=20)
    records = [json.loads(line) for line in out.read_bytes().split(b"\n") if line]
    assert (written, skipped) == (len(raws), 0)
    assert sorted(r["line"] for r in records) == list(range(1, len(raws) + 1))
    by_line = {r["line"]: r for r in records}
    for line, (kind, _) in enumerate(malformed.items(), start=2):
        assert "error" in by_line[line], kind
        assert by_line[line]["error"].startswith(f"{data}:{line}: "), kind
    errors = [by_line[n]["error"] for n in range(2, len(malformed) + 2)]
    assert "digits" in errors[0] and "deeper than" in errors[1] and "not valid JSON" in errors[2]
    assert "not a JSON object" in errors[3]
    assert "parameter n expects int" in errors[4] and "parameter n expects int" in errors[5]
    assert "not UTF-8" in errors[6] and "surrogate" in errors[7] and "name" in errors[8]
    assert all("result" in by_line[n] for n in (1, len(raws) - 1, len(raws)))


def test_killed_run_then_rerun_gives_every_line_once(tmp_path) -> None:
    program, data, out = tmp_path / "pets.stc", tmp_path / "data.jsonl", tmp_path / "results.jsonl"
    program.write_text(PROGRAM)
    total = 150
    data.write_text("".join(json.dumps({"name": f"pet{i}", "n": i % 5 + 1}) + "\n" for i in range(total)))
    command = [sys.executable, str(RUN_PROCESS), str(program), str(data), str(out)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None and (not out.exists() or out.read_bytes().count(b"\n") < 3):
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    partial = out.read_bytes().count(b"\n")
    assert 3 <= partial < total, "the run was not killed mid-way"
    with open(out, "ab") as sink:
        sink.write(b'{"line": 77, "result": {"ki')  # as a kill in the middle of a write leaves it
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["line"] for r in records) == list(range(1, total + 1))
    assert all(r["result"]["kind"] in ("cat", "dog", "bird") for r in records)


@pytest.mark.slow
def test_killed_cli_run_then_rerun_gives_every_line_once(smollm2_gguf_path, tmp_path) -> None:
    data = tmp_path / "data.jsonl"
    messages = ["My invoice is wrong", "The app crashes", "Where is my parcel?", "Reset my password", "Thanks!",
                "Charged twice", "Login fails"]
    data.write_text("".join(json.dumps({"message": m}) + "\n" for m in messages))
    out = tmp_path / "results.jsonl"
    command = [sys.executable, "-m", "stdsl.cli", "run", str(EXAMPLES / "classify.stc"), "--input", str(data),
               "--output", str(out), "--max-tokens", "60"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 2):
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    partial = len(finished_lines(out))
    assert 2 <= partial < len(messages)
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["line"] for r in records) == list(range(1, len(messages) + 1))
    assert all("result" in r and r["result"]["label"] for r in records)
