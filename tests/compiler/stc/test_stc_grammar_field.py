"""`grammar("file")` fields: text in a grammar's language inside a template, read back as text; bad uses located."""

from __future__ import annotations

from pathlib import Path

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import ProgramError
from stdsl.errors import GrammarError

SUM_LARK = 'start: NUMBER (("+" | "-") NUMBER)*\nNUMBER: /[0-9]+/\n'
PROGRAM = 'output """Expression: {expr: grammar("sum.lark")}\nAnswer: {answer: int}"""'


def compiled(tmp_path: Path, text: str, files: dict[str, str]) -> CompiledProgram:
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    path = tmp_path / "calc.stc"
    path.write_text(text)
    return CompiledProgram(text, str(path), None)


@settings(max_examples=40, deadline=None)
@given(terms=st.lists(st.integers(0, 999), min_size=1, max_size=4), ops=st.lists(st.sampled_from("+-"), max_size=3),
       answer=st.integers(-50, 50), cut=st.integers(0, 3))
def test_outputs_are_exactly_the_grammar_then_the_rest(tmp_path_factory: pytest.TempPathFactory, terms: list[int],
                                                       ops: list[str], answer: int, cut: int) -> None:
    program = compiled(tmp_path_factory.mktemp("g"), PROGRAM, {"sum.lark": SUM_LARK})
    constraint = program.constraint({})
    expr = str(terms[0]) + "".join(op + str(term) for op, term in zip(ops, terms[1:]))
    text = f"Expression: {expr}\nAnswer: {answer}"
    assert constraint.accepts(text)
    assert not constraint.accepts(f"Expression: {expr}{'+-'[cut % 2]}\nAnswer: {answer}")
    assert not constraint.accepts(f"Expression: \nAnswer: {answer}")
    fields = constraint.parse(text)
    assert fields["expr"] == expr and fields["answer"] == answer


PARENS_LARK = 'start: "(" item* ")"\nitem: start | /[a-z!]/\n'
parens = st.recursive(st.sampled_from("ab!"), lambda inner: st.lists(inner, max_size=3).map(
    lambda items: "(" + "".join(items) + ")"), max_leaves=8).filter(lambda text: text.startswith("("))


@settings(max_examples=40, deadline=None)
@given(value=parens, answer=st.integers(-50, 50), cut=st.integers(0, 20))
def test_a_recursive_grammar_field_decodes_to_a_value_the_grammar_accepts(
        tmp_path_factory: pytest.TempPathFactory, value: str, answer: int, cut: int) -> None:
    """The field is a pushdown embedded in the template, bounded by the literal after it: with "!" right after it,
    "!" cannot stand in the value, though the grammar allows it. Accepted is what lark accepts, so bounded."""
    folder = tmp_path_factory.mktemp("g")
    then_answer = compiled(folder, 'output """E: {e: grammar("parens.lark")}\nA: {a: int}"""',
                           {"parens.lark": PARENS_LARK}).constraint({})
    then_mark = compiled(folder, 'output """E: {e: grammar("parens.lark")}!"""', {}).constraint({})
    oracle = lark.Lark(PARENS_LARK, parser="earley")
    for text in (value, value[:cut] + value[cut + 1:]):
        try:
            oracle.parse(text)
            in_grammar = True
        except lark.exceptions.LarkError:
            in_grammar = False
        output = f"E: {text}\nA: {answer}"
        assert then_answer.accepts(output) == in_grammar, output
        if in_grammar:
            assert then_answer.parse(output) == {"e": text, "a": answer}
        assert then_mark.accepts(f"E: {text}!") == (in_grammar and "!" not in text), text
        if in_grammar and "!" not in text:
            assert then_mark.parse(f"E: {text}!") == {"e": text}


def test_the_grammar_file_is_found_beside_the_program_and_its_options_apply(tmp_path: Path) -> None:
    (tmp_path / "g").mkdir()
    gbnf = 'root ::= "yes" | "no"\nother ::= "maybe"\n'
    program = compiled(tmp_path, 'output """A: {a: grammar("g/choice.gbnf", start=other)}."""', {"g/choice.gbnf": gbnf})
    constraint = program.constraint({})
    assert constraint.accepts("A: maybe.") and not constraint.accepts("A: yes.")


@pytest.mark.parametrize(
    ("field", "files", "fragment"),
    [
        ('grammar("missing.lark")', {}, "no such file"),
        ("grammar()", {}, "one file name"),
        ('grammar("sum.lark", sep=",")', {"sum.lark": SUM_LARK}, "no argument sep="),
        ('grammar("sum.lark", syntax="yaml")', {"sum.lark": SUM_LARK}, "syntax= must be one of"),
    ],
)
def test_bad_grammar_fields_are_located_in_the_program(tmp_path: Path, field: str, files: dict[str, str],
                                                       fragment: str) -> None:
    text = f'output """x: {{a: {field}}}!"""'
    with pytest.raises(ProgramError) as info:
        compiled(tmp_path, text, files).constraint({})
    assert fragment in str(info.value)
    assert str(tmp_path / "calc.stc") in str(info.value) and ":1:" in str(info.value)


def test_an_error_inside_the_grammar_names_the_grammar_file(tmp_path: Path) -> None:
    with pytest.raises(GrammarError) as info:
        compiled(tmp_path, 'output """x: {a: grammar("bad.lark")}!"""',
                 {"bad.lark": 'start: "a"\n  | undefined_rule\n'}).constraint({})
    assert info.value.source == str(tmp_path / "bad.lark") and info.value.line == 2
