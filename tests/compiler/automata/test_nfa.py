"""The NFA builder shares a sub-expression used with one continuation (objects with many optional members stay
linear), and copies a counted repetition's periodic steps state by state equal to walking each one."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata import nfa as nfa_module
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.embedded_moves import dfa_edges
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.automata.nfa import build_nfa, estimated_states, longest_counts
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import StateBudgetError
from tests.compiler.automata.counted_regexes import counted_regexes


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


byte_ranges = st.lists(st.tuples(st.integers(97, 100), st.integers(0, 2)).map(lambda t: (t[0], t[0] + t[1])),
                       min_size=1, max_size=2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(byte_ranges, min_size=1, max_size=4), min_size=1, max_size=4),
       st.text(alphabet="abcdefxy", max_size=7))
def test_equal_byte_sets_share_states_by_value(branches: list[list[list[tuple[int, int]]]], text: str) -> None:
    """Byte sets built as separate but equal objects, before one continuation, share their states as one object
    used twice does (the builder memoizes them by their ranges), and the language is the regex's."""

    def node(fresh: bool) -> ir.Node:
        made: dict[tuple[tuple[int, int], ...], ir.Node] = {}

        def one(ranges: list[tuple[int, int]]) -> ir.Node:
            key = ir.merged_ranges(ranges)
            return ir.byte_set(key) if fresh else made.setdefault(key, ir.byte_set(key))

        return ir.seq(ir.alt(*(ir.seq(ir.optional(ir.literal("y")), *(one(r) for r in branch), one([(97, 98)]))
                               for branch in branches)), ir.literal("x"))

    fresh, shared = node(True), node(False)
    assert build_nfa(fresh).num_states == build_nfa(shared).num_states
    pattern = re.compile(ir.to_pattern(fresh).encode().decode("unicode_escape"))
    assert build_automaton(fresh).accepts(text.encode()) == bool(pattern.fullmatch(text))


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


def _walked_and_copied(node: ir.Node, max_states: int = 2_000_000) -> tuple[nfa_module.NFA, nfa_module.NFA, int]:
    """The NFA built by walking every counted copy, the one built with copies, and how many copy runs it made."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nfa_module, "PERIOD_PROBES", 0)
        walked = build_nfa(node, max_states)
    runs: list[int] = []
    original = nfa_module._Builder._copy_steps

    def counting(self: nfa_module._Builder, low: int, start: int, end: int, after: int, count: int) -> int:
        runs.append(count)
        return original(self, low, start, end, after, count)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nfa_module._Builder, "_copy_steps", counting)
        copied = build_nfa(node, max_states)
    return walked, copied, len(runs)


def _moves(nfa: nfa_module.NFA) -> tuple[list[list[int]], list[list[tuple[int, int]]], int, int]:
    return [list(m) for m in nfa.eps], [list(m) for m in nfa.edges], nfa.start, nfa.accept


@pytest.mark.parametrize("pattern", [
    "(?:[a-z]é){0,50}", r"(?:\w){3,40}", "(?:ab|cd){2,40}x", "(?:(?:ab){0,9}c){0,12}d", "(?:a*b){7}",
    "(?:[0-9]{1,3}\\.){0,20}[0-9]+", '"(?:[^"\\\\]|\\\\.){0,64}"',
])
def test_copied_repeats_are_the_walked_nfa(pattern: str) -> None:
    walked, copied, runs = _walked_and_copied(parse_regex(pattern))
    assert runs > 0
    assert _moves(copied) == _moves(walked)
    assert copied.byte_sets == walked.byte_sets


def test_copies_respect_the_state_budget() -> None:
    long_word = ir.literal("q" * 40)
    node = ir.repeat(ir.alt(ir.seq(long_word, ir.literal("1")), ir.seq(long_word, ir.literal("2"))), 0, 100)
    walked, copied, runs = _walked_and_copied(node)
    assert runs == 1 and _moves(copied) == _moves(walked)
    assert estimated_states(node) < 3000 < walked.num_states
    with pytest.raises(StateBudgetError):
        build_nfa(node, max_states=3000)


@settings(max_examples=80, deadline=None)
@given(counted_regexes())
def test_copied_repeats_keep_the_language(pattern: str) -> None:
    walked, copied, _ = _walked_and_copied(parse_regex(pattern))
    try:
        expected = minimize(*_table(walked))
    except StateBudgetError:
        reject()  # a pattern whose DFA is past the state budget says nothing about copying
    got = minimize(*_table(copied))
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])


def _table(nfa: nfa_module.NFA) -> tuple[np.ndarray, np.ndarray]:
    dfa = determinize(nfa)
    return dfa.byte_table(), dfa.accepting


def _walked_estimate(node: ir.Node) -> int:
    """`estimated_states` as a plain walk of `ir.distinct_nodes` (the oracle)."""
    total = 0
    for current in ir.distinct_nodes(node, into_repeats=False):
        if isinstance(current, ir.Embedded):
            total += len(current.accepting)
        elif isinstance(current, ir.Repeat):
            copies = current.min + 1 if current.max is None else current.max
            total += 1 + max(copies, 1) * (1 + _walked_estimate(current.item))
        else:
            total += 1
    return total


@settings(max_examples=80, deadline=None)
@given(counted_regexes(), st.booleans())
def test_estimate_and_longest_counts_are_those_of_a_plain_walk(pattern: str, embed: bool) -> None:
    """One walk gives the estimate and the longest counts that `chains.py` looks for: each as its own walk would."""
    node = parse_regex(pattern)
    if embed:
        try:
            automaton = build_automaton(node)
        except StateBudgetError:
            reject()  # a pattern whose DFA passes the default budget has no automaton to embed
        node = ir.seq(node, ir.Embedded(automaton.transitions, automaton.accepting), ir.optional(node))
    parts = list(ir.distinct_nodes(node))
    expected = (max([part.max for part in parts if isinstance(part, ir.Repeat) and part.max is not None], default=0),
                max([len(part.accepting) for part in parts if isinstance(part, ir.Embedded)], default=0))
    assert longest_counts(node) == expected
    assert estimated_states(node) == _walked_estimate(node)


_SMALL_SETS = st.sampled_from([ir.byte_set([(9, 10), (13, 13), (32, 32)]), ir.literal("a"), ir.byte_set([(48, 57)])])


@st.composite
def _with_few_byte_repeats(draw: st.DrawFn, depth: int = 3) -> ir.Node:
    """Expressions of literals and byte sets repeated 0-4 times (JSON's whitespace shape), in sequences and
    alternatives that share continuations."""
    if depth == 0 or draw(st.booleans()):
        low = draw(st.integers(0, 4))
        return ir.seq(ir.repeat(draw(_SMALL_SETS), low, low + draw(st.integers(0, 4))), draw(_SMALL_SETS))
    parts = draw(st.lists(_with_few_byte_repeats(depth - 1), min_size=1, max_size=4))
    return ir.alt(*parts) if draw(st.booleans()) else ir.seq(*parts)


@settings(max_examples=150, deadline=None)
@given(_with_few_byte_repeats(), st.lists(st.sampled_from(["optional", "star", "plus"]), max_size=2))
def test_few_byte_repeats_are_the_stepwise_nfa(node: ir.Node, wraps: list[str]) -> None:
    """`_few_bytes` builds the very NFA (states, order, moves) that `iterate`'s steps build."""
    for wrap in wraps:
        node = getattr(ir, wrap)(node)
    fast = build_nfa(node)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nfa_module._Builder, "repeat", nfa_module._Builder.repeated)
        stepwise = build_nfa(node)
    assert _moves(fast) == _moves(stepwise)
    assert fast.byte_sets == stepwise.byte_sets



@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["ab|c", "[a-c]x*", "(?:é|ü)+", "\\d{1,3}", "[^a]b?"]), st.integers(1, 4))
def test_embedded_copies_are_the_automaton_shifted(pattern: str, copies: int) -> None:
    """Every copy of an embedded automaton (the first numbering its sets as it goes, the second numbering them for
    the rest, later ones reusing those) holds the automaton's moves shifted to its block, over the same sets."""
    automaton = build_automaton(parse_regex(pattern))
    leaf = ir.Embedded(automaton.transitions, automaton.accepting)
    nfa = build_nfa(ir.Seq((leaf,) * copies))
    symbol_sets, moves = dfa_edges(np.asarray(automaton.transitions))
    assert nfa.num_states == 1 + copies * len(moves)
    for copy in range(copies):
        base = 1 + copy * len(moves)
        for state, out in enumerate(moves):
            assert [(nfa.byte_sets[index], target - base) for index, target in nfa.edges[base + state]] == \
                [(symbol_sets[number], target) for number, target in out]
