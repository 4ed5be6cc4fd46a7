"""A pushdown grammar's tables kept over byte classes read exactly as the 256-byte tables laid out body by body (the
old layout, rebuilt here from each body's DFA): own moves, call edges, first and follow sets, and the completion
lengths over a subset of the bytes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.pushdown import grammar as grammar_module
from stdsl.compiler.pushdown.completion_graph import CompletionGraph
from stdsl.compiler.pushdown.grammar import (
    CALL_BASE,
    PushdownGrammar,
    _completions_within_depth,
    common_byte_classes,
    completions_over,
)
from tests.compiler.pushdown.random_grammars import grammars as random_grammars

LEAVES = [ir.literal("x"), ir.literal("yz"), ir.byte_set([(0x30, 0x39)]), ir.byte_set([(0x35, 0x5a)]),
          ir.byte_set([(0x00, 0x2f), (0x7b, 0xff)]), ir.byte_set([(0x80, 0xbf)])]


def grammars() -> st.SearchStrategy[PushdownGrammar | None]:
    """Random grammars over overlapping byte ranges (so the bodies' byte classes differ), the last definition also
    entered after any of them."""
    return random_grammars(LEAVES, LEAVES)


def dense_layout(grammar: PushdownGrammar) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(own moves (Q, 256), call edges (caller, callee, return) in layout order, first sets (N, 256)): each body's DFA
    over every symbol laid out at its offset, as the grammar was laid out before it kept byte classes."""
    assert grammar.fragment is not None
    main, definitions = grammar.fragment
    alphabet = CALL_BASE + len(definitions)
    own, edges, offset = [], [], 0
    for index, body in enumerate([main, *(d.body for d in definitions)]):
        table, symbol_class, _ = grammar_module._body_dfa(body, 100_000, alphabet)
        dense = table[:, symbol_class].astype(np.int64)
        own.append(np.where(dense[:, :CALL_BASE] >= 0, dense[:, :CALL_BASE] + offset, -1))
        states, columns = np.nonzero(dense[:, CALL_BASE:] >= 0)
        edges += [(int(q) + offset, int(c) + 1, int(dense[q, CALL_BASE + c]) + offset) for q, c in zip(states, columns)]
        offset += len(table)
    byte_table = np.concatenate(own)
    first = np.zeros((len(grammar.names), 256), dtype=bool)
    changed = True
    while changed:
        changed = False
        for n in range(len(grammar.names)):
            start = int(grammar.starts[n])
            reads = (byte_table[start] >= 0) | first[n]
            for caller, callee, _ in edges:
                if caller == start:
                    reads = reads | first[callee]
            if not np.array_equal(reads, first[n]):
                first[n], changed = reads, True
    return byte_table, np.array(edges, dtype=np.int64).reshape(-1, 3), first


@settings(max_examples=150, deadline=None)
@given(grammars())
def test_the_class_tables_expand_to_the_dense_layout(grammar: PushdownGrammar | None) -> None:
    if grammar is None:
        return
    byte_table, edges, first = dense_layout(grammar)
    assert np.array_equal(grammar.byte_table, byte_table)
    assert np.array_equal(grammar.own_classes[:, grammar.byte_class], byte_table)
    found = np.stack([grammar.call_state, grammar.call_callee, grammar.call_return], axis=1)
    assert np.array_equal(found.reshape(-1, 3), edges)
    assert np.array_equal(grammar.first, first)
    call_of_byte = np.full(byte_table.shape, -1, dtype=np.int64)
    for edge, (caller, callee, _) in enumerate(edges.tolist()):
        call_of_byte[caller, first[callee]] = edge
    assert np.array_equal(grammar.call_of_byte, call_of_byte)
    assert np.array_equal(grammar.has_successor, (byte_table >= 0).any(axis=1) | np.isin(
        np.arange(len(byte_table)), edges[:, 0]))


@settings(max_examples=100, deadline=None)
@given(grammars(), st.lists(st.integers(0, 255), max_size=40))
def test_completions_over_some_bytes_are_those_of_the_dense_table_restricted(grammar: PushdownGrammar | None,
                                                                             allowed_bytes: list[int]) -> None:
    if grammar is None:
        return
    allowed = np.zeros(256, dtype=bool)
    allowed[allowed_bytes] = True
    restricted = np.where(allowed[None, :], grammar.byte_table, -1)
    expected = _completions_within_depth(grammar, CompletionGraph(grammar, restricted))
    assert np.array_equal(completions_over(grammar, allowed), expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), min_size=256, max_size=256), min_size=1, max_size=4))
def test_common_byte_classes_keep_together_exactly_the_bytes_every_map_keeps_together(maps: list[list[int]]) -> None:
    arrays = [np.array(m, dtype=np.intp) for m in maps]
    byte_class, first_byte = common_byte_classes(arrays)
    keys = list(zip(*maps))
    for a in range(0, 256, 7):
        for b in range(256):
            assert (byte_class[a] == byte_class[b]) == (keys[a] == keys[b])
    assert first_byte.tolist() == [int(np.flatnonzero(byte_class == c)[0]) for c in range(len(first_byte))]
    assert np.all(np.diff(first_byte) > 0)
