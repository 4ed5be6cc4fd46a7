"""The NFA builder shares a sub-expression used with one continuation, so objects with many optional members stay linear."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.nfa import build_nfa, estimated_states
from stdsl.compiler.json_schema.to_ir import schema_to_ir


def _object_schema(count: int) -> dict:
    member = {"type": "object", "properties": {f"f{i}": {"type": "string", "maxLength": 8} for i in range(6)}}
    return {"type": "object", "properties": {f"p{i}": member for i in range(count)}, "additionalProperties": False}


def test_optional_members_are_shared_not_copied() -> None:
    small, large = (build_nfa(schema_to_ir(_object_schema(n))).num_states for n in (8, 32))
    assert large < 5 * small


def test_estimate_counts_shared_nodes_once_and_counted_copies_each() -> None:
    shared = ir.literal("abc")
    assert estimated_states(ir.alt(ir.seq(shared, ir.literal("x")), ir.seq(shared, ir.literal("y")))) < 12
    assert estimated_states(ir.repeat(shared, 0, 100)) >= 300


def test_shared_suffixes_keep_the_language() -> None:
    tail = ir.repeat(ir.byte_set([(ord("a"), ord("b"))]), 0, 3)
    node = ir.alt(ir.seq(ir.literal("x"), tail), ir.seq(ir.literal("yy"), tail), tail)
    automaton = build_automaton(node)
    pattern = re.compile(r"(?:x|yy)?[ab]{0,3}")
    for text in ["", "x", "yyab", "xabb", "yyabab", "ab", "xy", "abx", "bbb", "bbbb"]:
        assert automaton.accepts(text.encode()) == bool(pattern.fullmatch(text)), text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "ab", "ba"]), min_size=1, max_size=4),
       st.integers(min_value=0, max_value=2), st.integers(min_value=0, max_value=3),
       st.text(alphabet="abx", max_size=10))
def test_shared_repeats_match_re(words: list[str], low: int, extra: int, text: str) -> None:
    word = ir.alt(*(ir.literal(w) for w in words))
    node = ir.seq(ir.repeat(word, low, low + extra), ir.optional(ir.literal("x")), ir.star(word))
    choice = "|".join(re.escape(w) for w in words)
    pattern = re.compile(f"(?:{choice}){{{low},{low + extra}}}x?(?:{choice})*")
    assert build_automaton(node).accepts(text.encode()) == bool(pattern.fullmatch(text))
