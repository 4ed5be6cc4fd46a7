"""The regex parser reads Python `re` syntax exactly as `re` does, and refuses what it cannot enforce."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from stdsl.compiler import ir
from stdsl.compiler.automata.build import compile_regex
from stdsl.compiler.regex.parser import MAX_REPEAT_COUNT, category_ranges, parse_regex
from stdsl.errors import CompileError, RegexError

PROBES = [
    "", "a", "b", "aa", "aaa", "ab", "]", "]a", "a]", "-", "a-", "{", "a{", "a{1", "a{1,2", "a{}", "{}",
    "\x00", "\n", "\t", "\x07", "\x08", "\x0b", "\x0c", "\r", "A", "é", "e\u0301", "中", "😀", "_", "٣",
    "\u2003", "\u00a0", "0", "9", "x", ".", "\\", "*", "aaaaaaaaaa", "\x0a\x0a", "ab\n",
]

EQUIVALENT = [
    "[]a]", "[^]a]", "[]]", "[]-a]", "[a-]", "[-a]", "[a-b-c]", "[--a]", "[\\w-]", "[\\]a]", "[\\b]", "\\a",
    "a{,3}", "a{}", "a{1", "a{1,2", "a{,}", "a{2,}", "a{0}", "a{0,0}", "{", "a{x}", "a{ 1}",
    "\\0", "\\012", "\\101", "\\x41", "\\u00e9", "\\U0001F600", "[\\x41-\\x43]", "[\\u00e0-\\u00ff]",
    "\\N{LATIN SMALL LETTER E WITH ACUTE}", "[\\N{BLACK STAR}a]",
    "\\.", "\\*", "\\\\", "\\_", "\\é", "\\-", "\\ ", "\\{", "[\\[\\]]", "[.*+?]", "[\\^a]", "[a^]",
    "\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "[\\d\\s]", "[^\\d\\s]", "[\\D]", "[^\\W]", ".", "[^a]",
    "a*?", "a+?", "a??", "a{1,2}?", "(?:ab)*", "(ab|a)*", "(?P<name>a)(?P<other>b)?", "a|", "|", "()",
    "(?:)", "(?#comment)a", "a(?#comment)*", "^a", "a$", "^$", "^", "$", "a|b$", "^a|b",
    "é+", "中文|日本", "[é-ü]{2}", "[^é]", "e\u0301", "😀?😀",
]


def _samples(pattern: str) -> list[str]:
    pieces = sorted({ch for ch in pattern if not 0xD800 <= ord(ch) <= 0xDFFF})
    return PROBES + pieces + [a + b for a in pieces[:6] for b in pieces[:6]]


@pytest.mark.parametrize("pattern", EQUIVALENT)
def test_language_matches_python_re(pattern: str) -> None:
    automaton = compile_regex(pattern)
    compiled = re.compile(pattern)
    for text in _samples(pattern):
        expected = compiled.fullmatch(text) is not None
        assert automaton.accepts(text.encode("utf-8")) == expected, (pattern, text)


@pytest.mark.parametrize("letter", ["d", "w", "s"])
def test_category_tables_equal_python_re_over_every_code_point(letter: str) -> None:
    every_char = np.arange(ir.MAX_UNICODE + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    expected = [(m.start(), m.end() - 1) for m in re.finditer(f"\\{letter}+", every_char)]
    assert list(category_ranges(letter)) == expected


ERRORS = [
    ("(", "missing ), unterminated subpattern", 0),
    ("a(b", "missing ), unterminated subpattern", 1),
    (")", "unbalanced parenthesis", 0),
    ("a)b", "unbalanced parenthesis", 1),
    ("[z-a]", "bad character range z-a", 1),
    ("[\\d-z]", "bad character range", 1),
    ("[a-\\w]", "bad character range", 1),
    ("[", "unterminated character set", 0),
    ("[]", "unterminated character set", 0),
    ("[^]", "unterminated character set", 0),
    ("[a", "unterminated character set", 0),
    ("*a", "nothing to repeat", 0),
    ("a|*", "nothing to repeat", 2),
    ("(+)", "nothing to repeat", 1),
    ("^*", "nothing to repeat", 1),
    ("a**", "multiple repeat", 2),
    ("a{2}{3}", "multiple repeat", 4),
    ("a*??", "multiple repeat", 3),
    ("a*+", "possessive", 2),
    ("a{3,2}", "min repeat greater than max repeat", 1),
    ("\\", "bad escape (end of pattern)", 0),
    ("ab\\", "bad escape (end of pattern)", 2),
    ("[a\\", "bad escape (end of pattern)", 2),
    ("\\e", "bad escape \\e", 0),
    ("\\q", "bad escape \\q", 0),
    ("[\\A]", "bad escape \\A", 1),
    ("[\\8]", "bad escape \\8", 1),
    ("\\x4", "incomplete escape \\x4", 0),
    ("\\u12", "incomplete escape \\u12", 0),
    ("\\U00110000", "bad escape", 0),
    ("\\400", "octal escape value", 0),
    ("[\\400]", "octal escape value", 1),
    ("\\N{NO SUCH CHARACTER NAME}", "undefined character name", 0),
    ("\\N{\ud800}", "undefined character name", 0),  # a name no codec can encode (the slow regex fuzz run)
    ("(?P<a>x)(?P<a>y)", "redefinition of group name", 12),
    ("(?P<1a>x)", "bad character in group name", 4),
    ("(?P<>x)", "missing group name", 4),
    ("(?Px)", "unknown extension ?Px", 0),
    ("(?", "unexpected end of pattern", 2),
    ("(?#never closed", "unterminated comment", 0),
    ("a(?=b)", "lookahead", 1),
    ("a(?!b)", "lookahead", 1),
    ("(?<=a)b", "lookbehind", 0),
    ("(?<!a)b", "lookbehind", 0),
    ("(a)\\1", "backreferences", 3),
    ("(?P<x>a)(?P=x)", "backreferences", 8),
    ("(?i)abc", "inline flags", 0),
    ("(?i:a)bc", "inline flags", 0),
    ("(?>a)", "atomic", 0),
    ("(a)?(?(1)b|c)", "conditional", 4),
    ("a\\bc", "word boundary", 1),
    ("a\\B", "non-boundary", 1),
    ("\\Aa", "anchor \\A", 0),
    ("a\\Z", "anchor \\Z", 1),
    ("a^b", "anchor ^", 1),
    ("a$b", "anchor $", 1),
    ("(^a)", "anchor ^", 1),
    ("a{50000}", "exceeds the limit of 10000", 1),
    ("a{2,50000}", "exceeds the limit", 1),
    ("(ab){10001,}", "exceeds the limit", 4),
]


@pytest.mark.parametrize(("pattern", "message", "position"), ERRORS)
def test_bad_patterns_raise_regex_error_with_position(pattern: str, message: str, position: int) -> None:
    with pytest.raises(RegexError) as info:
        parse_regex(pattern)
    assert message in str(info.value)
    assert info.value.position == position
    assert info.value.pattern == pattern


def test_errors_on_malformed_patterns_agree_with_python_re() -> None:
    """Every pattern `re` rejects we reject too (we also refuse a few that `re` accepts)."""
    for pattern, _, _ in ERRORS:
        try:
            re.compile(pattern)
        except re.error:
            with pytest.raises(RegexError):
                parse_regex(pattern)


def test_huge_counts_are_refused_fast() -> None:
    start = time.perf_counter()
    for pattern in ("a{50000}", "(a{1000}){1000}", "a{4294967296}", "[a-z]{1000000}"):
        with pytest.raises(CompileError):
            compile_regex(pattern)
    assert time.perf_counter() - start < 2.0
    assert MAX_REPEAT_COUNT == 10_000  # as in Lark and GBNF grammars (docs/grammars.md)


def test_a_regex_terminal_takes_the_documented_repetition_counts() -> None:
    """`/[a-z ]{1,2000}/` in a grammar was refused at 1,000 where the docs say 10,000."""
    assert compile_regex("[a-z ]{1,2000}").accepts(b"ab c")
    assert compile_regex("a{10000}").accepts(b"a" * 10000)


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    with pytest.raises(RegexError, match="nested deeper"):
        parse_regex("(" * 500 + "a" + ")" * 500)
    assert parse_regex("(" * 50 + "a" + ")" * 50) == parse_regex("a")


def test_non_str_pattern_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_regex(b"abc")  # type: ignore[arg-type]


def test_lone_surrogate_literal_matches_nothing() -> None:
    assert parse_regex("\\ud800") == ir.NOTHING
    assert parse_regex("a|\\ud800") == parse_regex("a")
