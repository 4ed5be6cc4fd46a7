"""`stcon compile / analyze / generate --grammar FILE`: grammars from the shell, errors located in the grammar file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stdsl.cli import main

ARITHMETIC = """
?start: sum
?sum: product | sum ("+" | "-") product
?product: atom | product ("*" | "/") atom
?atom: NUMBER | "(" sum ")"
%import common.NUMBER
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compile_reports_a_recursive_grammar_as_a_pushdown(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    grammar = tmp_path / "arith.lark"
    grammar.write_text(ARITHMETIC)
    example = tmp_path / "example.txt"
    example.write_text("(1+2)*3")
    code, out, err = run(capsys, "compile", "--grammar", str(grammar), "--vocab", "smollm2", "--json",
                         "--example", str(example))
    assert code == 0, err
    report = json.loads(out)
    assert report["kind"] == "grammar" and report["nonterminals"] >= 2
    assert report["forced_byte_share"] == 0.0  # every byte of an arithmetic expression is a choice


def test_compile_and_analyze_a_regular_gbnf_grammar(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    grammar = tmp_path / "date.gbnf"
    grammar.write_text('root ::= year "-" month\nyear ::= [0-9]{4}\nmonth ::= "0" [1-9] | "1" [0-2]\n')
    code, out, err = run(capsys, "compile", "--grammar", str(grammar), "--vocab", "smollm2", "--json")
    assert code == 0, err
    assert json.loads(out)["kind"] == "grammar" and "cut_states" in json.loads(out)
    code, out, err = run(capsys, "analyze", "--grammar", str(grammar), "--json")
    assert code == 0, err
    assert json.loads(out)["states"] > 0


def test_grammar_errors_name_the_file_line_and_column(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    grammar = tmp_path / "bad.lark"
    grammar.write_text('start: item+\nitem: "a" | missing\n')
    code, _, err = run(capsys, "compile", "--grammar", str(grammar))
    assert code == 2 and "Traceback" not in err
    assert f"{grammar}:2:" in err and "missing" in err
    code, _, err = run(capsys, "compile", "--grammar", str(tmp_path / "absent.lark"))
    assert code == 2 and "no such file" in err
    code, _, err = run(capsys, "compile", "--grammar", str(grammar), "--regex", "a")
    assert code == 2 and "one constraint" in err


def test_generate_under_a_grammar_on_the_embedded_model(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                         smollm2_gguf_path: Path) -> None:
    import stdsl

    grammar = tmp_path / "arith.lark"
    grammar.write_text(ARITHMETIC)
    code, out, err = run(capsys, "generate", "--grammar", str(grammar), "--prompt", "Write an arithmetic expression.",
                         "--max-tokens", "12")
    assert code == 0, err
    assert stdsl.compile(stdsl.Grammar(ARITHMETIC)).accepts(out.rstrip("\n"))
