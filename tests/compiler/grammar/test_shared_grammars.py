"""The real grammars of `tests/data/grammars` (llama.cpp, vLLM, Lark, Outlines, llguidance and XGrammar docs).

Every file compiles or is refused with a GrammarError at a line and column; each one that compiles accepts and
refuses hand-written strings; where Lark reads the file, stdsl agrees with Lark's Earley parser on those strings
and on edits of the accepted ones (up to the documented differences: no ignored text before the first terminal,
and the union of the terminals' splits where Lark's lexer would take one match); the GBNF and Lark twins of the
SQL grammar accept the same strings.
"""

from __future__ import annotations

import itertools
import random

import lark
import pytest

from stdsl import Grammar, compile
from stdsl.compiler.special_tokens import spelled
from stdsl.errors import GrammarError
from tests.compiler.grammar.generated_grammars import mutations
from tests.compiler.grammar.shared_grammar_cases import CASES, MAY_BE_REFUSED, PLAIN_TEXT_ACCEPTED
from tests.data_files import GRAMMARS

SUFFIXES = (".lark", ".gbnf", ".ebnf")
FILES = sorted(p.name for p in GRAMMARS.iterdir() if p.suffix in SUFFIXES)
IGNORED = " \t\n\r\f"


def compiled(name: str):
    return compile(Grammar.from_file(str(GRAMMARS / name)), max_seconds=30)


def lark_reading(name: str, lexer: str) -> lark.Lark | None:
    """Lark's Earley parser on the file, or None where Lark cannot read it (GBNF, llguidance extensions)."""
    text = (GRAMMARS / name).read_text()
    try:
        return lark.Lark(text, parser="earley", lexer=lexer)
    except lark.exceptions.LarkError:
        return None


def parses(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def test_every_shared_grammar_has_cases_or_a_documented_refusal() -> None:
    unknown = [name for name in FILES if name not in CASES and name not in MAY_BE_REFUSED]
    assert not unknown, f"add accept/reject cases for {unknown}"


@pytest.mark.parametrize("name", FILES)
def test_compiles_or_is_refused_with_a_position(name: str) -> None:
    grammar = Grammar.from_file(str(GRAMMARS / name))
    try:
        constraint = compile(grammar, max_seconds=30)
    except GrammarError as error:
        assert name not in CASES, f"{name} must compile: {error}"
        assert error.source == str(GRAMMARS / name)
        assert 1 <= error.line <= grammar.text.count("\n") + 1 and error.column >= 1
        assert str(error).startswith(f"{error.source}:{error.line}:{error.column}: ")
        return
    assert constraint.kind == "grammar"
    for text in PLAIN_TEXT_ACCEPTED.get(name, []):
        assert constraint.accepts(text), f"{name} refuses plain text {text!r}"


@pytest.mark.parametrize("name", sorted(n for n in CASES if n in FILES))
def test_accepts_and_refuses_by_hand(name: str) -> None:
    constraint = compiled(name)
    accepted, refused = CASES[name]
    wrong = [s for s in accepted if not constraint.accepts(s)] + [s for s in refused if constraint.accepts(s)]
    assert not wrong, f"{name}: wrong on {wrong}"
    assert all(constraint.accepts(spelled(s, constraint.special_tokens)) for s in accepted)


@pytest.mark.parametrize("name", sorted(n for n in CASES if n in FILES and n.endswith(".lark")))
def test_agrees_with_lark_earley(name: str) -> None:
    dynamic = lark_reading(name, "dynamic")
    if dynamic is None:
        pytest.skip(f"Lark cannot read {name} (llguidance / XGrammar extensions)")
    complete = lark_reading(name, "dynamic_complete")
    assert complete is not None
    constraint = compiled(name)
    rng = random.Random(name)
    accepted, refused = CASES[name]
    alphabet = "".join(sorted(set("".join(accepted)))) + " \t\n\"\\{}[]()"
    strings = list(dict.fromkeys(accepted + refused + [m for s in accepted for m in mutations(s, rng, alphabet, 25)]))
    for s in strings:
        got, lark_says = constraint.accepts(s), parses(dynamic, s)
        if got == lark_says:
            continue
        leading_ignored = s[:1] in tuple(IGNORED) and lark_says and not got
        union_of_splits = got and not lark_says and parses(complete, s)
        assert leading_ignored or union_of_splits, f"{name}: stdsl says {got}, Lark says {lark_says} on {s!r}"


def sql_sentences() -> list[str]:
    """Every sentence of the vLLM SQL subset (it is finite)."""
    columns, tables, numbers = ("col_1", "col_2"), ("table_1", "table_2"), ("1", "2")
    return [f"SELECT{c}from{t}where{d}={n}" for c, t, d, n in itertools.product(columns, tables, columns, numbers)]


def test_sql_twins_accept_the_same_strings() -> None:
    ebnf, lark_twin = compiled("vllm_sql_subset.ebnf"), compiled("vllm_sql_subset.lark")
    oracle = lark_reading("vllm_sql_subset.lark", "dynamic")
    assert oracle is not None
    rng = random.Random(0)
    sentences = sql_sentences()
    alphabet = "".join(sorted(set("".join(sentences)))) + " 3"
    edited = [m for s in sentences for m in mutations(s, rng, alphabet, 20)]
    for s in sentences + edited + ["", "SELECT"]:
        expected = parses(oracle, s)
        assert ebnf.accepts(s) == expected == lark_twin.accepts(s), f"twins disagree on {s!r} (Lark: {expected})"
    assert all(ebnf.accepts(s) for s in sentences)
