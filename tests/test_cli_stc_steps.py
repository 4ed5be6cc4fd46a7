"""`stcon run` on a `.stc` program of steps: its mistakes exit 2 at FILE:LINE:COL before a model is loaded,
`--functions` registers what its call steps call, and `--stats` prints a trace of the steps."""

from __future__ import annotations

import json
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


def test_a_dataset_run_of_a_steps_program_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path, data = tmp_path / "p.stc", tmp_path / "in.jsonl"
    path.write_text('output """{a: int}"""\noutput """{b: int}"""\n')
    data.write_text("{}\n")
    code, _, err = run(capsys, "run", str(path), "--input", str(data), "--output", str(tmp_path / "out.jsonl"))
    assert code == 2 and "several steps" in err


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
