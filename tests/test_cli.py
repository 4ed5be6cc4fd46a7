"""The `stcon` command: compile, analyze, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stdsl.cli import main
from tests.data_files import EXTRACTION, RECURSIVE

ROOT = Path(__file__).resolve().parents[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compile_json_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    example = tmp_path / "doc.json"
    example.write_text('{"name":"Ann","age":3,"email":"a@b.co","status":"pending","interests":["x"]}')
    code, out, _ = run(capsys, "compile", str(ROOT / "examples" / "person.schema.json"), "--vocab", "smollm2",
                       "--example", str(example), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["states"] > 10
    assert report["automaton_bytes"] > 0
    assert report["token_table_bytes"] == report["states"] * 49152 * 2
    assert 0.3 < report["forced_byte_share"] < 1.0
    assert report["compile_seconds"] < 5


def test_schema_option_equals_positional(capsys: pytest.CaptureFixture[str]) -> None:
    schema = str(ROOT / "examples" / "person.schema.json")
    code, positional, _ = run(capsys, "compile", schema, "--vocab", "smollm2", "--json")
    code2, option, _ = run(capsys, "compile", "--schema", schema, "--vocab", "smollm2", "--json")
    assert code == code2 == 0
    assert json.loads(positional)["states"] == json.loads(option)["states"]
    code, _, err = run(capsys, "compile", schema, "--schema", schema)
    assert code == 2 and "once" in err


def test_compile_regex_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "compile", "--regex", r"[A-Z]{3}-\d{4}", "--vocab", "smollm2")
    assert code == 0
    assert "states" in out and "token_table_bytes" in out


def test_compile_errors_are_clear(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "compile", "--regex", "(?<=a)b")
    assert code == 2 and "position" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "object",\n "properties": }')
    code, _, err = run(capsys, "compile", str(bad))
    assert code == 2 and "bad.json:2:" in err
    code, _, err = run(capsys, "compile", str(tmp_path / "missing.json"))
    assert code == 2 and "no such file" in err
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "string", "contentEncoding": "base64", "foo": 1, "uniqueItems": "x"}')
    code, _, err = run(capsys, "compile", str(schema))
    assert code == 2 and "schema path" in err


@pytest.mark.parametrize("task", ["person", "classification", "event"])
def test_analyze_extraction_schemas(capsys: pytest.CaptureFixture[str], tmp_path: Path, task: str) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(json.loads((EXTRACTION / f"{task}.json").read_text())["schema"]))
    code, out, _ = run(capsys, "analyze", str(schema), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["cut_states"]
    code, text, _ = run(capsys, "analyze", str(schema))
    assert code == 0 and "cut" in text.lower()


def test_compile_recursive_schema(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    task = json.loads((RECURSIVE / "solar.json").read_text())
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(task["schema"]))
    example = tmp_path / "gold.json"
    example.write_text(json.dumps(task["gold"], separators=(",", ":"), ensure_ascii=False))
    code, out, _ = run(capsys, "compile", str(schema), "--vocab", "smollm2", "--example", str(example), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["nonterminals"] >= 1 and report["max_depth"] == 64
    assert 0 < report["forced_byte_share"] < 1
    code, _, err = run(capsys, "analyze", str(schema))
    assert code == 2 and "recursive" in err


@pytest.mark.parametrize(
    ("content", "where", "fragment"),
    [
        (b'output """x: {a: int}\xff"""', "p.stc:1:22:", "not UTF-8"),
        (b'user """a\n  {{ 1/0 }}"""\noutput """{x: int}"""', "p.stc:2:3:", "ZeroDivisionError"),
        (b'output """{% if %}{x: int}"""', "p.stc:1:11:", "Jinja syntax error"),
        (b'user """{{ name }}"""\noutput """{x: int}"""', "p.stc:1:9:", "'name' is undefined"),
        (b'output """x: {a: str(..1000000000)}"""', "p.stc:1:15:", "NFA states"),
        (b'type A = {b: B}\ntype B = {a: A}\noutput """{x: A}"""', "p.stc:1:1:", "no finite expansion"),
        (b'type V = "a" | "b"\nuser """hi"""\noutput """{x: V}\n"""\nparam', "p.stc:5:6:", "expected a name"),
    ],
)
def test_run_errors_are_located_without_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  content: bytes, where: str, fragment: str) -> None:
    """Issue 15 item 6: program mistakes give FILE:LINE:COL and exit 2 before any model is loaded."""
    program = tmp_path / "p.stc"
    program.write_bytes(content)
    code, _, err = run(capsys, "run", str(program))
    assert code == 2 and "Traceback" not in err
    assert f"{program.parent}/{where}" in err and fragment in err, err


def test_files_that_cannot_be_read_are_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "run", str(tmp_path))
    assert code == 2 and "is a directory" in err
    code, _, err = run(capsys, "run", str(tmp_path / "missing.stc"))
    assert code == 2 and "missing.stc: no such file" in err
    code, _, err = run(capsys, "compile", str(tmp_path))
    assert code == 2 and "is a directory" in err
    schema = tmp_path / "s.json"
    schema.write_bytes(b'{"type":\n "str\xe9"}')
    code, _, err = run(capsys, "compile", str(schema))
    assert code == 2 and "s.json:2:6: not UTF-8" in err


PETS = 'param name: str\nparam n: int = 2\nuser """{{ name }} in {{ n }} words"""\noutput """{k: "cat" | "dog"}"""\n'


def test_dataset_outputs_that_cannot_take_the_records_are_refused_before_any_work(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Issue 28 item 5: refused with `stcon: error:` and status 2 before the model loads (the model path here
    does not exist, so any later refusal would name it instead), the input left as it was."""
    program, data = tmp_path / "p.stc", tmp_path / "data.jsonl"
    program.write_text(PETS)
    data.write_bytes(b'{"name": "Rex"}\n{"name": "Tom"}')
    (tmp_path / "link.jsonl").symlink_to(data)
    (tmp_path / "folder").mkdir()
    (tmp_path / "foreign.jsonl").write_text('{"name": "Ann"}')
    outputs = {str(data): "is the input file", str(tmp_path / "link.jsonl"): "is the input file",
               str(tmp_path / "folder"): "is a directory", str(tmp_path / "none" / "out.jsonl"): "does not exist",
               "/proc/version": "cannot be written", str(tmp_path / "foreign.jsonl"): "not a record of a dataset run"}
    for output, says in outputs.items():
        code, _, err = run(capsys, "run", str(program), "--input", str(data), "--output", output,
                           "--model", str(tmp_path / "no-model.gguf"))
        assert code == 2 and err.startswith("stcon: error: ") and says in err and "Traceback" not in err, err
        assert "no-model" not in err
    assert data.read_bytes() == b'{"name": "Rex"}\n{"name": "Tom"}'
    assert (tmp_path / "foreign.jsonl").read_text() == '{"name": "Ann"}'


def test_set_values_are_checked_against_the_parameter_types(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    """Issue 28 item 7: `--set n=five` for `param n: int` is refused naming n and int; a `str` parameter takes
    the text as given even when it reads as a number."""
    program = tmp_path / "p.stc"
    program.write_text(PETS)
    for value in ("five", "2.5", "true", "9" * 5000, "[1]"):
        code, _, err = run(capsys, "run", str(program), "--set", "name=Rex", "--set", f"n={value}",
                           "--model", str(tmp_path / "no-model.gguf"))
        assert code == 2 and "p.stc:2:1: parameter n expects int" in err and "Traceback" not in err, err
    code, _, err = run(capsys, "run", str(program), "--set", "name=2024", "--set", "n=3",
                       "--model", str(tmp_path / "no-model.gguf"))
    assert code == 2 and "no-model.gguf" in err, err


def test_a_missing_value_says_how_the_command_line_passes_it(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    """A parameter with no value names `--set`, the flag that gives it, not a Python keyword."""
    program = tmp_path / "p.stc"
    program.write_text(PETS)
    code, _, err = run(capsys, "run", str(program), "--model", str(tmp_path / "no-model.gguf"))
    assert code == 2 and "p.stc:1:1: parameter name has no value; pass --set name=..." in err, err


def test_a_finished_dataset_rerun_loads_no_model(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Every input line already has its record: the rerun says so and exits 0 without loading the model (the
    model path here does not exist, so loading it would be an error naming it)."""
    program, data, output = tmp_path / "p.stc", tmp_path / "data.jsonl", tmp_path / "out.jsonl"
    program.write_text(PETS)
    data.write_text('{"name": "Rex"}\n\n{"name": "Tom"}\n')
    records = '{"line": 1, "result": {"k": "dog"}}\n{"line": 3, "result": {"k": "cat"}}\n'
    output.write_text(records)
    code, _, err = run(capsys, "run", str(program), "--input", str(data), "--output", str(output),
                       "--model", str(tmp_path / "no-model.gguf"))
    assert code == 0 and "0 lines written" in err and "2 already there" in err and "no-model" not in err, err
    assert output.read_text() == records


def test_analyze_is_readable_and_quiet_on_a_closed_pipe() -> None:
    """`stcon analyze ... | head` ends without a traceback, and counts of hundreds of digits read as `≥ 10^k`."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "stdsl.cli", "analyze", str(ROOT / "examples" / "person.schema.json")]
    text = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert text.returncode == 0 and "≥ 10^" in text.stdout, text.stderr
    assert max(len(word) for word in text.stdout.split()) < 60
    head = subprocess.Popen([*command, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, bufsize=0)
    assert head.stdout is not None and head.stderr is not None
    head.stdout.read(10)
    head.stdout.close()
    assert head.wait(timeout=600) == 141 and head.stderr.read() == b""


def test_no_strict_compiles_the_open_language(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}))
    example = tmp_path / "x.json"
    example.write_text('{"a":1,"b":2}')
    code, out, _ = run(capsys, "compile", str(schema), "--json", "--no-strict", "--example", str(example))
    assert code == 0 and json.loads(out)["kind"] == "json_schema"
    code, _, err = run(capsys, "compile", str(schema), "--json", "--example", str(example))
    assert code != 0 and "rejected by the constraint" in err
