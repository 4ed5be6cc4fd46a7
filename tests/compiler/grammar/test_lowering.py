"""Grammars lowered exactly: DFA or pushdown as the recursion requires, and `accepts` equal to Lark's Earley parser
(`lexer="dynamic"`) on every short string, outside the documented differences (docs/grammars.md)."""

from __future__ import annotations

import itertools
import random
import re

import lark
import pytest

import stdsl
from stdsl import Grammar
from stdsl.compiler.constraint import Constraint
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.errors import GrammarError
from tests.data_files import GRAMMARS


def lark_accepts(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def strings(alphabet: str, longest: int, extra: int, seed: int = 0) -> list[str]:
    """Every string over `alphabet` up to `longest` characters, then `extra` random ones up to twice as long."""
    out = ["".join(p) for n in range(longest + 1) for p in itertools.product(alphabet, repeat=n)]
    rng = random.Random(seed)
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randint(longest + 1, 2 * longest))) for _ in range(extra)]
    return out


def mutations(seeds: list[str], alphabet: str, count: int, seed: int = 0) -> list[str]:
    """Seeds and random one- or two-character edits of them."""
    rng = random.Random(seed)
    out = list(seeds)
    for _ in range(count):
        text = list(rng.choice(seeds))
        for _ in range(rng.randint(1, 2)):
            at = rng.randint(0, len(text))
            edit = rng.choice("idr")
            if edit == "i" or not text:
                text.insert(at, rng.choice(alphabet))
            elif edit == "d":
                text.pop(min(at, len(text) - 1))
            else:
                text[min(at, len(text) - 1)] = rng.choice(alphabet)
        out.append("".join(text))
    return out


def assert_same_as_lark(text: str, samples: list[str], skip_leading: str = "") -> None:
    """stdsl's grammar accepts exactly the samples Lark accepts (samples opening with ignored text aside: Lark
    allows it there, llguidance and stdsl only with allow_initial_skip)."""
    constraint = stdsl.compile(Grammar(text, "lark"))
    parser = lark.Lark(text, parser="earley", lexer="dynamic")
    checked = 0
    for sample in samples:
        if skip_leading and sample[:1] in skip_leading:
            continue
        checked += 1
        assert constraint.accepts(sample) == lark_accepts(parser, sample), (text, sample)
    assert checked > len(samples) // 2


ARITHMETIC = """
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom
?atom: DIGIT | "-" atom | "(" sum ")"
DIGIT: /[0-9]/
%ignore " "
"""


def test_left_recursive_arithmetic_matches_lark() -> None:
    constraint = stdsl.compile(Grammar(ARITHMETIC))
    assert isinstance(constraint, PushdownConstraint)
    assert_same_as_lark(ARITHMETIC, strings("1+*()- ", 4, 400) + mutations(["(1+2)*-3", "1 - (2*(3))"], "1+*()- ", 400),
                        skip_leading=" ")


def test_lists_and_nesting_match_lark() -> None:
    grammar = """
start: value
value: list | WORD | pair
list: "[" [value ("," value)*] "]"
pair: WORD ":" value
WORD: /[ab]/
"""
    assert_same_as_lark(grammar, strings("[],a:", 5, 300) + mutations(["[a,[b:a],[]]", "a:[a:b]"], "[],ab:", 400))


CALCULATOR = """
%import common.CNAME
%import common.NUMBER
%import common.WS
%ignore WS
start: stmt+
stmt: CNAME "=" expr ";" | "print" expr ";" | "if" expr "{" stmt* "}" ["else" "{" stmt* "}"]
?expr: expr "+" term | expr "-" term | term
?term: term "*" factor | factor
?factor: NUMBER | CNAME | CNAME "(" [expr ("," expr)*] ")" | "(" expr ")" | "-" factor
"""


def test_bracketed_parts_make_keyword_grammars_compile() -> None:
    seeds = ["x = 1 + f(2, y*3);print -x;", "if x { y = 2; } else { print (1); }", "printx;", "if(a){if b {}}"]
    assert_same_as_lark(CALCULATOR, mutations(seeds, "xyf1(),;={} -+*ifprnt", 250), skip_leading=" ")
    sexpr = '%import common.WS\n%ignore WS\nstart: sexpr\nsexpr: atom | "(" sexpr* ")"\natom: /[a-z]+/ | /[0-9]/'
    assert_same_as_lark(sexpr, strings("()a1 ", 4, 300), skip_leading=" ")
    markup = 'start: element\nelement: "<" NAME ">" content* "</" NAME ">"\ncontent: element | TEXT\n' \
             'NAME: /[a-z]/\nTEXT: /[^<a-z]/'
    assert_same_as_lark(markup, mutations(["<a>x<b></b></a>", "<a></b>"], "<>/abx", 500))


def test_regular_recursion_becomes_one_dfa() -> None:
    grammars = {
        'start: start "+" "1" | "1"': {"1+1+1": True, "1+": False},
        'start: "x" start | "y"': {"xxy": True, "x": False},
        'start: a\na: b "x" | "y"\nb: a "z" | "w"': {"wxzx": True, "yzx": True, "wz": False},
        'start: item*\nitem: "a" | "(" ")"': {"a()a": True, "(": False},
    }
    for text, samples in grammars.items():
        constraint = stdsl.compile(Grammar(text))
        assert isinstance(constraint, Constraint), text
        parser = lark.Lark(text, parser="earley", lexer="dynamic")
        for sample, expected in samples.items():
            assert constraint.accepts(sample) is expected is lark_accepts(parser, sample), (text, sample)


def test_self_embedding_and_nullable_rules_use_the_pushdown() -> None:
    text = 'start: a\na: "(" a ")" a |'
    constraint = stdsl.compile(Grammar(text))
    assert isinstance(constraint, PushdownConstraint)
    assert_same_as_lark(text, strings("()", 8, 0))


def test_ignore_stands_after_terminals_only() -> None:
    text = '%ignore " "\nstart: "ab" NAME\nNAME: "c" "d"'
    constraint = stdsl.compile(Grammar(text))
    assert constraint.accepts("ab cd ") and constraint.accepts("abcd")
    assert not constraint.accepts("a bcd") and not constraint.accepts("abc d") and not constraint.accepts(" abcd")


def test_unliftable_conflict_is_refused_with_the_rule_and_byte() -> None:
    text = 'start: a\na: "x" a "x" | "x"'
    with pytest.raises(GrammarError) as caught:
        stdsl.compile(Grammar(text, source="g.lark"))
    assert caught.value.line == 2 and "'a'" in str(caught.value) and "'x'" in str(caught.value)


def test_json_blocks_and_nested_grammars() -> None:
    text = 'start: "call " %json {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    constraint = stdsl.compile(Grammar(text))
    assert constraint.accepts('call {"n": 3}') and constraint.accepts('call {"n":3}')
    assert not constraint.accepts('call {"n": "3"}')
    nested = 'start: "[" %lark {\n  %ignore " "\n  start: item ":" "1"\n  item: "x" | "(" item ")"\n} "]"'
    constraint = stdsl.compile(Grammar(nested))
    assert constraint.accepts("[((x)) : 1 ]") and not constraint.accepts("[ x:1]") and not constraint.accepts("[(x:1]")


def test_lazy_rules_end_at_their_first_match() -> None:
    grammar = 'start: x "!" x "."\nx[lazy]: /[ab]*/ "ab"'
    constraint = stdsl.compile(Grammar(grammar))
    body = re.compile("[ab]*ab")
    lazy = [w for w in strings("ab", 6, 0)
            if body.fullmatch(w) and not any(body.fullmatch(w[:k]) for k in range(len(w)))]
    for left, right in itertools.product(strings("ab", 5, 0), repeat=2):
        assert constraint.accepts(f"{left}!{right}.") == (left in lazy and right in lazy), (left, right)
    calls = stdsl.compile(Grammar(shared("llg_lazy_text_interleaved_toolcalls.lark")))
    assert calls.accepts('hi <function=foo>{"a": 1}</function> bye') and calls.accepts("")


def test_stack_cap_and_deadline_hold() -> None:
    constraint = stdsl.compile(Grammar('start: "(" start ")" | "x"'))
    assert constraint.accepts("(" * 60 + "x" + ")" * 60)
    assert not constraint.accepts("(" * 70 + "x" + ")" * 70)
    with pytest.raises(stdsl.errors.CompileTimeError):
        stdsl.compile(Grammar("start: " + " | ".join(f'"w{i}" /[a-z]{{1,9}}[0-9]{{1,9}}x{i}/' for i in range(3000))),
                      max_seconds=0.05)


def shared(name: str) -> str:
    return (GRAMMARS / name).read_text(encoding="utf-8")


def test_sql_twins_accept_the_same_strings() -> None:
    gbnf, lark_text = shared("vllm_sql_subset.ebnf"), shared("vllm_sql_subset.lark")
    left, right = stdsl.compile(Grammar(gbnf)), stdsl.compile(Grammar(lark_text))
    seeds = ["SELECTcol_1fromtable_1wherecol_2=1", "SELECTcol_2fromtable_2wherecol_1=2"]
    for sample in mutations(seeds, "SELCTcol_12fromtablewhere= ", 600):
        assert left.accepts(sample) == right.accepts(sample), sample
    assert left.accepts(seeds[0]) and not left.accepts("SELECT col_1 from table_1 where col_2=1")


@pytest.mark.parametrize("name, seeds, alphabet", [
    ("lark_json_official.lark", ['{"a": [1, -2.5e3, true, null, {"b": "x\\"y"}]}', "[ ]", '"s"'], '{}[]:,"a1.e- tn'),
    ("outlines_arithmetic.lark", ["(1 + 2) * -3", "1.5/2e3-.5"], "1.e+-*/() "),
    ("xgr_ids_ignore_ws.lark", ["id=1, id=22", "id=3 ,id=4\n"], "id=1, \n"),
])
def test_shared_lark_grammars_match_lark(name: str, seeds: list[str], alphabet: str) -> None:
    text = shared(name)
    assert_same_as_lark(text, mutations(seeds, alphabet, 500), skip_leading=" \t\n")


@pytest.mark.parametrize("name, accepted, rejected", [
    ("llamacpp_json.gbnf", ['{"a": [1, 2.5, "x\\n"]}', '{}', '{ }\n '], ['{"a" 1}', '[1]', '{"a": 01}']),
    ("llamacpp_arithmetic.gbnf", ["x=1\n", "a+b = (c*d)\n", "x=1\ny=2\n"], ["x=\n", "x=1"]),
    ("xgr_ebnf_json_string.ebnf", ['"a\\u00e9\\n"', '""'], ['"\\x"', '"a']),
    ("llg_ignore_once_bounded_ws.lark", ["A!", "A \t!", "A!        "], ["A         !", " A!"]),
    ("llg_llama31_json_toolcall.lark", ["hello {", '{"name": "get_weather", "parameters": {"city": "Oslo"}}'],
     ['{"name": "x"}', "{hello"]),
    ("xgr_nested_lark.lark", ["[x:1]", "[(x) : -2 ]"], ["[ x:1]", "[x:1.5]"]),
])
def test_shared_grammars_accept_and_reject(name: str, accepted: list[str], rejected: list[str]) -> None:
    constraint = stdsl.compile(Grammar(shared(name)))
    for sample in accepted:
        assert constraint.accepts(sample), sample
    for sample in rejected:
        assert not constraint.accepts(sample), sample


@pytest.mark.parametrize("name, specials", [
    ("llg_llama31_brave_wolfram_special_tokens.lark", ("<|python_tag|>", "<|eom_id|>")),
    ("llg_reasoning_then_json.lark", ("<think>", "</think>")),
])
def test_shared_special_token_grammars_compile_without_a_tokenizer(name: str, specials: tuple[str, ...]) -> None:
    assert stdsl.compile(Grammar(shared(name))).special_tokens == specials
