"""`stcon run` on a `.stc` program of steps: its mistakes exit 2 at FILE:LINE:COL before a model is loaded,
`--functions` registers what its call steps call, `--stats` prints a trace of the steps, and a dataset run
(`--input/--output`, resumed) writes one record per line with each line's steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import stdsl
from stdsl.cli import main

ROOT = Path(__file__).resolve().parents[1]
STEPS = '''param n: int
user """Pick a number."""
output """{a: int(0..9)}"""
call total = plus(a, n)
user """{{ total }}, and now?"""
output """{b: int(0..9)}"""
'''
TOOLS = "def plus(a: int, b: int) -> int:\n    return a + b\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("program", "functions", "sets", "where", "fragment"),
    [
        (STEPS, None, ["n=1"], "p.stc:4:14", "call of plus, which is not a function registered"),
        (STEPS, TOOLS, ["n=1"], None, None),
        (STEPS.replace("{{ total }}", "{{ totl }}"), TOOLS, ["n=1"], "p.stc:5:9", "unknown name 'totl'"),
        ('param xs\nuser """x"""\nfor x in xs {\n  output """{v: int}"""\n}', None, ["xs=3"], "p.stc:3:10",
         "for over xs, which is not a list (it is int)"),
    ],
)
def test_steps_mistakes_exit_2_before_a_model_is_loaded(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                          program: str, functions: str | None, sets: list[str],
                                                          where: str | None, fragment: str | None) -> None:
    path = tmp_path / "p.stc"
    path.write_text(program)
    argv = ["run", str(path), "--model", str(tmp_path / "no-model.gguf"), *(f"--set={s}" for s in sets)]
    if functions is not None:
        (tmp_path / "tools.py").write_text(functions)
        argv += ["--functions", str(tmp_path / "tools.py")]
    code, _, err = run(capsys, *argv)
    assert code == 2 and "Traceback" not in err
    if where is None:  # the program is fine: the first failure is loading the model that does not exist
        assert "no-model.gguf" in err, err
    else:
        assert f"{tmp_path}/{where}: {fragment}" in err, err


def test_functions_file_that_is_missing_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "p.stc"
    path.write_text(STEPS)
    code, _, err = run(capsys, "run", str(path), "--functions", str(tmp_path / "nope.py"), "--set", "n=1")
    assert code == 2 and "--functions" in err and "nope.py: no such file" in err


def test_a_dataset_run_of_a_steps_program_writes_every_line_and_resumes(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_model, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdsl, "load", lambda *args, **kwargs: tiny_model)
    path, data, output = tmp_path / "p.stc", tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    path.write_text(STEPS)
    (tmp_path / "tools.py").write_text(TOOLS)
    data.write_text('{"n": 1}\n{"m": 1}\n[1]\n{"n": "x"}\n{"n": 2}\n{"n": 3}\n')
    argv = ["run", str(path), "--functions", str(tmp_path / "tools.py"), "--input", str(data), "--output",
            str(output), "--max-tokens", "6", "--stats"]
    code, _, err = run(capsys, *argv)
    assert code == 0 and "6 lines written" in err and "3 errors" in err, err
    records = {r["line"]: r for r in map(json.loads, output.read_text().splitlines())}
    assert sorted(records) == [1, 2, 3, 4, 5, 6]
    assert 'give "n" in every input line' in records[2]["error"] and str(data) + ":2:" in records[2]["error"]
    assert "error" in records[3] and "n" in records[4]["error"]
    program = stdsl.Program.from_file(path, functions={"plus": lambda a, b: a + b})
    for line, n in [(1, 1), (5, 2), (6, 3)]:
        direct = program.run(tiny_model, {"n": n}, max_tokens=6, temperature=0.0)
        assert records[line]["result"] == {"values": dict(direct.to_dict()), "returned": None}
        assert [(s["step"], s["kind"]) for s in records[line]["steps"]] == [("a", "output"), ("total", "call"),
                                                                             ("b", "output")]
        assert records[line]["steps"][2]["prefilled_tokens"] > 0
    output.write_text("".join(line + "\n" for line in output.read_text().splitlines()[:2]))  # stopped after two
    code, _, err = run(capsys, *argv)
    assert code == 0 and "4 lines written" in err and "2 already there" in err, err
    again = {r["line"]: r for r in map(json.loads, output.read_text().splitlines())}
    assert {line: r.get("result", r.get("error")) for line, r in again.items()} == \
        {line: r.get("result", r.get("error")) for line, r in records.items()}


@pytest.mark.slow
def test_the_shipped_steps_example_runs_on_a_dataset_as_a_process(smollm2_gguf_path, tmp_path: Path) -> None:
    data, output = tmp_path / "tickets.jsonl", tmp_path / "out.jsonl"
    data.write_text('{"ticket": "The app crashes when I save."}\n{"ticket": "How do I export a file?"}\n')
    command = [sys.executable, "-m", "stdsl.cli", "run", str(ROOT / "examples/steps/classify_then_branch.stc"),
               "--input", str(data), "--output", str(output), "--max-tokens", "30", "--stats"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0 and "2 lines written" in done.stderr, done.stderr
    records = sorted(map(json.loads, output.read_text().splitlines()), key=lambda r: r["line"])
    for record in records:
        values = record["result"]["values"]
        assert values["kind"] in ("bug", "question") and record["result"]["returned"] == values["record"]
        assert [s["kind"] for s in record["steps"]][0] == "output"
    output.write_text(json.dumps(records[0]) + "\n")
    again = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert again.returncode == 0 and "1 lines written" in again.stderr and "1 already there" in again.stderr
    rerun = sorted(map(json.loads, output.read_text().splitlines()), key=lambda r: r["line"])
    assert [r["result"] for r in rerun] == [r["result"] for r in records]


def test_stats_print_a_trace_of_the_steps(capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_model,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdsl, "load", lambda *args, **kwargs: tiny_model)
    path = tmp_path / "p.stc"
    path.write_text(STEPS)
    (tmp_path / "tools.py").write_text(TOOLS)
    code, out, err = run(capsys, "run", str(path), "--functions", str(tmp_path / "tools.py"), "--set", "n=4",
                         "--max-tokens", "6", "--stats")
    assert code == 0, err
    result = json.loads(out)
    assert result["total"] == result["a"] + 4 and 0 <= result["b"] <= 9
    totals, *trace = [json.loads(line) for line in err.strip().splitlines()]
    assert [(line["step"], line["kind"]) for line in trace] == [("a", "output"), ("total", "call"), ("b", "output")]
    assert trace[0]["passes"] >= 1 and trace[1]["passes"] is None and trace[2]["prefilled_tokens"] > 0
    assert totals["passes"] == trace[0]["passes"] + trace[2]["passes"]
