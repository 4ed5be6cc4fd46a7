"""Recursive grammars embedded in larger IR (`pushdown.embedding`): the merged pushdown accepts exactly the host's
text around the embedded languages (oracles: jsonschema for the schema, a balanced-bracket check for the grammar),
an IR without a leaf is the same DFA as before, and a conflict at a join names the embedded part."""
from __future__ import annotations

import functools
import json

import jsonschema
import lark
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.grammar import Grammar
from stdsl.compiler.json_schema.scalars.escaped_grammar import json_string_leaf
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.embedding import (
    compile_embedding,
    grammar_leaf,
    holds_grammar,
    without_literals_in,
)
from stdsl.compiler.pushdown.grammar import GrammarConflictError

TREE = {"$defs": {"node": {"anyOf": [
    {"type": "object", "properties": {"leaf": {"type": "string", "maxLength": 4}}, "required": ["leaf"],
     "additionalProperties": False},
    {"type": "object", "properties": {"and": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
     "required": ["and"], "additionalProperties": False}]}},
    "$ref": "#/$defs/node"}
PARENS = 'start: "(" start* ")" | "x"'


def _tree_leaf() -> ir.EmbeddedGrammar:
    compiled = stdsl.compile(TREE)
    assert isinstance(compiled, PushdownConstraint)
    return grammar_leaf(compiled.grammar, "tools[f].parameters")


def _parens_leaf() -> ir.EmbeddedGrammar:
    compiled = stdsl.compile(Grammar(PARENS, syntax="lark"))
    assert isinstance(compiled, PushdownConstraint)
    return grammar_leaf(compiled.grammar, "custom")


@functools.cache
def _lark_parens() -> lark.Lark:
    return lark.Lark(PARENS, parser="earley")


def _balanced(text: str) -> bool:
    """The oracle for PARENS: lark's Earley parser."""
    try:
        _lark_parens().parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def _pushdown(node: ir.Node) -> PushdownConstraint:
    lowered = compile_embedding(node)
    assert not isinstance(lowered, Automaton)
    return PushdownConstraint(lowered, "test")


trees = st.recursive(st.fixed_dictionaries({"leaf": st.text("ab<>/", max_size=5)}),
                     lambda inner: st.fixed_dictionaries({"and": st.lists(inner, max_size=4)}), max_leaves=8)
parens = st.recursive(st.just("x"), lambda inner: st.lists(inner, max_size=3).map(lambda xs: "(" + "".join(xs) + ")"),
                      max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(value=trees)
def test_an_embedded_schema_accepts_exactly_its_valid_values_between_the_hosts_text(value: dict) -> None:
    leaf = _tree_leaf()
    host = _pushdown(ir.alt(ir.seq(ir.literal("<a>"), leaf, ir.literal("</a>")),
                            ir.seq(ir.literal("<b>"), leaf, ir.literal(","), leaf, ir.literal("</b>"))))
    text = json.dumps(value, separators=(",", ":"))
    valid = jsonschema.Draft202012Validator(TREE).is_valid(value)
    assert host.accepts(f"<a>{text}</a>".encode()) == valid
    assert host.accepts(f"<b>{text},{text}</b>".encode()) == valid
    assert not host.accepts(f"<a>{text}</b>".encode())
    assert not host.accepts(f"<b>{text}</b>".encode())


@settings(max_examples=60, deadline=None)
@given(text=parens, cut=st.integers(0, 30))
def test_two_embedded_grammars_keep_their_own_calls(text: str, cut: int) -> None:
    tree, brackets = _tree_leaf(), _parens_leaf()
    host = _pushdown(ir.alt(ir.seq(ir.literal("T"), tree), ir.seq(ir.literal("P"), brackets, ir.literal(";"))))
    assert host.accepts(f"P{text};".encode())
    assert not host.accepts(f"T{text}".encode())
    broken = text[:cut] + text[cut + 1:]
    assert host.accepts(f"P{broken};".encode()) == _balanced(broken)
    assert host.accepts(b'T{"and":[{"leaf":"a"}]}') and not host.accepts(b'P{"leaf":"a"};')


@settings(max_examples=40, deadline=None)
@given(value=trees)
def test_literals_are_kept_out_of_an_embedded_schema_exactly(value: dict) -> None:
    host = _pushdown(ir.seq(without_literals_in(_tree_leaf(), ["</a>"]), ir.literal("</a>")))
    text = json.dumps(value, separators=(",", ":"))
    expected = jsonschema.Draft202012Validator(TREE).is_valid(value) and "</a>" not in text
    assert host.accepts(f"{text}</a>".encode()) == expected


@settings(max_examples=40, deadline=None)
@given(text=parens.map(lambda t: t.replace("x", "\"")))
def test_an_embedded_grammar_as_a_json_string_is_its_texts_escaped(text: str) -> None:
    quoted = stdsl.compile(Grammar('start: "(" start* ")" | "\\""', syntax="lark"))
    assert isinstance(quoted, PushdownConstraint)
    host = _pushdown(ir.seq(ir.literal("["), json_string_leaf(grammar_leaf(quoted.grammar, "g")), ir.literal("]")))
    assert host.accepts(f"[{json.dumps(text)}]".encode())
    assert host.accepts(f"[\"{text}\"]".encode()) == ('"' not in text)


def test_a_grammar_inside_a_grammar_is_merged_once() -> None:
    inner = _parens_leaf()
    outer = ir.EmbeddedGrammar("outer", ir.seq(ir.literal("<"), inner, ir.literal(">")), (), (), False)
    host = _pushdown(ir.seq(outer, ir.literal("|"), inner))
    assert host.accepts(b"<(x(x))>|x") and not host.accepts(b"<(x>|x") and not host.accepts(b"<x>|(x")
    assert len(host.grammar.names) == 2


def test_an_ir_without_embedded_grammars_is_the_same_dfa() -> None:
    node = stdsl.compiler.json_schema.to_ir.schema_to_ir({"type": "array", "items": {"type": "integer"}})
    lowered = compile_embedding(node)
    plain = build_automaton(node)
    assert isinstance(lowered, Automaton)
    assert np.array_equal(lowered.transitions, plain.transitions) and np.array_equal(lowered.accepting,
                                                                                     plain.accepting)


def test_a_conflict_at_the_join_names_the_embedded_part() -> None:
    numbers = stdsl.compile({"$defs": {"n": {"anyOf": [{"type": "integer"}, {"type": "array",
                                                                           "items": {"$ref": "#/$defs/n"}}]}},
                             "$ref": "#/$defs/n"})
    assert isinstance(numbers, PushdownConstraint)
    leaf = grammar_leaf(numbers.grammar, "tools[f].parameters")
    assert _pushdown(ir.seq(leaf, ir.literal(";"))).accepts(b"[1,[22]];")
    with pytest.raises(GrammarConflictError) as error:
        compile_embedding(ir.seq(leaf, ir.literal("7")))
    assert str(error.value).startswith("tools[f].parameters: ")
    assert "#/$defs/n" in str(error.value) and "change the text right after it" in str(error.value)


def test_an_embedded_grammar_is_not_an_automaton() -> None:
    with pytest.raises(stdsl.errors.CompileError, match="custom is a recursive grammar"):
        build_automaton(ir.seq(ir.literal("a"), _parens_leaf()))


@st.composite
def _hosts(draw: st.DrawFn, depth: int = 3) -> ir.Node:
    """Expressions of literals, byte sets and (sometimes) the parentheses grammar's leaf, shared subtrees included."""
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from([ir.literal("ab"), ir.byte_set([(48, 57)]), ir.literal("x"), _parens_leaf()]))
    parts = draw(st.lists(_hosts(depth - 1), min_size=1, max_size=3))
    shape = draw(st.sampled_from(["seq", "alt", "repeat"]))
    if shape == "repeat":
        return ir.repeat(ir.seq(*parts), 0, draw(st.sampled_from([1, 3, None])))
    return ir.alt(*parts) if shape == "alt" else ir.seq(*parts, *parts)


@settings(max_examples=100, deadline=None)
@given(_hosts())
def test_holds_grammar_finds_a_leaf_wherever_a_walk_of_every_node_does(node: ir.Node) -> None:
    assert holds_grammar(node) == any(isinstance(part, ir.EmbeddedGrammar) for part in ir.distinct_nodes(node))
