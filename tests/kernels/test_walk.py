"""The walk kernel's portable paths (numpy and MLX) equal the token table; the mask follows D.2."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from kernel_fixtures import dfa_and_vocab_strategy, person_dfa, random_dfa

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.constraint_spec import build_constraint
from stdsl.errors import StdslError
from stdsl.kernels.combined import CombinedTable, WalkTable
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocabulary import Vocabulary
from stdsl.kernels.walk import (
    backend,
    check_walk_kernel,
    walk_layout,
    walk_mask,
    walk_next_states,
    walk_next_states_mlx,
    walk_next_states_numpy,
    walk_next_states_trie,
)


def expected_mask(
    table: np.ndarray,
    vocab: Vocabulary,
    accepting: np.ndarray,
    states: np.ndarray,
    cover=None,
) -> np.ndarray:
    rows = table[states] >= 0
    if cover is not None:
        rows &= vocab.walk_lengths[None, :] >= np.asarray(cover)[states][:, None]
    return rows | (vocab.eos[None, :] & accepting[states][:, None])


@settings(max_examples=120, deadline=None)
@given(dfa_and_vocab_strategy())
def test_walk_paths_equal_the_table_for_every_state(case) -> None:
    transitions, accepting, tokens, eos = case
    vocab = Vocabulary(tokens, eos)
    table = token_table(transitions, vocab, accepting)
    walk_table = WalkTable(transitions, accepting)
    states = np.arange(transitions.shape[0])
    assert np.array_equal(walk_next_states_numpy(walk_table, states, vocab), table)
    assert np.array_equal(walk_next_states_trie(walk_table, states, vocab), table)
    assert np.array_equal(
        np.array(walk_next_states_mlx(walk_table, states, vocab)), table
    )
    for path in ("portable", "numpy", "mlx"):
        mask = np.array(walk_mask(walk_table, None, states, vocab, path=path))
        assert np.array_equal(mask, expected_mask(table, vocab, accepting, states))


@settings(max_examples=80, deadline=None)
@given(dfa_and_vocab_strategy())
def test_walk_table_from_split_rows_equals_the_one_from_the_dense_table(case) -> None:
    transitions, accepting, tokens, eos = case
    automaton = Automaton(transitions, accepting)
    from_rows = WalkTable.of(automaton)
    dense = WalkTable.from_classes(automaton.class_transitions, automaton.byte_class, automaton.accepting)
    assert np.array_equal(from_rows.scaled.flat, dense.scaled.flat)
    assert np.array_equal(from_rows.accepting, automaton.accepting)
    vocab = Vocabulary(tokens, eos)
    states = np.arange(transitions.shape[0])
    assert np.array_equal(walk_next_states_numpy(from_rows, states, vocab), token_table(transitions, vocab, accepting))


@pytest.mark.parametrize("name", ["hermes", "qwen_xml", "harmony"])
def test_walk_table_of_a_tool_reply_laid_out_in_blocks_equals_the_dense_one(name: str) -> None:
    tools = [{"name": f"tool_{i}", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": i}, "q": {"type": "string"}, "m": {"type": "string", "enum": ["x", "yz"]}},
        "required": ["a"]}} for i in range(5)]
    spec = {"kind": "tools", "format": name, "tools": tools, "choice": "auto", "parallel": True, "content": None}
    automaton = build_constraint(spec, 60).automaton
    assert automaton.blocks
    from_rows = WalkTable.of(automaton)
    dense = WalkTable.from_classes(automaton.class_transitions, automaton.byte_class, automaton.accepting)
    assert np.array_equal(from_rows.scaled.flat, dense.scaled.flat)
    assert np.array_equal(from_rows.class_transitions, automaton.class_transitions)


def test_first_byte_and_compaction_shortcuts_on_a_larger_vocabulary() -> None:
    rng = np.random.default_rng(3)
    alphabet = bytes(range(97, 123))
    tokens = [
        bytes(rng.choice(list(alphabet), size=int(rng.integers(1, 9))).tolist())
        for _ in range(12000)
    ]
    vocab = Vocabulary(tokens + [None], eos_ids=[len(tokens)])
    for live_fraction in (0.05, 0.5, 0.97):
        transitions, accepting = random_dfa(rng, 12, live_fraction, alphabet)
        table = token_table(transitions, vocab, accepting)
        got = walk_next_states_numpy(
            WalkTable(transitions, accepting), np.arange(12), vocab
        )
        assert np.array_equal(got, table)


def test_eos_only_at_accepting_states_and_specials_never() -> None:
    transitions, accepting = person_dfa()
    tokens = [b'{"name":"', b"Maria", None, b'"]}', b"x", None]
    vocab = Vocabulary(tokens, eos_ids=[5])
    states = np.arange(transitions.shape[0])
    mask = np.array(
        walk_mask(
            WalkTable(transitions, accepting), None, states, vocab, path="portable"
        )
    )
    assert np.array_equal(mask[:, 5], accepting)
    assert not mask[:, 2].any()
    assert mask[0, 0] and not mask[0, 1]


def test_cover_requires_long_enough_tokens() -> None:
    transitions, accepting = person_dfa()
    tokens = [b"{", b'{"', b'{"name":"', None]
    vocab = Vocabulary(tokens, eos_ids=[3])
    cover = np.zeros(transitions.shape[0], dtype=np.int32)
    cover[0] = 2
    for path in ("portable", "numpy", "mlx"):
        mask = np.array(
            walk_mask(
                WalkTable(transitions, accepting),
                None,
                [0],
                vocab,
                cover=cover,
                path=path,
            )
        )[0]
        assert mask.tolist() == [False, True, True, False]


def test_dead_row_and_bad_states() -> None:
    transitions, accepting = person_dfa()
    vocab = Vocabulary([b"{", None], eos_ids=[1])
    table = WalkTable(transitions, accepting)
    for path in ("portable", "numpy", "mlx"):
        assert np.array(walk_next_states(table, [-1], vocab, path=path)).tolist() == [
            [-1, -1]
        ]
        assert np.array(walk_mask(table, None, [-1], vocab, path=path)).tolist() == [
            [False, False]
        ]
    override = np.ones(transitions.shape[0], dtype=bool)
    assert np.array(
        walk_mask(table, override, [0], vocab, path="portable")
    ).tolist() == [[True, True]]
    with pytest.raises(StdslError, match="states must lie"):
        walk_next_states(table, [transitions.shape[0]], vocab, path="portable")
    with pytest.raises(StdslError, match="unknown path"):
        walk_next_states(table, [0], vocab, path="vulkan")
    with pytest.raises(StdslError, match="cover"):
        walk_mask(table, None, [0], vocab, cover=[1, 2])


@settings(max_examples=40, deadline=None)
@given(dfa_and_vocab_strategy(max_states=5), dfa_and_vocab_strategy(max_states=5))
def test_combined_table_rows_equal_the_separate_tables(first, second) -> None:
    t1, a1, tokens, eos = first
    t2, a2 = second[0], second[1]
    vocab = Vocabulary(tokens, eos)
    combined = CombinedTable.from_automata([(t1, a1), (t2, a2)])
    assert combined.offset(0) == 0 and combined.offset(1) == t1.shape[0]
    states = np.arange(combined.num_states)
    rows = walk_next_states_numpy(combined, states, vocab)
    for i, (t, a) in enumerate([(t1, a1), (t2, a2)]):
        own = token_table(t, vocab, a).astype(np.int64)
        block = rows[combined.offset(i) : combined.offset(i) + t.shape[0]]
        assert np.array_equal(block, np.where(own >= 0, own + combined.offset(i), -1))
        assert combined.block_of(combined.offset(i)) == (i, 0)
    mask = np.array(walk_mask(combined, None, states, vocab, path="portable"))
    assert np.array_equal(mask[:, eos[0]], combined.accepting)


def test_combined_table_refuses_bad_indices() -> None:
    transitions, accepting = person_dfa()
    combined = CombinedTable.from_automata([(transitions, accepting)])
    with pytest.raises(StdslError):
        combined.offset(1)
    with pytest.raises(StdslError):
        CombinedTable.from_automata([])


def test_walk_layout_is_sorted_by_length() -> None:
    vocab = Vocabulary([b"a", b"abc", None, b"ab", b"b"], eos_ids=[2])
    layout = walk_layout(vocab)
    assert vocab.walk_lengths[layout.order].tolist() == [3, 2, 1, 1]
    assert layout.alive.tolist() == [4, 2, 1]


def test_default_backend_here_and_self_check() -> None:
    assert backend() in ("metal", "cuda", "portable")
    check_walk_kernel("portable")
    check_walk_kernel("numpy")
    check_walk_kernel("mlx")
    if backend() != "portable":
        check_walk_kernel()
    result = walk_next_states(
        WalkTable(*person_dfa()), [0], Vocabulary([b"{"], eos_ids=[])
    )
    assert isinstance(result, mx.array) and result.dtype == mx.int32
