"""Dropping the quoted literals that a quoted text beside them reads (`subsumed_literals`) leaves a body's language as
it was (its minimal DFA is the same table), drops exactly the literals the text reads, and a body built through
`grammar._body_dfa` with them dropped is that language too."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.determinize import determinize
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.pushdown import grammar as grammar_module
from stdsl.compiler.pushdown.grammar import CALL_BASE, call_symbol
from stdsl.compiler.pushdown.literal_keys import QUOTE_SET
from stdsl.compiler.pushdown.subsumed_literals import holds_quoted_union, quoted_union, without_subsumed_literals

ALPHABET = CALL_BASE + 2
TEXTS = [ir.repeat(ir.byte_set([(0x61, 0x63)]), 0, None), ir.repeat(ir.literal("ab"), 1, 2),
         ir.seq(ir.literal("a"), ir.repeat(ir.byte_set([(0x61, 0x64)]), 0, 2))]
LITERALS = ['""', '"a"', '"ab"', '"abab"', '"d"', '"ca"', '"add"', '"abc"']


def quoted(text: ir.Node) -> ir.Node:
    return ir.Seq((QUOTE_SET, text, QUOTE_SET))


def unions() -> st.SearchStrategy[ir.Node]:
    """An alternation of quoted texts and quoted literals (and now and then a call)."""
    item = st.one_of(st.sampled_from(TEXTS).map(quoted), st.sampled_from(LITERALS).map(ir.literal),
                     st.sampled_from([call_symbol(0), ir.seq(ir.literal('"'), call_symbol(1))]))
    return st.lists(item, min_size=1, max_size=6).map(lambda items: ir.Alt(tuple(items)))


def bodies() -> st.SearchStrategy[ir.Node]:
    """Random bodies holding such alternations, with repeats and shared parts."""
    return st.recursive(st.one_of(unions(), st.sampled_from([ir.literal("{"), ir.literal(","), call_symbol(0)])),
                        lambda inner: st.one_of(
                            st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.seq(*items)),
                            st.lists(inner, min_size=1, max_size=3).map(lambda items: ir.Alt(tuple(items))),
                            st.tuples(inner, st.integers(0, 2)).map(lambda t: ir.repeat(t[0], t[1], None))),
                        max_leaves=6)


def minimal(node: ir.Node) -> tuple[np.ndarray, np.ndarray]:
    """The minimal DFA of `node` over the grammar's alphabet, over every symbol."""
    dfa = determinize(build_nfa(node), 100_000, ALPHABET)
    table, accepting = minimize(dfa.table, dfa.accepting)
    return table[:, dfa.byte_class], accepting


def reads(text: ir.Node, literal: str) -> bool:
    table, accepting = minimal(quoted(text))
    state = 0
    for byte in literal.encode():
        state = int(table[state, byte])
        if state < 0:
            return False
    return bool(accepting[state])


@settings(max_examples=150, deadline=None)
@given(bodies())
def test_dropping_subsumed_literals_keeps_the_language(body: ir.Node) -> None:
    simplified = without_subsumed_literals(body, {})
    assert holds_quoted_union(body, {}) or simplified is body
    (left, left_accepting), (right, right_accepting) = minimal(body), minimal(simplified)
    assert np.array_equal(left, right) and np.array_equal(left_accepting, right_accepting)


@settings(max_examples=150, deadline=None)
@given(unions())
def test_exactly_the_literals_a_text_beside_them_reads_are_dropped(union: ir.Node) -> None:
    assert isinstance(union, ir.Alt)
    texts = [item.items[1] for item in union.items if isinstance(item, ir.Seq) and "_literal" not in item.__dict__
             and len(item.items) == 3 and item.items[0] is QUOTE_SET and item.items[2] is QUOTE_SET]
    expected = [item for item in union.items
                if not ((data := ir.literal_bytes(item)) is not None and data.startswith(b'"')
                        and any(reads(text, data.decode()) for text in texts))]
    simplified = without_subsumed_literals(union, {})
    if len(expected) == len(union.items):
        assert simplified is union
    elif len(expected) == 1:
        assert simplified is expected[0]
    else:
        assert isinstance(simplified, ir.Alt) and list(simplified.items) == expected
    assert quoted_union(union) == (bool(texts) and any(
        (data := ir.literal_bytes(item)) is not None and data.startswith(b'"') for item in union.items))


@settings(max_examples=80, deadline=None)
@given(bodies())
def test_a_body_built_with_its_literals_dropped_has_its_language(body: ir.Node) -> None:
    caches.clear()
    table, symbol_class, accepting = grammar_module._body_dfa(body, 100_000, ALPHABET)
    got = minimize(table[:, symbol_class], accepting)
    expected = minimal(body)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])
    caches.clear()
