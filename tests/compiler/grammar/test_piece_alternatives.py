"""A grammar with many literal-headed alternatives (one `%json` per tool) assembled from each piece's DFA accepts
exactly what the grammar compiled whole accepts, and the grammar with one `%json` changed compiles that piece only."""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.grammar import Grammar, lowering, piece_alternatives
from stdsl.compiler.grammar.lowering import lower_grammar
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from tests.compiler.language_difference import accepts, assert_agree_on_walks, difference

SCHEMAS = [
    {"type": "integer", "minimum": 0, "maximum": 99},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "boolean"}},
     "required": ["a"], "additionalProperties": False},
    {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2},
    {"type": "object", "properties": {"n": {"type": "number"}}},
    {"enum": ["on", "off"]},
]
BODIES = st.sampled_from([
    *(f"%json {json.dumps(schema)}" for schema in SCHEMAS),
    '/[ab]{1,2}/', '"ok" %json {"type": "boolean"}', 'part', 'part? "!"', '/[0-9]*/', '("x" | "y")+',
])
HEADS = st.sampled_from(["<c f=", "<c fa=", "<c fab=", "<c g>", "[", "[[", "call ", "<c", "ab", "x"])
SKELETONS = st.sampled_from([
    'start: /[^<\\[]*/ (call ("\\n" call)*)?',
    'start: call+',
    'start: "{" call "}" | "none"',
    'start: call ("," call)* | /[a-z]+/',
    'start: call call?',
])
TAILS = st.sampled_from(['"</c>"', '">"', '""', '"]" "\\n"?', '/[;]?/'])


@st.composite
def piece_grammars(draw: Any) -> str:
    """A Lark grammar whose `call` rule is an alternative of 8 to 11 pieces: a literal head (distinct ones, some a
    prefix of another), a body (a `%json` value, a regex, a shared rule) and a tail, in one of a few skeletons, with
    `%ignore`d spaces or not."""
    heads = draw(st.lists(HEADS, min_size=8, max_size=10, unique=True))
    heads += [f"<tool{i}>" for i in range(11 - len(heads))]
    rules, calls = [], []
    for index, head in enumerate(heads):
        rules.append(f"c{index}: {json.dumps(head)} {draw(BODIES)} {draw(TAILS)}")
        calls.append(f"c{index}")
    rules.append("call: " + " | ".join(calls))
    rules.append('part: "p" /[0-9]/')
    if draw(st.booleans()):
        rules.append('%ignore " "')
    return "\n".join([draw(SKELETONS), *rules])


def _whole(text: str) -> Automaton:
    """The grammar compiled whole, as before the assembly (and before the frames of `json_slots`)."""
    with patch.object(piece_alternatives, "MIN_PIECES", 10**9), patch.object(lowering, "MIN_PIECES", 10**9):
        compiled = lower_grammar(Grammar(text, "lark"))
    assert isinstance(compiled, Automaton)
    return compiled


def _assembled(text: str) -> Automaton:
    """The grammar compiled by the piece assembly of its lowered expression (not from its frame: `json_slots` has
    tests of its own), checked to have gone through it."""
    before = piece_alternatives._PIECES.stats()
    with patch.object(lowering, "MIN_PIECES", 10**9):
        compiled = lower_grammar(Grammar(text, "lark"))
    after = piece_alternatives._PIECES.stats()
    assert (after.hits + after.misses) - (before.hits + before.misses) >= piece_alternatives.MIN_PIECES
    assert isinstance(compiled, Automaton)
    return compiled


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(piece_grammars(), st.integers(0, 2**32 - 1))
def test_assembled_grammar_accepts_what_the_whole_grammar_accepts(text: str, seed: int) -> None:
    whole, assembled = _whole(text), _assembled(text)
    assert difference(whole, assembled) is None
    assert_agree_on_walks(whole, assembled, np.random.default_rng(seed))


def _tools_grammar(schemas: list[dict[str, Any]]) -> str:
    """A Hermes reply grammar with one `%json` per tool, as llguidance users write it."""
    rules = [f'call{i}: "<tool_call>{{\\"name\\": \\"tool_{i}\\", \\"arguments\\": " %json {json.dumps(schema)} '
             '"}</tool_call>"' for i, schema in enumerate(schemas)]
    calls = " | ".join(f"call{i}" for i in range(len(schemas)))
    return "\n".join(['start: /[^<]*/ (call ("\\n" call)*)?', f"call: {calls}", *rules])


def test_one_changed_json_compiles_that_piece_only() -> None:
    schemas = [{"type": "object", "properties": {"a": {"type": "integer", "minimum": i}}, "required": ["a"]}
               for i in range(9)]
    lower_grammar(Grammar(_tools_grammar(schemas), "lark"))
    changed = [*schemas[:4], {"type": "object", "properties": {"b": {"type": "string"}}}, *schemas[5:]]
    before = piece_alternatives._PIECES.stats()
    compiled = lower_grammar(Grammar(_tools_grammar(changed), "lark"))
    after = piece_alternatives._PIECES.stats()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 8)
    assert isinstance(compiled, Automaton)
    assert difference(_whole(_tools_grammar(changed)), compiled) is None
    assert accepts(compiled, b'hi<tool_call>{"name": "tool_4", "arguments": {"b": "x"}}</tool_call>')
    assert not accepts(compiled, b'<tool_call>{"name": "tool_4", "arguments": {"a": 7}}</tool_call>')


def test_a_recursive_json_value_among_the_pieces_lowers_to_the_pushdown() -> None:
    tree = {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "$ref": "#/$defs/node"}
    schemas: list[dict[str, Any]] = [{"type": "integer", "minimum": i} for i in range(8)] + [tree]
    compiled = lower_grammar(Grammar(_tools_grammar(schemas), "lark"))
    assert isinstance(compiled, PushdownConstraint)


def test_alternatives_that_share_a_head_or_are_few_compile_whole() -> None:
    shared = "\n".join(['start: call+', "call: " + " | ".join(f"c{i}" for i in range(9)),
                        *(f'c{i}: "<t>" %json {{"type": "integer", "maximum": {i}}}' for i in range(9))])
    few = _tools_grammar([{"type": "integer", "minimum": i} for i in range(piece_alternatives.MIN_PIECES - 1)])
    for text in (shared, few):
        before = piece_alternatives._PIECES.stats()
        compiled = lower_grammar(Grammar(text, "lark"))
        after = piece_alternatives._PIECES.stats()
        assert (after.hits, after.misses) == (before.hits, before.misses)
        assert isinstance(compiled, Automaton) and difference(_whole(text), compiled) is None


def _chained_reference(head: bytes, table: np.ndarray, accepting: np.ndarray, byte_class: np.ndarray) -> Automaton:
    """The head's chain before the DFA as a dense 256-column table, stored by the general path (the oracle)."""
    length = len(head)
    wide = np.full((length + len(table), 256), -1, dtype=np.int64)
    wide[length:] = np.where(table[:, byte_class] >= 0, table[:, byte_class] + length, -1)
    wide[:length] = -1
    wide[np.arange(length), list(head)] = np.arange(1, length + 1)
    return Automaton(wide, np.concatenate([np.zeros(length, dtype=bool), accepting]))


@st.composite
def headed_tables(draw: Any) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """A head (bytes from a small alphabet, some repeated, possibly empty) and a DFA table over a few classes whose
    columns are sometimes equal, with a byte-class map over the same small alphabet."""
    states, classes = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    table = np.array(draw(st.lists(st.lists(st.integers(-1, states - 1), min_size=classes, max_size=classes),
                                   min_size=states, max_size=states)), dtype=np.int64)
    byte_class = np.array(draw(st.lists(st.integers(0, classes - 1), min_size=256, max_size=256)), dtype=np.int64)
    head = bytes(draw(st.lists(st.sampled_from([0, 1, 2, 65, 97, 98, 255]), max_size=6)))
    accepting = np.array(draw(st.lists(st.booleans(), min_size=states, max_size=states)), dtype=bool)
    return head, table, accepting, byte_class


@settings(max_examples=300, deadline=None)
@given(headed_tables())
def test_a_piece_behind_its_head_is_stored_as_the_general_path_stores_it(case: Any) -> None:
    head, table, accepting, byte_class = case
    built, reference = piece_alternatives._behind_head(*case), _chained_reference(*case)
    for name in ("sole_class", "sole_target", "branch_rows", "byte_class", "accepting"):
        assert np.array_equal(getattr(built, name), getattr(reference, name)), name
        assert getattr(built, name).dtype == getattr(reference, name).dtype, name


@settings(max_examples=150, deadline=None)
@given(st.lists(headed_tables(), min_size=piece_alternatives.CHAINED_APART_UP_TO + 1, max_size=9))
def test_pieces_behind_their_heads_built_together_are_stored_as_each_alone(cases: Any) -> None:
    """The head chains of many new pieces built side by side equal each built on its own, and the general path's."""
    together = piece_alternatives._behind_heads(cases)
    assert len(together) == len(cases)
    for built, case in zip(together, cases):
        for reference in (piece_alternatives._behind_head(*case), _chained_reference(*case)):
            for name in ("sole_class", "sole_target", "branch_rows", "byte_class", "accepting"):
                assert np.array_equal(getattr(built, name), getattr(reference, name)), name
                assert getattr(built, name).dtype == getattr(reference, name).dtype, name
