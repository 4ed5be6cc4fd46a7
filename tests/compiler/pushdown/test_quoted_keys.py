"""A body whose quoted keys are laid out as tries (`keyed_body_dfa`) has the language of the subset construction
over the whole body: equal minimal DFAs, over object bodies laid out as the JSON Schema lowering lays them out,
with keys beside undeclared names, values that are quoted literals or free strings, and keys that make no prefix
code (those are handed back: None)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.build import determinized
from stdsl.compiler.automata.minimization.minimize import minimize, trim_in_bfs_order
from stdsl.compiler.json_schema.scalars.strings import string_literal, string_not_in
from stdsl.compiler.pushdown import grammar as grammar_module
from stdsl.compiler.pushdown import quoted_keys
from stdsl.compiler.pushdown.grammar import CALL_BASE, call_symbol
from stdsl.compiler.pushdown.quoted_keys import keyed_body_dfa

ALPHABET = CALL_BASE + 2
NAMES = ["a", "b", "ab", "ba", "abc", "", "b\u00e9", "a b", "c"]
QUOTE, COLON, COMMA = ir.literal('"'), ir.literal(":"), ir.literal(",")
VALUES = [call_symbol(0), call_symbol(1), ir.literal("1"), string_literal("a"), string_literal("ab"),
          ir.seq(QUOTE, ir.star(ir.byte_set([(0x61, 0x63)])), QUOTE)]


@pytest.fixture(autouse=True)
def every_body_laid_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small bodies are laid out too (the compiler leaves bodies with few keys to the subset construction)."""
    monkeypatch.setattr(quoted_keys, "KEYED_FROM", 0)


def _object(members: list[tuple[str, bool, ir.Node]], extra: ir.Node) -> ir.Node:
    """An object body as `to_ir._object` lays it out: the declared members in order (optional ones may be absent),
    then the undeclared ones."""
    first, after, nullable = ir.NOTHING, ir.EMPTY, True
    for name, required, value in reversed(members):
        member = ir.seq(string_literal(name), COLON, value)
        if required:
            first, after, nullable = ir.seq(member, after), ir.seq(COMMA, member, after), False
        else:
            first = ir.alt(ir.seq(member, after), first)
            after = ir.seq(ir.optional(ir.seq(COMMA, member)), after)
    extras_after = ir.star(ir.seq(COMMA, extra))
    body = ir.seq(first, extras_after)
    if nullable:
        body = ir.alt(body, ir.seq(extra, extras_after))
    return ir.alt(ir.seq(ir.literal("{"), body, ir.literal("}")), ir.literal("{}"))


@st.composite
def object_bodies(draw: st.DrawFn) -> ir.Node:
    """An object body, sometimes with another object as a member's value, whose undeclared keys are the names
    outside the declared ones, outside some other names, a free string (no prefix code beside the keys) or none."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    members = [(name, draw(st.booleans()), draw(st.sampled_from(VALUES))) for name in names]
    kind = draw(st.sampled_from(["declared", "other", "free", "none"]))
    outside = names if kind == "declared" else draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True))
    key = {"declared": string_not_in(outside), "other": string_not_in(outside), "free": VALUES[-1],
           "none": ir.NOTHING}[kind]
    extra = ir.seq(key, COLON, draw(st.sampled_from(VALUES))) if kind != "none" else ir.NOTHING
    body = _object(members, extra)
    if draw(st.booleans()):
        inner = _object([(draw(st.sampled_from(NAMES)), draw(st.booleans()), call_symbol(1))],
                        ir.seq(string_not_in(names[:1]), COLON, call_symbol(0)))
        body = _object([*members, (draw(st.sampled_from(NAMES)), False, inner)], extra)
    return body


def _minimal_over_symbols(table: np.ndarray, symbol_class: np.ndarray, accepting: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """The minimal DFA of a class table read through each symbol's class."""
    return minimize(np.asarray(table)[:, symbol_class], np.asarray(accepting))


@settings(max_examples=300, deadline=None)
@given(object_bodies())
@example(_object([("a", False, call_symbol(0)), ("ab", True, VALUES[3])], ir.seq(string_not_in(["a", "ab"]), COLON,
                                                                                 call_symbol(1))))
@example(_object([("a", False, call_symbol(0))], ir.seq(string_not_in(["b"]), COLON, call_symbol(1))))
def test_keys_laid_out_as_tries_keep_the_language(body: ir.Node) -> None:
    caches.clear()
    keyed = keyed_body_dfa(body, 100_000, ALPHABET, CALL_BASE)
    dfa = determinized(body, 100_000, ALPHABET)
    table, accepting = trim_in_bfs_order(dfa.table, dfa.accepting, all_reachable=True, all_live=dfa.all_live,
                                         in_bfs_order=dfa.in_bfs_order)
    if keyed is None:
        return
    laid_table, symbol_class, laid_accepting = keyed
    assert symbol_class.shape == (ALPHABET,) and laid_table.dtype == np.int32
    reachable_from_start = minimize(laid_table[:, symbol_class], laid_accepting)
    assert len(reachable_from_start[1]) <= len(laid_accepting)
    expected = _minimal_over_symbols(table, dfa.byte_class, accepting)
    found = _minimal_over_symbols(laid_table, symbol_class, laid_accepting)
    assert np.array_equal(found[0], expected[0]) and np.array_equal(found[1], expected[1])


@settings(max_examples=60, deadline=None)
@given(object_bodies())
def test_a_keyed_body_is_trim(body: ir.Node) -> None:
    """Every state of a laid-out body is reached from the start and reaches acceptance (as the subset
    construction's trimmed table)."""
    caches.clear()
    keyed = keyed_body_dfa(body, 100_000, ALPHABET, CALL_BASE)
    if keyed is None:
        return
    table, symbol_class, accepting = keyed
    trimmed, _ = trim_in_bfs_order(table[:, symbol_class].astype(np.int64), accepting)
    assert len(trimmed) == len(table)


def test_an_open_object_is_laid_out_and_kept_per_body() -> None:
    """`_body_dfa` takes the laid-out path for an open object with calls."""
    caches.clear()
    body = _object([("a", False, call_symbol(0)), ("b", True, call_symbol(1))],
                   ir.seq(string_not_in(["a", "b"]), COLON, call_symbol(0)))
    assert keyed_body_dfa(body, 100_000, ALPHABET, CALL_BASE) is not None
    table, symbol_class, accepting = grammar_module._body_dfa(body, 100_000, ALPHABET)
    dfa = determinized(body, 100_000, ALPHABET)
    expected = _minimal_over_symbols(dfa.table, dfa.byte_class, dfa.accepting)
    found = _minimal_over_symbols(table, symbol_class, accepting)
    assert np.array_equal(found[0], expected[0]) and np.array_equal(found[1], expected[1])
