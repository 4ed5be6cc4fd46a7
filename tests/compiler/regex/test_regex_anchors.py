"""`^` / `$` anywhere in JSON Schema patterns: the compiled search language equals ECMA-262 search.

Oracle: Python `re.search` with `$` written `\\Z` (Python's `$` also holds before a final newline,
ECMA's does not) and `.` written as ECMA's dot; with those two spellings the two engines agree on
these constructs.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.scalars.strings import ECMA_DOT, pattern_search
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.compiler.regex.anchors import END, START, AnchoredParts, split_anchors
from stdsl.compiler.regex.parser import parse_anchored
from stdsl.errors import EmptyLanguageError, SchemaError

Pair = tuple[str, str]


def _atoms() -> st.SearchStrategy[Pair]:
    """Leaves as (ECMA pattern, Python oracle pattern)."""
    return st.sampled_from([("a", "a"), ("b", "b"), ("[ab]", "[ab]"), ("[^a]", "[^a]"), (".", ECMA_DOT),
                            ("^", "^"), ("$", "\\Z"), ("^", "^"), ("$", "\\Z")])


QUANTIFIERS = ["*", "+", "?", "{0,2}", "{1,3}", "{2}", "{2,}", "*?"]


def _extend(inner: st.SearchStrategy[Pair]) -> st.SearchStrategy[Pair]:
    """Sequences, alternations, groups and quantified groups built from smaller patterns."""
    def join(parts: list[Pair], separator: str) -> Pair:
        return separator.join(p[0] for p in parts), separator.join(p[1] for p in parts)

    group = st.tuples(inner, st.sampled_from(["(", "(?:"])).map(lambda t: (f"{t[1]}{t[0][0]})", f"{t[1]}{t[0][1]})"))
    quantified = st.tuples(group, st.sampled_from(QUANTIFIERS)).map(lambda t: (t[0][0] + t[1], t[0][1] + t[1]))
    return st.one_of(st.lists(inner, min_size=2, max_size=4).map(lambda ps: join(ps, "")),
                     st.lists(inner, min_size=2, max_size=3).map(lambda ps: join(ps, "|")),
                     group, quantified)


patterns = st.recursive(_atoms(), _extend, max_leaves=8)


def _oracle(python_pattern: str, text: str) -> bool:
    return re.search(python_pattern, text) is not None


def _plain_matcher(pattern: str) -> Automaton | None:
    """The decoded-text automaton of the pattern's search language (None when empty)."""
    try:
        return build_automaton(pattern_search(pattern, "#/pattern", True))
    except EmptyLanguageError:
        return None


def _schema_matcher(pattern: str) -> Automaton | None:
    """The automaton of `{"type": "string", "pattern": pattern}` (None when empty)."""
    try:
        return build_automaton(schema_to_ir({"type": "string", "pattern": pattern}))
    except EmptyLanguageError:
        return None


def _accepts(automaton: Automaton | None, data: bytes) -> bool:
    return automaton is not None and automaton.accepts(data)


@settings(max_examples=300, deadline=None)
@given(patterns, st.lists(st.text(alphabet="ab\n", max_size=5), min_size=1, max_size=12))
def test_decoded_search_language_equals_ecma_search(pair: Pair, texts: list[str]) -> None:
    pattern, oracle = pair
    automaton = _plain_matcher(pattern)
    for text in texts + ["", "\n", "a\n", "ab"]:
        assert _accepts(automaton, text.encode("utf-8")) == _oracle(oracle, text), (pattern, text)


@settings(max_examples=150, deadline=None)
@given(patterns, st.lists(st.text(alphabet="ab\u00e9", max_size=5), min_size=1, max_size=12))
def test_string_schema_accepts_exactly_the_matching_strings(pair: Pair, texts: list[str]) -> None:
    pattern, oracle = pair
    automaton = _schema_matcher(pattern)
    for text in texts + [""]:
        data = json.dumps(text, ensure_ascii=False).encode("utf-8")
        assert _accepts(automaton, data) == _oracle(oracle, text), (pattern, text)


WORDS = r"^$|(^(?:\S+\s+){0,99}\S+$)"
NO_COMMA = r"^([^,]|$)"
UUID_OR_EMPTY = r"(^$)|(^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$)"


@pytest.mark.parametrize(("pattern", "accepted", "rejected"), [
    (WORDS, ["", "a", "two words", "a b c", " ".join(["w"] * 100)],
     [" ", "a ", " a", "a  ", " ".join(["w"] * 101)]),
    (NO_COMMA, ["", "a", "a,", "ab"], [",", ",a"]),
    (UUID_OR_EMPTY, ["", "0123abcd-0123-4567-89ab-0123456789ab"],
     [" ", "0123abcd-0123-4567-89ab-0123456789ab ", "x0123abcd-0123-4567-89ab-0123456789ab", "0123"]),
    ("(^|x)a", ["a", "xa", "bxa", "ab"], ["ba", "", "x"]),
    ("a$|^b", ["a", "ba", "b", "bc"], ["ab", "cb", ""]),
    ("(a|$)(b|^)", ["ab", "", "cab"], ["a", "c", "b"]),
    ("(^a)*b", ["b", "ab", "aab", "cb"], ["", "a"]),
    ("x(^|$)", ["x", "ax"], ["xa", ""]),
])
def test_named_patterns(pattern: str, accepted: list[str], rejected: list[str]) -> None:
    automaton = _schema_matcher(pattern)
    for text in accepted:
        assert _accepts(automaton, json.dumps(text).encode()), (pattern, text)
    for text in rejected:
        assert not _accepts(automaton, json.dumps(text).encode()), (pattern, text)


def test_dollar_does_not_match_before_a_final_newline() -> None:
    automaton = _schema_matcher("a$")
    assert _accepts(automaton, b'"ba"')
    assert not _accepts(automaton, b'"a\\n"')
    assert re.search("a$", "a\n") is not None


def test_an_anchor_that_can_never_hold_gives_the_empty_language() -> None:
    assert _schema_matcher("a^b") is None
    assert _schema_matcher("a$b|b^") is None
    assert _accepts(_schema_matcher("a^b|c"), b'"c"')


@pytest.mark.parametrize("pattern", ["^*", "a$+", "x^?", "a|^{2}"])
def test_a_quantified_bare_anchor_is_refused(pattern: str) -> None:
    with pytest.raises(SchemaError, match="nothing to repeat"):
        schema_to_ir({"type": "string", "pattern": pattern})


def test_pattern_properties_keys_use_anchors_anywhere() -> None:
    schema = {"type": "object", "patternProperties": {"^x|y$": {"type": "integer"}}, "additionalProperties": False}
    automaton = build_automaton(schema_to_ir(schema))
    for text in ('{"x1":1}', '{"ay":2}', '{"xy":3}', "{}"):
        assert automaton.accepts(text.encode()), text
    for text in ('{"ax":1}', '{"ya":1}', '{"x1":"s"}'):
        assert not automaton.accepts(text.encode()), text


def test_split_of_anchor_free_ir_is_the_same_tree() -> None:
    node = parse_anchored("a(b|c)*d{2,3}").free
    assert split_anchors(node) == AnchoredParts(node, ir.NOTHING, ir.NOTHING, ir.NOTHING)
    assert split_anchors(node).free is node


def test_split_of_anchor_leaves() -> None:
    assert split_anchors(START) == AnchoredParts(ir.NOTHING, ir.EMPTY, ir.NOTHING, ir.NOTHING)
    assert split_anchors(END) == AnchoredParts(ir.NOTHING, ir.NOTHING, ir.EMPTY, ir.NOTHING)
    assert split_anchors(ir.seq(START, END)) == AnchoredParts(ir.NOTHING, ir.NOTHING, ir.NOTHING, ir.EMPTY)


def test_anchors_nested_too_deeply_are_refused_with_a_clear_error() -> None:
    with pytest.raises(SchemaError, match="nested too deeply"):
        schema_to_ir({"type": "string", "pattern": "(x|^|$)" * 80})
    assert _accepts(_schema_matcher("(x|^|$)" * 40), b'"xx"')


def test_long_anchored_patterns_split_into_flat_parts() -> None:
    nothing = ir.NOTHING
    assert parse_anchored("^" + "ab" * 2000 + "$") == AnchoredParts(nothing, nothing, nothing, ir.literal("ab" * 2000))
    assert parse_anchored("(a|b)^c|" * 300 + "d") == AnchoredParts(ir.literal("d"), nothing, nothing, nothing)
