"""`stcon run FILE.py:NAME` on Python programs of steps: one run with `--set` (and its `--stats` trace), dataset runs
with `--input/--output` and resume, and the errors before any model loads. The CLI runs in this process on the tiny
random model (its `load` answers with it); `-m slow` runs the shipped example as a process on SmolLM2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import stdsl.runtime.model.loading as loading
from stdsl.cli import main
from stdsl.programs import StepsProgram

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = '''
import stdsl as stcon
from stdsl import gen, select


def shout(word):
    return word.upper()


@stcon.program(max_tokens=12)
def label(s, name: str, times: int = 1):
    s += f"Name: {name}\\nKind: "
    s += select("kind", ["cat", "dog"])
    s += "\\nWord: "
    s += gen("word", stcon.Regex("[a-z]{2,6}"))
    s.call("loud", shout, s["word"])
    if s["kind"] == "cat":
        s += "\\nCount: "
        s += gen("count", int, max_tokens=4)
    return [s["word"]] * times


@stcon.program
def other(s):
    s += "x"
    s += gen("y", stcon.Regex("[a-z]"))
'''


@pytest.fixture
def program_file(tmp_path: Path) -> Path:
    path = tmp_path / "label_program.py"
    path.write_text(PROGRAM)
    return path


@pytest.fixture
def tiny_load(tiny_model, monkeypatch):
    """`stdsl.load` answering with the tiny model (the CLI's only model access)."""
    loaded: list[str | None] = []

    def load(name=None, **_):
        loaded.append(name)
        return tiny_model

    monkeypatch.setattr(loading, "load", load)
    return loaded


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def expected_run(tiny_model, program_file: Path, **arguments):
    from stdsl.programs import load_steps_program

    program: StepsProgram = load_steps_program(f"{program_file}:label")
    return program.run(tiny_model, **arguments, max_tokens=256, temperature=0.0, seed=None, parallel_fields=False)


def test_run_prints_the_values_and_the_return_of_one_run(capsys, tiny_load, tiny_model, program_file) -> None:
    code, out, err = run(capsys, "run", f"{program_file}:label", "--set", "name=Tom", "--set", "times=2", "--stats")
    assert code == 0, err
    printed = json.loads(out)
    direct = expected_run(tiny_model, program_file, name="Tom", times=2)
    assert printed == {"values": dict(direct.to_dict()), "returned": [direct["word"]] * 2}
    assert printed["values"]["loud"] == printed["values"]["word"].upper()
    lines = err.strip().splitlines()
    assert lines[0].split()[:3] == ["step", "kind", "branch"]
    assert [line.split()[:2] for line in lines[1:-1]] == [[step.name, step.kind] for step in direct.steps]
    assert lines[-1].split()[0] == "total" and int(lines[-1].split()[1]) == direct.stats.passes


def test_run_takes_text_arguments_as_text(capsys, tiny_load, program_file) -> None:
    code, out, err = run(capsys, "run", f"{program_file}:label", "--set", "name=2024")
    assert code == 0, err
    assert json.loads(out)["returned"] == [json.loads(out)["values"]["word"]]


@pytest.mark.parametrize(("spec", "message"), [
    ("{file}", "defines 2 steps programs (label, other): name one"),
    ("{file}:nope", "no steps program named 'nope' (steps programs: label, other)"),
    ("{missing}:label", "no such file"),
])
def test_naming_errors_before_any_model(capsys, tiny_load, program_file, spec, message) -> None:
    code, _, err = run(capsys, "run", spec.format(file=program_file, missing=program_file.with_name("no.py")))
    assert code == 2 and message in err and "Traceback" not in err
    assert tiny_load == []


def test_argument_errors_and_broken_files_before_any_model(capsys, tiny_load, program_file, tmp_path) -> None:
    code, _, err = run(capsys, "run", f"{program_file}:label", "--set", "age=3")
    assert code == 2 and "missing a required argument: 'name'" in err
    code, _, err = run(capsys, "run", f"{program_file}:label", "--set", "name=x", "--set", "age=3")
    assert code == 2 and "age" in err
    broken = tmp_path / "broken.py"
    broken.write_text("import stdsl\nraise RuntimeError('no luck')\n")
    code, _, err = run(capsys, "run", f"{broken}:x")
    assert code == 2 and "importing it failed: RuntimeError: no luck" in err
    assert tiny_load == []


def test_dataset_run_writes_every_line_and_resumes(capsys, tiny_load, tiny_model, program_file, tmp_path) -> None:
    data = tmp_path / "data.jsonl"
    names = ["Ann", "Bo", "Cy", "Di"]
    data.write_text("\n".join([json.dumps({"name": n}) for n in names[:2]] + ['{"nam": 1}', "[1]"]
                              + [json.dumps({"name": n, "times": 2}) for n in names[2:]]) + "\n")
    output = tmp_path / "out.jsonl"
    code, _, err = run(capsys, "run", f"{program_file}:label", "--input", str(data), "--output", str(output))
    assert code == 0, err
    records = {r["line"]: r for r in map(json.loads, output.read_text().splitlines())}
    assert sorted(records) == [1, 2, 3, 4, 5, 6]
    assert "error" in records[3] and "nam" in records[3]["error"] and "error" in records[4]
    for line, arguments in [(1, {"name": "Ann"}), (6, {"name": "Di", "times": 2})]:
        direct = expected_run(tiny_model, program_file, **arguments)
        assert records[line]["result"]["values"] == dict(direct.to_dict())
    kept = output.read_text().splitlines()
    output.write_text("\n".join(kept[:3]) + "\n")  # as if the run had been stopped after three records
    code, _, err = run(capsys, "run", f"{program_file}:label", "--input", str(data), "--output", str(output))
    assert code == 0 and "3 lines written" in err and "3 already there" in err
    again = sorted(map(json.loads, output.read_text().splitlines()), key=lambda r: r["line"])
    assert again == [records[n] for n in sorted(records)]


@pytest.mark.slow
def test_the_shipped_example_runs_as_a_process_on_smollm2(smollm2_gguf_path, tmp_path) -> None:
    spec = f"{ROOT / 'examples/steps/classify_then_branch.py'}:triage"
    done = subprocess.run([sys.executable, "-m", "stdsl.cli", "run", spec, "--set",
                           "ticket=The app crashes when I press save.", "--stats"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["values"]["kind"] in ("bug", "question") and result["returned"] == result["values"]["record"]
    assert "select" in done.stderr and "total" in done.stderr
