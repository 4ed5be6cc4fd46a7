"""The Lark and GBNF / EBNF readers: every construct, and errors at the right line and column."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import stdsl
from stdsl import Grammar
from stdsl.compiler.grammar import syntax_tree as st
from stdsl.compiler.grammar.gbnf_syntax import parse_gbnf
from stdsl.compiler.grammar.lark_syntax import parse_lark, unescape
from stdsl.compiler.grammar.lowering import detect_syntax
from stdsl.errors import GrammarError


def accepts(text: str, samples: dict[str, bool], syntax: str = "auto") -> None:
    constraint = stdsl.compile(Grammar(text, syntax))
    for sample, expected in samples.items():
        assert constraint.accepts(sample) is expected, (text, sample)


def error_at(text: str, line: int, column: int, words: str, syntax: str = "auto") -> None:
    with pytest.raises(GrammarError) as caught:
        stdsl.compile(Grammar(text, syntax, source="g.lark"))
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"g.lark:{line}:{column}: ")


def test_auto_detection_follows_vllm() -> None:
    assert detect_syntax('root ::= "a"') == "gbnf"
    assert detect_syntax('// a ::= b\nstart: "a"') == "lark"
    assert detect_syntax('# x ::= y\nstart: "a"') == "lark"


def test_lark_constructs() -> None:
    tree = parse_lark('?start: a+ | "x".."z" ~ 2..3\n!a: /b/i "c"i -> alias\n  | [A]\nA: "q"{2,}\n')
    assert set(tree.definitions) == {"start", "a", "A"}
    assert tree.definitions["A"].terminal and tree.definitions["a"].position == (2, 2)
    body = tree.definitions["a"].body
    assert isinstance(body, st.Choice) and len(body.items) == 2


def test_lark_languages() -> None:
    accepts('start: "a"~2..3 "b"{1,2} /c+/ ["d"] ("e" | "f")*', {"aabcc": True, "aaabbcdef": True, "abc": False})
    accepts('start: "x".."z"+ | "AB"i', {"xyz": True, "Ab": True, "aB": True, "w": False})
    accepts('start: /a.b/s', {"a\nb": True})
    accepts('start: /a.b/', {"a\nb": False, "axb": True})
    accepts(r'start: "\x41\u00e9\n\"\\" "\d"', {'Aé\n"\\\\d': True})
    accepts('start: A B\nA: "a" | B\nB: /[0-9]/+', {"a1": True, "12": True, "a": False})
    accepts('start: "a" NOTHING?\n%declare NOTHING', {"a": True})


def test_common_imports_and_ignore() -> None:
    grammar = '%import common.INT -> N\n%import common (WS, CNAME)\n%ignore WS\nstart: CNAME "=" N ("," N)*'
    accepts(grammar, {"x=1": True, "x = 1 , 2 ": True, " x=1": False, "x=1 2": False, "x =": False})
    accepts('%import common.ESCAPED_STRING\nstart: ESCAPED_STRING',
            {'"a\\"b"': True, '"a"b"': False, '"\\\\"': True, '"a\n"': False})
    accepts('%import common.C_COMMENT\nstart: C_COMMENT', {"/* a */": True, "/* a */ b */": False, "/***/": True})


def test_ignore_options() -> None:
    base = '%ignore " "\nstart: "a" "b"'
    accepts(base, {"a b": True, "a  b ": True, " ab": False})
    accepts('%llguidance {"allow_initial_skip": true}\n' + base, {" a b": True})
    accepts('%grammar_options {"ignore_once": true}\n%ignore /[ ]{1,2}/\nstart: "a" "b"',
            {"a  b": True, "a   b": False, "a    b": False})


def test_gbnf_constructs() -> None:
    grammar = r'''
root ::= item ("," item)* # comment
item ::= [a-c]{2} | "\x41" [^\n\]] | "q"{1,}
  | ws "z"
ws ::= | " "
'''
    accepts(grammar, {"ab,Ax": True, "Ab": True, "qqq, z": True, "qqq,z": True, "qqq ,z": False,
                      "A]": False, " z": True})
    accepts('root ::= [\\u00e0-\\u00e9]+ "\\U0001F600" .', {"àé😀x": True, "àé😀": False})
    accepts("root ::= [-a] [a-] [\\-]", {"-a-": True, "aa-": True, "a--": True, "b--": False})
    tree = parse_gbnf('root ::= "a"\n  "b"\nx ::= "c"')
    assert set(tree.definitions) == {"root", "x"}


@pytest.mark.parametrize("text, line, column, words", [
    ('start: "a"\nstart: "b"', 2, 1, "defined twice"),
    ('start: b', 1, 8, "undefined rule 'b'"),
    ('start: B', 1, 8, "undefined terminal 'B'"),
    ('x: "a"', 1, 1, "no start rule 'start'"),
    ('start: "a" b\nb: "x" b', 2, 1, "matches nothing"),
    ('start: /a(?=b)/', 1, 10, "lookahead"),
    ('start: A\nA.2: "a"', 2, 2, "priorities"),
    ('start: "a"\n%override start: "b"', 2, 1, "%override"),
    ('start: x\nx[stop="a"]: /.*/', 2, 3, "'stop'"),
    ('start: x\nx[lazy]: y "a"\ny: "b"', 2, 10, "the lazy rule 'x' may only use terminals"),
    ('start: "a" <[12]>', 1, 12, "needs the tokenizer"),
    ('start: "a" <[^12]>', 1, 12, "negated sets"),
    ('start: "a" <[3-1]>', 1, 12, "empty"),
    ('start: A\nA: "a" <|eot|>', 2, 8, "cannot stand inside a terminal"),
    ('%ignore <|eot|>\nstart: "a"', 1, 9, "cannot stand inside a terminal"),
    ('start: x\nx[lazy]: "a" <|eot|>', 2, 14, "cannot stand inside the lazy rule 'x'"),
    ('start: "a" )', 1, 12, "unmatched"),
    ('start: ("a"', 1, 8, "unclosed"),
    ('start: "a" @', 1, 12, "unexpected character"),
    ('%import foo.BAR\nstart: "a"', 1, 9, "only Lark's 'common'"),
    ('%import common.NOPE\nstart: "a"', 1, 16, "common has no terminal"),
    ('start: A\nA: A "a"', 2, 1, "refers to itself"),
    ('start: A\nA: b\nb: "x"', 2, 4, "refers to the rule 'b'"),
    ('start: /a/m', 1, 8, "flag 'm'"),
    ('start: "\\xZZ"', 1, 9, "bad escape"),
    ('start: "b".."a"', 1, 8, "empty"),
    ('start: "a" ~ 3..2', 1, 12, "empty"),
    ('%llguidance {"nope": 1}\nstart: "a"', 1, 13, "unknown grammar option"),
    ('start: x{y}\nx: "a"', 1, 9, "templates"),
])
def test_lark_errors(text: str, line: int, column: int, words: str) -> None:
    error_at(text, line, column, words)


@pytest.mark.parametrize("text, line, column, words", [
    ('root ::= "a"\nroot ::= "b"', 2, 1, "defined twice"),
    ('root ::= x', 1, 10, "undefined rule 'x'"),
    ('main ::= "a"', 1, 1, "no start rule 'root'"),
    ('root ::= "a" (= "b")', 1, 14, "lookahead"),
    ('root ::= TagDispatch("a")', 1, 10, "macros"),
    ('root ::= "a\\q"', 1, 12, "unknown escape"),
    ('root ::= [b-a]', 1, 10, "empty"),
    ('root ::= "a" {3,2}', 1, 14, "empty"),
    ('root ::= ("a"', 1, 14, "expected ')'"),
    ('"a" ::= b', 1, 1, "expected a rule"),
    ('root ::= "abc', 1, 10, "unterminated string"),
])
def test_gbnf_errors(text: str, line: int, column: int, words: str) -> None:
    error_at(text, line, column, words)


def test_start_override_and_errors_name_the_source() -> None:
    constraint = stdsl.compile(Grammar('a: "x"\nb: "y"', "lark", start="b"))
    assert constraint.accepts("y") and not constraint.accepts("x")
    with pytest.raises(GrammarError, match=r"^<grammar>:1:1: .*start rule 'zz'"):
        stdsl.compile(Grammar('a: "x"', "lark", start="zz"))


def _unescaped_char_by_char(body: str) -> str | tuple[str, int]:
    """Lark's string escapes read one character at a time (the oracle): the text, or the error's (message, offset)."""
    escapes = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", '"': '"', "\\": "\\"}
    widths = {"x": 2, "u": 4, "U": 8}
    out, index = [], 0
    while index < len(body):
        if body[index] != "\\" or index + 1 >= len(body):
            out.append(body[index])
            index += 1
        elif body[index + 1] in escapes:
            out.append(escapes[body[index + 1]])
            index += 2
        elif body[index + 1] in widths:
            digits = body[index + 2:index + 2 + widths[body[index + 1]]]
            if len(digits) != widths[body[index + 1]] or any(d not in "0123456789abcdefABCDEF" for d in digits):
                return "bad escape", index
            if int(digits, 16) > 0x10FFFF or 0xD800 <= int(digits, 16) <= 0xDFFF:
                return "not a Unicode scalar value", index
            out.append(chr(int(digits, 16)))
            index += 2 + len(digits)
        else:
            out.append("\\")
            index += 1
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(hs.text(hs.sampled_from(["\\", "n", "x", "u", "U", "q", "0", "4", "f", "F", "D", "8", '"', "é", "a"]),
               max_size=16))
def test_string_escapes_read_as_one_character_at_a_time(body: str) -> None:
    def error(message: str, offset: int) -> GrammarError:
        return GrammarError(message, "g.lark", 1, offset)

    expected = _unescaped_char_by_char(body)
    if isinstance(expected, tuple):
        with pytest.raises(GrammarError) as caught:
            unescape(body, error)
        assert expected[0] in str(caught.value) and caught.value.column == expected[1]
    else:
        assert unescape(body, error) == expected
