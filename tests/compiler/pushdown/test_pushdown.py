"""Pushdown compilation and the machine: languages against a recursive-descent oracle, L(1) refusals, the cap."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.pushdown.grammar import Definition, call_symbol, compile_pushdown
from stdsl.compiler.pushdown.machine import DEAD, PushdownMachine
from stdsl.errors import CompileError


def nested_lists(max_depth: int = 64) -> PushdownMachine:
    """T := "[" (T ("," T)*)? "]" | "x" ; the root is one T."""
    body = ir.alt(
        ir.seq(ir.literal("["), ir.optional(ir.seq(call_symbol(0), ir.star(ir.seq(ir.literal(","), call_symbol(0))))),
               ir.literal("]")),
        ir.literal("x"))
    return PushdownMachine(compile_pushdown(call_symbol(0), [Definition("T", body)], max_depth=max_depth))


def expressions(max_depth: int = 64) -> PushdownMachine:
    """E := "n" | L | "(" E "+" E ")" ; L := "[" (E ("," E)*)? "]" ; the root is one E (two nonterminals)."""
    expr = ir.alt(ir.literal("n"), call_symbol(1),
                  ir.seq(ir.literal("("), call_symbol(0), ir.literal("+"), call_symbol(0), ir.literal(")")))
    listing = ir.seq(ir.literal("["), ir.optional(ir.seq(call_symbol(0), ir.star(ir.seq(ir.literal(","),
                                                                                          call_symbol(0))))),
                     ir.literal("]"))
    grammar = compile_pushdown(call_symbol(0), [Definition("E", expr), Definition("L", listing)], max_depth=max_depth)
    return PushdownMachine(grammar)


def test_mutual_recursion() -> None:
    machine = expressions()
    for text, expected in [("n", True), ("[n,(n+[])]", True), ("([n]+n)", True), ("(n+n", False), ("[n,]", False)]:
        assert machine.accepts(text.encode()) is expected, text


def oracle_depth(text: str) -> int | None:
    """Nesting depth (T levels) of a word of the nested-list language, None if it is not one."""
    position = 0

    def parse(level: int) -> int:
        nonlocal position
        if text[position:position + 1] == "x":
            position += 1
            return level
        if text[position:position + 1] != "[":
            raise ValueError
        position += 1
        deepest = level
        if text[position:position + 1] != "]":
            deepest = max(deepest, parse(level + 1))
            while text[position:position + 1] == ",":
                position += 1
                deepest = max(deepest, parse(level + 1))
        if text[position:position + 1] != "]":
            raise ValueError
        position += 1
        return deepest

    try:
        depth = parse(1)
    except ValueError:
        return None
    return depth if position == len(text) else None


def test_root_and_recursion_accept_exactly_the_language() -> None:
    machine = nested_lists()
    for text, expected in [("x", True), ("[]", True), ("[x,[x,[]]]", True), ("[x,]", False), ("[", False),
                           ("", False), ("[x][x]", False), ("[[x],x]", True)]:
        assert machine.accepts(text.encode()) is expected, text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="[],x", max_size=14))
def test_random_words_agree_with_recursive_descent(text: str) -> None:
    machine = nested_lists(max_depth=5)
    depth = oracle_depth(text)
    assert machine.accepts(text.encode()) == (depth is not None and depth <= 5)


def test_nesting_to_the_cap_works_and_one_more_is_refused() -> None:
    machine = nested_lists()
    assert machine.accepts(b"[" * 64 + b"]" * 64)
    assert machine.accepts(b"[" * 63 + b"x" + b"]" * 63)
    assert not machine.accepts(b"[" * 64 + b"x" + b"]" * 64)
    config = machine.step(machine.start, b"[" * 64)
    assert machine.depth(config) == 64
    assert machine.step_byte(config, ord("[")) == DEAD
    assert machine.step_byte(config, ord("x")) == DEAD
    assert machine.step_byte(config, ord("]")) != DEAD


def test_forced_chain_crosses_returns() -> None:
    body = ir.seq(ir.literal('{"k":['), ir.optional(call_symbol(0)), ir.literal('],"n":"v"}'))
    machine = PushdownMachine(compile_pushdown(call_symbol(0), [Definition("node", body)]))
    config = machine.step(machine.start, b'{"k":[{"k":[{"k":[')
    after = machine.step(config, b']')
    assert machine.forced_chain(after) == b',"n":"v"}],"n":"v"}],"n":"v"}'
    assert machine.config_accepts(machine.chain_end(after))


def test_need_is_the_shortest_completion() -> None:
    machine = nested_lists()
    config = machine.step(machine.start, b"[[[x,")
    assert machine.need(config) == len("x]]]")
    assert machine.accepts(b"[[[x,x]]]")


def _refused(body: ir.Node, match: str) -> None:
    with pytest.raises(CompileError, match=match):
        compile_pushdown(call_symbol(0), [Definition("A", body)])


def test_call_first_clashing_with_own_bytes_is_refused() -> None:
    body = ir.alt(ir.literal("x"), ir.seq(ir.literal("["), call_symbol(0), ir.literal("]")), ir.literal("[["))
    _refused(body, re.escape("in 'A', a call of 'A' may start with byte 91"))


def test_callee_that_may_continue_with_its_follow_is_refused() -> None:
    item = ir.seq(ir.literal("a"), ir.optional(ir.literal(",")), ir.optional(ir.seq(ir.literal("("), call_symbol(0),
                                                                                      ir.literal(")"))))
    listing = ir.seq(ir.literal("["), call_symbol(0), ir.star(ir.seq(ir.literal(","), call_symbol(0))), ir.literal("]"))
    with pytest.raises(CompileError, match="'A' may end and still continue with byte 44"):
        compile_pushdown(listing, [Definition("A", item)])


def test_left_recursion_and_empty_definitions_are_refused() -> None:
    _refused(ir.alt(ir.seq(call_symbol(0), ir.literal("x")), ir.literal("y")), "left recursion: 'A' -> 'A'")
    _refused(ir.optional(ir.seq(ir.literal("x"), call_symbol(0))), "'A' matches the empty string")
    _refused(ir.seq(ir.literal("x"), call_symbol(0)), "'A' has no finite expansion")


ROOT_RECURSIVE = {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array",
                                                                                  "items": {"$ref": "#"}}},
                  "required": ["v"], "additionalProperties": False}
MUTUAL = {"$ref": "#/definitions/list", "definitions": {
    "list": {"type": "array", "items": {"$ref": "#/definitions/item"}, "maxItems": 3},
    "item": {"anyOf": [{"type": "string", "maxLength": 3}, {"$ref": "#/definitions/list"}, {"type": "null"}]}}}
COMBINED = {"$ref": "#/definitions/list", "maxItems": 2, "definitions": {
    "list": {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 0},
                                                  {"$ref": "#/definitions/list", "minItems": 1},
                                                  {"allOf": [{"$ref": "#/definitions/node"}]}]}},
    "node": {"type": "object", "properties": {"v": {"type": "integer"},
                                              "kids": {"anyOf": [{"$ref": "#/definitions/list"}, {"type": "null"}]}},
             "required": ["v"], "additionalProperties": False}}}
trees = st.recursive(
    st.one_of(st.integers(-5, 5), st.none(), st.text(alphabet="ab", max_size=4)),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.builds(lambda v, kids: {"v": v} | ({} if kids is None else {"kids": kids}),
                                         st.integers(0, 9), st.none() | st.lists(children, max_size=3))),
    max_leaves=12)


@pytest.mark.parametrize("schema", [ROOT_RECURSIVE, MUTUAL, COMBINED], ids=["root", "mutual", "combined"])
@settings(max_examples=150, deadline=None)
@given(value=trees)
def test_recursive_schemas_accept_exactly_the_valid_documents(schema: dict, value: object) -> None:
    import json

    import jsonschema

    from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
    from stdsl.compiler.json_schema.recursive import recursive_targets

    assert recursive_targets(schema)
    constraint = compile_recursive(schema)
    text = json.dumps(value, separators=(",", ":"))
    valid = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert constraint.accepts(text) == valid, text


def test_non_recursive_references_are_inlined() -> None:
    from stdsl.compiler.json_schema.recursive import recursive_targets

    schema = {"$defs": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"$ref": "#/$defs/a"}}},
              "$ref": "#/$defs/b"}
    assert recursive_targets(schema) == []
    assert recursive_targets(MUTUAL) == ["#/definitions/list", "#/definitions/item"]


def test_a_target_combined_with_other_keywords_gets_its_own_nonterminal() -> None:
    from stdsl.compiler.json_schema.recursive import compile_recursive_schema

    grammar = compile_recursive_schema(COMBINED)
    assert len(grammar.names) > 1 + 2
    machine = PushdownMachine(grammar)
    assert machine.accepts(b"[[1],[]]") is False and machine.accepts(b"[[1],[[2]]]")
    assert machine.accepts(b'[{"v":1,"kids":[[3]]}]') and not machine.accepts(b"[1,2,3]")


def optional_tails(max_depth: int = 64) -> PushdownMachine:
    """A := "a" A? ; the root is "(" A ")": at the cap a state that accepts and could call again has only the pop's
    byte live."""
    root = ir.seq(ir.literal("("), call_symbol(0), ir.literal(")"))
    body = ir.seq(ir.literal("a"), ir.optional(call_symbol(0)))
    return PushdownMachine(compile_pushdown(root, [Definition("A", body)], max_depth=max_depth))


def _live_bytes_by_brute_force(machine: PushdownMachine, config: int) -> list[int]:
    return [byte for byte in range(256) if machine.step_byte(config, byte) != DEAD]



@pytest.mark.parametrize("build", [nested_lists, expressions, optional_tails], ids=["lists", "expressions", "tails"])
@pytest.mark.parametrize("max_depth", [2, 64], ids=["at-the-cap", "roomy"])
@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet="[],xn(+)a", max_size=16))
def test_only_byte_is_the_one_live_byte_on_every_prefix(build: Any, max_depth: int, text: str) -> None:
    """`only_byte` (which steps only the classes a state reads unless it may pop) against all 256 bytes stepped on
    a machine of its own, on every live prefix of random words, near the stack cap and far from it."""
    machine, oracle = build(max_depth), build(max_depth)
    data = text.encode()
    for cut in range(len(data) + 1):
        config = machine.step(machine.start, data[:cut])
        if config == DEAD:
            break
        live = _live_bytes_by_brute_force(oracle, oracle.step(oracle.start, data[:cut]))
        assert machine.only_byte(config) == (live[0] if len(live) == 1 else -1), data[:cut]
