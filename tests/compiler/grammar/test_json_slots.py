"""A Lark grammar with many `%json` values compiled from its kept frame accepts exactly what the grammar lowered
whole accepts, before and after one schema changes; the frame is rebuilt whenever the text around the schemas
changes (a rule, a tail, `%ignore`), and a changed schema compiles its own piece only."""

from __future__ import annotations

import json
import re
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.grammar import Grammar, json_slots, lowering, piece_alternatives
from stdsl.compiler.grammar.lowering import lower_grammar
from stdsl.errors import GrammarError
from tests.compiler.language_difference import accepts, assert_agree_on_walks, difference

SCHEMAS = st.sampled_from([
    {"type": "integer", "minimum": 0, "maximum": 99},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "boolean"}},
     "required": ["a"], "additionalProperties": False},
    {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2},
    {"type": "object", "properties": {"n": {"type": "number"}}},
    {"enum": ["on", "off"]},
    {"const": "%json {\"type\": \"integer\"}"},
    {"type": "string", "pattern": "^[a-c]{1,2}$"},
])
HEADS = st.sampled_from(["<c f=", "<c fa=", "<c fab=", "<c g>", "[", "[[", "call ", "<c", "ab", "x",
                         'say %json {"type": "string"} ', "#", "// not a comment ", "/"])
SKELETONS = st.sampled_from([
    'start: /[^<\\[]*/ (call ("\\n" call)*)?',
    'start: call+',
    'start: "{" call "}" | "none"',
    'start: call ("," call)* | /[a-z]+/',
    'start: call call? // a comment with %json {"type": "null"}',
    'start: call | "v" %json {"type": "boolean"}',
    'start: %json {"type": "boolean"} ";" call?',
])
TAILS = st.sampled_from(['"</c>"', '">"', '""', '"]" "\\n"?', '/[;]?/', 'close'])


@st.composite
def json_piece_grammars(draw: Any) -> str:
    """A Lark grammar whose `call` rule is an alternative of 8 to 11 pieces, each a literal head (distinct ones,
    some holding `%json`, `//` or `#` as text), a `%json` value, another value or a shared rule after it in some,
    and a tail, in one of a few skeletons (one with a `%json` outside the pieces: lowered whole), with `%ignore`d
    spaces or not."""
    heads = draw(st.lists(HEADS, min_size=8, max_size=11, unique=True))
    rules, calls = [], []
    for index, head in enumerate(heads):
        after = draw(st.sampled_from(["", "part", '"+" %json {"type": "boolean"}', "/[0-9]?/"]))
        rules.append(f"c{index}: {json.dumps(head)} %json {json.dumps(draw(SCHEMAS))} {after} {draw(TAILS)}")
        calls.append(f"c{index}")
    rules += ["call: " + " | ".join(calls), 'part: "p" /[0-9]/', 'close: "." | ";"']
    if draw(st.booleans()):
        rules.append('%ignore " "')
    return "\n".join([draw(SKELETONS), *rules])


def _whole(text: str) -> Automaton:
    """The grammar lowered whole: no frame, no piece assembly."""
    with patch.object(piece_alternatives, "MIN_PIECES", 10**9), patch.object(lowering, "MIN_PIECES", 10**9):
        compiled = lower_grammar(Grammar(text, "lark"))
    assert isinstance(compiled, Automaton)
    return compiled


def _framed(text: str) -> tuple[Automaton, bool]:
    """The grammar compiled as it is now, and whether it came from a frame (its own or one kept)."""
    results = []

    def recording(*args: Any) -> Automaton | None:
        result = json_slots.compile_frame(*args)
        results.append(result)
        return result

    with patch.object(lowering, "compile_frame", recording):
        compiled = lower_grammar(Grammar(text, "lark"))
    assert isinstance(compiled, Automaton)
    return compiled, bool(results) and results[0] is not None


def _with_schema(text: str, old: str, new: dict[str, Any]) -> str:
    """`text` with its last `%json` block equal to `old` replaced by `new`."""
    at = text.rindex(old)
    return text[:at] + json.dumps(new) + text[at + len(old):]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_piece_grammars(), SCHEMAS, st.integers(0, 2**32 - 1))
def test_a_grammar_from_its_frame_accepts_what_the_whole_grammar_accepts(text: str, other: dict[str, Any],
                                                                        seed: int) -> None:
    rng = np.random.default_rng(seed)
    compiled, _ = _framed(text)
    whole = _whole(text)
    assert difference(whole, compiled) is None
    assert_agree_on_walks(whole, compiled, rng)
    schemas = json_slots.slotted_text(text)
    assert schemas is not None
    changed = _with_schema(text, schemas.schemas[len(schemas.schemas) // 2], other)
    compiled_changed, _ = _framed(changed)
    whole_changed = _whole(changed)
    assert difference(whole_changed, compiled_changed) is None
    assert_agree_on_walks(whole_changed, compiled_changed, rng)


SHARED_TAILS = st.sampled_from(['"</c>"', '"}" "\\n" "</c>"', '">"', '"." /[;]/', '";" close'])


@st.composite
def json_pieces_sharing_a_tail(draw: Any) -> str:
    """A Lark grammar whose 8 to 11 pieces all end with one tail (literal in most, a choice in one), most with a
    `%json` value right before it (some values read on after they could end: integers), some with more after it."""
    heads = draw(st.lists(HEADS, min_size=8, max_size=11, unique=True))
    tail = draw(SHARED_TAILS)
    rules, calls = [], []
    for index, head in enumerate(heads):
        after = draw(st.sampled_from(["", "", "", '"+" %json {"type": "boolean"}', "/[0-9]?/"]))
        rules.append(f"c{index}: {json.dumps(head)} %json {json.dumps(draw(SCHEMAS))} {after} {tail}")
        calls.append(f"c{index}")
    rules += ["call: " + " | ".join(calls), 'close: "." | ";"']
    return "\n".join([draw(SKELETONS), *rules])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_pieces_sharing_a_tail(), SCHEMAS, st.integers(0, 2**32 - 1))
def test_pieces_sharing_a_tail_accept_what_the_whole_grammar_accepts(text: str, other: dict[str, Any], seed: int
                                                                    ) -> None:
    """The shared tail stands once in the skeleton, after the placeholder and a value's trailing whitespace (or,
    where a piece reads on after accepting, stays in each piece): the language is the whole grammar's."""
    rng = np.random.default_rng(seed)
    for grammar in (text, _with_schema(text, json_slots.slotted_text(text).schemas[0], other)):  # type: ignore[union-attr]
        compiled, _ = _framed(grammar)
        whole = _whole(grammar)
        assert difference(whole, compiled) is None
        assert_agree_on_walks(whole, compiled, rng)


def test_a_tail_the_pieces_share_is_laid_out_once() -> None:
    """Tool calls ending alike (`}</tool_call>`) are laid out without it, the tail once after them: fewer states,
    the same language, still laid out as blocks."""
    text = _tools_grammar(SCHEMA_LIST)
    caches.clear()
    compiled, framed = _framed(text)
    caches.clear()
    with patch.object(json_slots, "_shared_tail", lambda *args: None):
        each, _ = _framed(text)
    assert framed and difference(each, compiled) is None and compiled.blocks
    assert compiled.num_states <= each.num_states - (len(SCHEMA_LIST) - 1) * len(b"}</tool_call>")


def test_a_slot_read_twice_in_a_piece_keeps_the_tail_in_the_piece() -> None:
    """A rule holding a `%json` read twice in each piece puts one slot's leaf in both places: its value may not lose
    its trailing whitespace before the tail in one place only, so the pieces keep their tail."""
    rules = []
    for index in range(9):
        schema = {"type": "object", "properties": {"x": {"type": "integer", "maximum": index}}, "required": ["x"],
                  "additionalProperties": False}
        rules += [f'c{index}: "<h{index}>" a{index} "," a{index} "</c>"', f"a{index}: %json {json.dumps(schema)}"]
    text = "\n".join(["start: call+", "call: " + " | ".join(f"c{index}" for index in range(9)), *rules])
    compiled, framed = _framed(text)
    assert framed and difference(_whole(text), compiled) is None
    assert accepts(compiled, b'<h3>{"x": 2}\t,{"x":1} </c>')


def test_pieces_that_read_on_after_accepting_keep_their_tail() -> None:
    """Integer values may take another digit where they could end: with the tail in the skeleton the pieces would not
    lay out as blocks, so they keep it, and the reply is laid out as blocks still."""
    schemas = [{"type": "integer", "minimum": index} for index in range(9)]
    text = _tools_grammar(schemas)
    compiled, framed = _framed(text)
    assert framed and compiled.blocks and difference(_whole(text), compiled) is None
    assert accepts(compiled, b'<tool_call>{"name": "tool_3", "arguments": 31}</tool_call>')


def test_one_value_that_reads_on_stops_the_shortened_pieces_where_it_stands() -> None:
    """A grammar whose first piece ends in an integer keeps every tail without building the other pieces short
    first: one piece is built short, then the nine whole (not nine short and nine whole)."""
    caches.clear()
    text = _tools_grammar([{"type": "integer", "minimum": 0}, *SCHEMA_LIST[1:]])
    compiled, (_, _, hits, misses) = _compiled_counting(text)
    assert (hits, misses) == (0, 1 + len(SCHEMA_LIST))
    assert difference(_whole(text), compiled) is None
    assert accepts(compiled, b'<tool_call>{"name": "tool_0", "arguments": 31}</tool_call>')


def _tools_grammar(schemas: list[dict[str, Any]], tail: str = '"}</tool_call>"', ignore: str = "") -> str:
    """A Hermes reply grammar with one `%json` per tool, as llguidance users write it."""
    rules = [f'call{i}: "<tool_call>{{\\"name\\": \\"tool_{i}\\", \\"arguments\\": " %json {json.dumps(schema)} '
             "tail" for i, schema in enumerate(schemas)]
    calls = " | ".join(f"call{i}" for i in range(len(schemas)))
    return "\n".join(['start: /[^<]*/ (call ("\\n" call)*)?', f"call: {calls}", f"tail: {tail}", *rules, ignore])


SCHEMA_LIST = [{"type": "object", "properties": {"a": {"type": "integer", "minimum": i}}, "required": ["a"],
                "additionalProperties": False} for i in range(9)]


def _stats() -> tuple[int, int, int, int]:
    frames, pieces = lowering._FRAMES.stats(), piece_alternatives._PIECES.stats()
    return frames.hits, frames.misses, pieces.hits, pieces.misses


def _compiled_counting(text: str) -> tuple[Automaton, tuple[int, ...]]:
    """The grammar compiled, and the frame hits and misses and piece hits and misses it took."""
    before = _stats()
    compiled, framed = _framed(text)
    assert framed
    return compiled, tuple(after - was for after, was in zip(_stats(), before))


def test_one_changed_schema_reuses_the_frame_and_compiles_its_piece_only() -> None:
    caches.clear()
    lower_grammar(Grammar(_tools_grammar(SCHEMA_LIST), "lark"))
    changed = [*SCHEMA_LIST[:4], {"type": "object", "properties": {"b": {"type": "string"}}}, *SCHEMA_LIST[5:]]
    compiled, counts = _compiled_counting(_tools_grammar(changed))
    assert counts == (1, 0, 8, 1)
    assert difference(_whole(_tools_grammar(changed)), compiled) is None
    assert accepts(compiled, b'hi<tool_call>{"name": "tool_4", "arguments": {"b": "x"}}</tool_call>')
    assert not accepts(compiled, b'<tool_call>{"name": "tool_4", "arguments": {"a": 7}}</tool_call>')


@pytest.mark.parametrize(("change", "call"), [
    ({"tail": '"}</call>"'}, b'<tool_call>{"name": "tool_1", "arguments": {"a": 1}}</call>'),
    ({"ignore": '%ignore "~"'}, b'<tool_call>{"name": "tool_1", "arguments": {"a": 1}~}</tool_call>'),
])
def test_a_changed_rule_or_ignore_around_the_schemas_builds_a_new_frame(change: dict[str, str], call: bytes
                                                                         ) -> None:
    before, _ = _framed(_tools_grammar(SCHEMA_LIST))
    text = _tools_grammar(SCHEMA_LIST, **change)
    compiled, counts = _compiled_counting(text)
    assert counts[:2] == (0, 1)
    assert not accepts(before, call) and accepts(compiled, call)
    assert difference(_whole(text), compiled) is None


def test_a_changed_schema_value_is_seen_through_a_kept_frame() -> None:
    caches.clear()
    original, _ = _framed(_tools_grammar(SCHEMA_LIST))
    call = b'<tool_call>{"name": "tool_3", "arguments": {"a": 3}}</tool_call>'
    narrowed = [*SCHEMA_LIST[:3], {**SCHEMA_LIST[3], "properties": {"a": {"type": "integer", "minimum": 4}}},
                *SCHEMA_LIST[4:]]
    compiled, counts = _compiled_counting(_tools_grammar(narrowed))
    assert counts == (1, 0, 8, 1)
    assert accepts(original, call) and not accepts(compiled, call)


def test_a_refused_schema_is_refused_as_when_lowered_whole() -> None:
    lower_grammar(Grammar(_tools_grammar(SCHEMA_LIST), "lark"))
    text = _tools_grammar([*SCHEMA_LIST[:8], {"type": "integer", "minimum": 5, "maximum": 1}])
    with pytest.raises(GrammarError) as framed:
        lower_grammar(Grammar(text, "lark"))
    with pytest.raises(GrammarError) as whole:
        _whole(text)
    assert str(framed.value) == str(whole.value)
    unused = _tools_grammar(SCHEMA_LIST) + '\nunused: %json {"type": "integer", "minimum": 5, "maximum": 1}'
    with pytest.raises(GrammarError) as framed:
        lower_grammar(Grammar(unused, "lark"))
    with pytest.raises(GrammarError) as whole:
        _whole(unused)
    assert str(framed.value) == str(whole.value)


def test_slots_are_only_the_json_blocks_the_parser_reads() -> None:
    text = '\n'.join(['start: "%json {\\"a\\": 1}" x // %json {"b": 2}', 'x: %json {"type": "null"} /%json {}/'])
    slotted = json_slots.slotted_text(text)
    assert slotted is not None and slotted.schemas == ('{"type": "null"}',)
    assert json_slots.slotted_text('start: %json {"a": ') is None


def test_a_json_block_inside_a_nested_lark_grammar_is_a_slot_too() -> None:
    rules = [f'c{i}: "<h{i}>" %json {{"type": "integer", "maximum": {i}}} "."' for i in range(9)]
    text = "\n".join(['start: call | "n" inner', 'inner: %lark {\nstart: "(" %json {"type": "boolean"} ")"\n}',
                      "call: " + " | ".join(f"c{i}" for i in range(9)), *rules])
    compiled, framed = _framed(text)
    assert framed and difference(_whole(text), compiled) is None
    assert accepts(compiled, b"n(true)") and accepts(compiled, b"<h3>2.") and not accepts(compiled, b"<h3>4.")


def test_special_tokens_of_a_kept_frame_are_reported_and_refused_as_when_lowered_whole() -> None:
    rules = [f'c{i}: "<h{i}>" %json {{"type": "integer", "maximum": {i}}} <|im_end|>' for i in range(9)]
    text = "\n".join(["start: call+", "call: " + " | ".join(f"c{i}" for i in range(9)), *rules])
    grammar = Grammar(text, "lark").with_special_tokens({"<|im_end|>": 7})
    for _ in range(2):
        used: dict[str, None] = {}
        assert isinstance(lower_grammar(grammar, specials=used), Automaton) and used == {"<|im_end|>": None}
    with pytest.raises(GrammarError, match=re.escape("special token <|im_end|> can only stand")):
        lower_grammar(grammar)


def _stored(automaton: Automaton) -> list[np.ndarray]:
    return [automaton.branch_rows, automaton.sole_class, automaton.sole_target, automaton.byte_class,
            automaton.accepting]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(SCHEMAS, min_size=8, max_size=11), st.sampled_from(['"}</tool_call>"', '"}" "</tool_call>"?']),
       st.integers(0, 10))
def test_head_chains_built_together_give_the_tables_built_one_at_a_time(schemas: list[dict[str, Any]], tail: str,
                                                                        held: int) -> None:
    """A reply grammar whose new pieces' head chains are built side by side (`_behind_heads`, some pieces already
    held) compiles to the same arrays as with every chain built on its own (the old construction)."""
    text = _tools_grammar(schemas, tail)
    caches.clear()
    with patch.object(piece_alternatives, "CHAINED_APART_UP_TO", 10**9):
        alone = lower_grammar(Grammar(text, "lark"))
    caches.clear()
    lower_grammar(Grammar(_tools_grammar(schemas[:held], tail), "lark"))
    together = lower_grammar(Grammar(text, "lark"))
    assert isinstance(alone, Automaton) and isinstance(together, Automaton)
    for mine, theirs in zip(_stored(together), _stored(alone)):
        assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)
    assert together.blocks == alone.blocks
