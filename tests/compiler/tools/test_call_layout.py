"""A call of parameters written apart, laid out from per-parameter pieces behind tries of their tags, accepts
exactly what the call determinized whole accepts, and tools of the same parameter types share their pieces."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, embedded_leaf
from stdsl.compiler.constraint_spec import _arguments_ir, _Deadline
from stdsl.compiler.not_containing import not_containing
from stdsl.compiler.tools import call_layout as layout
from stdsl.compiler.tools.formats import ToolSpec, format_named
from stdsl.errors import StdslError
from tests.compiler.language_difference import difference

PARAMETER_FORMATS = ["qwen_xml", "glm4", "glm47", "longcat", "minimax_m2", "minicpm5"]
VALUES = [
    {"type": "string"}, {"type": "string", "enum": ["asc", "desc"]}, {"type": "integer", "minimum": 0},
    {"type": "number"}, {"type": "boolean"}, {"type": "null"}, {"type": "array", "items": {"type": "integer"}},
    {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
]


@st.composite
def tools(draw: Any) -> ToolSpec:
    keys = draw(st.lists(st.sampled_from(["a", "ab", "b", "path", "p"]), max_size=4, unique=True))
    properties = {key: draw(st.sampled_from(VALUES)) for key in keys}
    required = [key for key in keys if draw(st.booleans())]
    return ToolSpec("get", {"type": "object", "properties": properties, "required": required})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool=tools(), name=st.sampled_from(PARAMETER_FORMATS))
def test_a_laid_out_call_accepts_exactly_the_call_determinized_whole(tool: ToolSpec, name: str) -> None:
    try:
        node = format_named(name).call_ir(tool, _arguments_ir(_Deadline(60), []))
    except StdslError:
        assume(False)
    laid_out = layout.call_layout(node)
    assume(laid_out is not None)
    assert laid_out is not None
    assert difference(build_automaton(node), laid_out) is None


def test_qwen_calls_with_optional_parameters_are_laid_out_and_share_their_pieces() -> None:
    tool_format = format_named("qwen_xml")
    schema = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"},
                                               "f": {"type": "boolean"}}, "required": ["q"]}
    first = tool_format.call_ir(ToolSpec("first", schema), _arguments_ir(_Deadline(60), []))
    assert layout.call_layout(first) is not None
    before = layout._PIECES.stats()
    second = tool_format.call_ir(ToolSpec("second", {**schema, "required": ["n"]}), _arguments_ir(_Deadline(60), []))
    laid_out = layout.call_layout(second)
    after = layout._PIECES.stats()
    assert laid_out is not None and difference(build_automaton(second), laid_out) is None
    assert (after.misses - before.misses, after.hits - before.hits) == (0, 3)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(listed=st.lists(tools(), min_size=2, max_size=5), name=st.sampled_from(PARAMETER_FORMATS))
def test_calls_laid_out_side_by_side_each_accept_exactly_the_call_determinized_whole(listed: list[ToolSpec],
                                                                                      name: str) -> None:
    try:
        nodes = [format_named(name).call_ir(tool, _arguments_ir(_Deadline(60), [])) for tool in listed]
    except StdslError:
        assume(False)
    for node, laid_out in zip(nodes, layout.call_layouts(nodes)):
        assert laid_out is None or difference(build_automaton(node), laid_out) is None


@given(words=st.lists(st.binary(min_size=1, max_size=4), min_size=1, max_size=6, unique=True))
def test_a_piece_keeps_its_language_with_its_accepting_states_merged_into_its_last(words: list[bytes]) -> None:
    assume(not any(a != b and b.startswith(a) for a in words for b in words))
    size = 1 + sum(len(word) for word in words)
    table = np.full((size, 256), -1, dtype=np.int64)
    accepting = np.zeros(size, dtype=bool)
    state = 1
    for word in words:
        at = 0
        for byte in word:
            if table[at, byte] < 0:
                table[at, byte] = state
                state += 1
            at = int(table[at, byte])
        accepting[at] = True
    piece = Automaton(table[:state], accepting[:state])
    merged = layout._accepting_last(piece)
    assert not (merged.table[-1] >= 0).any()
    ends = np.zeros(merged.num_states, dtype=bool)
    ends[-1] = True
    assert difference(piece, Automaton.from_classes(merged.table, ends, merged.byte_class)) is None


def _as_automaton(piece: Any) -> Automaton:
    ends = np.zeros(piece.num_states, dtype=bool)
    ends[-1] = True
    return Automaton.from_classes(piece.table, ends, piece.byte_class)


READ_ON = {
    "raw text": lambda: not_containing(["</p>"]),
    "lines": lambda: ir.plus(ir.alt(ir.literal("a"), ir.literal("\n"))),
    "a newline or two": lambda: ir.alt(ir.literal("x\n"), ir.literal("x\n\n")),
}
"""Values an accepting state of which reads a newline (so `after` cannot simply be laid on after them)."""


@settings(max_examples=40, deadline=None)
@given(value=st.sampled_from(sorted(READ_ON)),
       lines=st.lists(st.text("\n</p>ab=", min_size=1, max_size=6), min_size=1, max_size=4))
def test_a_piece_after_a_value_that_reads_on_accepts_exactly_the_two_determinized_whole(value: str,
                                                                                        lines: list[str]) -> None:
    """A value that reads a newline where it may end, then several lines: the value and a line determinized (kept
    per line) with the rest chained on accepts what the value and all of `after` determinized whole accepts."""
    node, after = READ_ON[value](), "\n".join(lines).encode()
    whole = build_automaton(ir.seq(node, ir.literal(after)))
    piece = layout.parameter_piece(node, after)
    if piece is None:
        assert bool(whole.accepting[0]) or bool((whole.live_count[whole.accepting] > 0).any())
        return
    assert difference(whole, _as_automaton(piece)) is None


def test_a_raw_value_before_different_next_tags_is_determinized_with_its_closing_line_once(monkeypatch: Any) -> None:
    """Raw text ends where its closing tag begins, so each piece of it (its closing line, then the next tag) would be
    a subset construction of its own: the value with its closing line is determinized once, the tags chained on."""
    value = not_containing(["</parameter>"])
    determinized: list[ir.Node] = []

    def counted(node: ir.Node) -> Automaton:
        if isinstance(node, ir.Seq) and value in node.items:
            determinized.append(node)
        return build_automaton(node)

    monkeypatch.setattr(layout, "build_automaton", counted)
    for key in ("a", "b", "c"):
        after = f"\n</parameter>\n<parameter={key}>\n".encode()
        piece = layout.parameter_piece(value, after)
        assert piece is not None
        assert difference(build_automaton(ir.seq(value, ir.literal(after))), _as_automaton(piece)) is None
    assert len(determinized) <= 2


@settings(max_examples=80, deadline=None)
@given(words=st.lists(st.binary(max_size=4).filter(lambda w: b"\x00" not in w) | st.sampled_from([b"a", b"ab", b"a\n"]),
                      min_size=1, max_size=5),
       after=st.sampled_from([b"\n", b"\n</p>\n", b"b", b"bc", b"\x00z"]))
def test_an_enum_laid_out_as_its_trie_accepts_exactly_the_enum_then_the_text_determinized(words: list[bytes],
                                                                                          after: bytes) -> None:
    """An enum's literals (some prefixes of others, some that go on with the text's first byte) then the text: the
    trie with the text laid on from each end, or None exactly where an end goes on with that byte."""
    enum = ir.alt(*(ir.literal(word) for word in words))
    piece = layout._literals_followed(words, after)
    goes_on = any(len(longer) > len(word) and longer.startswith(word) and longer[len(word)] == after[0]
                  for word in words for longer in words)
    assert (piece is None) == goes_on
    if piece is not None:
        assert not (piece.table[-1] >= 0).any()
        assert difference(build_automaton(ir.seq(enum, ir.literal(after))), _as_automaton(piece)) is None


def test_a_value_of_a_subset_construction_is_determinized_once_before_any_next_tag(monkeypatch: Any) -> None:
    """A boolean with Python's spellings beside JSON's needs a subset construction; before three different next tags
    it runs once (the value's DFA kept per expression), and each piece accepts the value then its tag."""
    from stdsl.compiler.automata import build

    json_boolean = embedded_leaf(build_automaton(ir.alt(ir.literal("true"), ir.literal("false"))), minimal=True)
    value = ir.alt(json_boolean, ir.literal("True"), ir.literal("False"), ir.literal("Truth"))
    runs: list[int] = []
    determinize = build.determinize_expression

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return determinize(*args, **kwargs)

    monkeypatch.setattr(build, "determinize_expression", counted)
    afters = [f"\n</parameter>\n<parameter={key}>\n".encode() for key in ("x", "y", "z")]
    pieces = [layout.parameter_piece(value, after) for after in afters]
    assert len(runs) == 1
    monkeypatch.undo()
    for piece, after in zip(pieces, afters):
        assert piece is not None
        assert difference(build_automaton(ir.seq(value, ir.literal(after))), _as_automaton(piece)) is None
