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


@pytest.mark.parametrize(("name", "text", "where"), [
    ("chain.lark", "".join(f'r{i}: r{i + 1} "a" | "b"\n' for i in range(350)).replace("r0:", "start:") + 'r350: "c"\n',
     "chain.lark:201:1: rule r200 is reached through a chain of 200"),
    ("deep.gbnf", "root ::= " + "(" * 1500 + '"a"' + ")" * 1500 + "\n", "deep.gbnf:1:110: groups nested deeper"),
    ("surrogate.lark", 'start: "a\ud800"\n', "surrogate.lark:1:10: not UTF-8 text"),
])
def test_a_grammar_past_the_compilers_depth_exits_2_located(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                            name: str, text: str, where: str) -> None:
    """Issue 37 item 4: these were RecursionError and UnicodeEncodeError tracebacks with exit 1."""
    grammar = tmp_path / name
    grammar.write_text(text, encoding="utf-8", errors="surrogatepass")
    code, _, err = run(capsys, "compile", "--grammar", str(grammar))
    assert code == 2 and err.count("\n") == 1 and f"{tmp_path}/{where}" in err, err


def test_a_recursion_error_anywhere_exits_2_on_one_line(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The last resort: whatever nests past Python's stack in a command is one line and exit 2, never a traceback."""
    from stdsl.compiler import constraint

    def too_deep(*_: object, **__: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(constraint, "compile", too_deep)
    code, _, err = run(capsys, "compile", "--regex", "a")
    assert code == 2 and err.count("\n") == 1 and "nests too deeply" in err, err
