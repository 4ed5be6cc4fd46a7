"""Rows on demand (D.6) equal the token table; the LRU stays bounded; advance walks one token."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_fixtures import (
    dfa_and_vocab_strategy,
    enum_regex,
    naive_next_state,
    person_dfa,
    person_regex,
    random_dfa,
)

from stdsl.errors import StdslError
from stdsl.kernels.rows import CompactRow, RowCache, row_next_states
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocabulary import Vocabulary

level_pass_module = importlib.import_module("stdsl.kernels.level_pass")
"""The module itself (`stdsl.kernels` exports its `token_table` function under the same name)."""


@settings(max_examples=150, deadline=None)
@given(dfa_and_vocab_strategy())
def test_rows_equal_the_table_for_every_state(case) -> None:
    transitions, accepting, tokens, eos = case
    vocab = Vocabulary(tokens, eos)
    table = token_table(transitions, vocab, accepting)
    cache = RowCache(_Auto(transitions, accepting), vocab, max_rows=3)
    for q in range(transitions.shape[0]):
        assert np.array_equal(cache.next_states(q), table[q])
        mask = cache.mask(q)
        assert np.array_equal(mask[: len(tokens)] & ~vocab.eos, table[q] >= 0)
        assert bool(mask[eos[0]]) == bool(accepting[q])
        for t, token in enumerate(tokens):
            expected = naive_next_state(transitions, q, None if t in eos else token)
            assert cache.advance(q, t) == expected
    assert len(cache) <= 3


@settings(max_examples=60, deadline=None)
@given(dfa_and_vocab_strategy(), st.sampled_from([0, 4, 10**9]), st.sampled_from([0, 3, 10**9]))
def test_rows_equal_the_table_however_levels_switch_between_dense_and_sparse(case, fraction: int, small: int) -> None:
    transitions, accepting, tokens, eos = case
    vocab = Vocabulary(tokens, eos)
    table = token_table(transitions, vocab, accepting)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(level_pass_module, "DENSE_FRACTION", fraction)
        patch.setattr(level_pass_module, "SMALL_LEVEL", small)
        for q in range(transitions.shape[0]):
            assert np.array_equal(row_next_states(_Auto(transitions, accepting), q, vocab), table[q])


class _Auto:
    def __init__(self, transitions: np.ndarray, accepting: np.ndarray) -> None:
        self.transitions, self.accepting = transitions, accepting


def test_sparse_and_dense_levels_on_a_larger_vocabulary() -> None:
    rng = np.random.default_rng(5)
    alphabet = bytes(range(97, 117))
    tokens = [
        bytes(rng.choice(list(alphabet), size=int(rng.integers(1, 10))).tolist())
        for _ in range(15000)
    ]
    vocab = Vocabulary(tokens, eos_ids=[])
    for live_fraction in (0.03, 0.4, 0.98):
        transitions, accepting = random_dfa(rng, 10, live_fraction, alphabet)
        table = token_table(transitions, vocab, accepting)
        for q in range(10):
            assert np.array_equal(
                row_next_states(_Auto(transitions, accepting), q, vocab), table[q]
            )


def test_lru_evicts_oldest_and_rows_are_read_only() -> None:
    transitions, accepting = person_dfa()
    vocab = Vocabulary([b"{", b'"', b"a", None], eos_ids=[3])
    cache = RowCache(_Auto(transitions, accepting), vocab, max_rows=2)
    first = cache.mask(0)
    kept = cache.row(0)
    cache.mask(1)
    cache.mask(0)
    cache.mask(2)
    assert len(cache) == 2 and cache.row(0) is kept
    assert np.array_equal(cache.mask(0), first)
    with pytest.raises(ValueError):
        first[0] = False
    with pytest.raises(ValueError):
        cache.next_states(0)[0] = 1
    assert cache.nbytes > 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-1, 40), min_size=1, max_size=300), st.sampled_from([np.int16, np.int32]))
def test_compact_row_keeps_every_entry(values: list[int], dtype: type) -> None:
    row = np.asarray(values, dtype=dtype)
    compact = CompactRow.of(row)
    assert np.array_equal(compact.next_states(row.shape[0], np.dtype(dtype)), row)
    assert np.array_equal(compact.live(row.shape[0]), row >= 0)
    assert compact.tokens.tolist() == sorted(compact.tokens.tolist())
    flips_bytes = 0 if compact.flips is compact.tokens else compact.flips.nbytes
    assert compact.nbytes == compact.tokens.nbytes + compact.states.nbytes + flips_bytes
    assert set(compact.flips.tolist()) == {t for t in range(row.shape[0]) if (values[t] >= 0) != (compact.default >= 0)}
    assert int(np.count_nonzero(row != compact.default)) == compact.tokens.shape[0]


def test_compact_rows_store_only_the_exceptions_of_a_string_state() -> None:
    transitions, accepting = person_dfa()
    rng = np.random.default_rng(9)
    letters = bytes(range(ord("a"), ord("z") + 1))
    tokens = [bytes(rng.choice(list(letters), size=int(rng.integers(1, 6))).tolist()) for _ in range(4000)]
    vocab = Vocabulary([*tokens, b'"', b'",', None], eos_ids=[len(tokens) + 2])
    cache = RowCache(_Auto(transitions, accepting), vocab)
    inside = int(naive_next_state(transitions, 0, b'{"name":"'))
    row = cache.row(inside)
    assert row.default == inside and row.tokens.shape[0] <= 3
    assert cache.nbytes < 80


def test_rows_refuse_bad_input() -> None:
    transitions, accepting = person_dfa()
    vocab = Vocabulary([b"{", None], eos_ids=[1])
    cache = RowCache(_Auto(transitions, accepting), vocab)
    with pytest.raises(StdslError, match="state"):
        cache.mask(transitions.shape[0])
    with pytest.raises(StdslError, match="token id"):
        cache.advance(0, 2)
    with pytest.raises(StdslError, match="max_rows"):
        RowCache(_Auto(transitions, accepting), vocab, max_rows=0)
    assert cache.advance(0, 1) == -1


@pytest.mark.parametrize("live_fraction", [0.02, 0.45, 0.55, 0.99])
def test_rows_equal_the_table_whether_few_or_most_bytes_are_live(live_fraction: float) -> None:
    rng = np.random.default_rng(11)
    tokens = [bytes(rng.integers(0, 256, size=int(rng.integers(1, 5))).tolist()) for _ in range(3000)]
    vocab = Vocabulary([*tokens, None], eos_ids=[len(tokens)])
    transitions, accepting = random_dfa(rng, 12, live_fraction, bytes(range(256)))
    table = token_table(transitions, vocab, accepting)
    cache = RowCache(_Auto(transitions, accepting), vocab)
    for q in range(12):
        assert np.array_equal(cache.next_states(q), table[q])
        assert np.array_equal(cache.mask(q)[:-1], table[q][:-1] >= 0)
        assert cache.mask(q)[-1] == accepting[q]


def test_string_states_share_their_dead_tokens_and_mask() -> None:
    transitions, accepting = person_dfa()
    rng = np.random.default_rng(4)
    letters = bytes(range(ord("a"), ord("z") + 1))
    tokens = [bytes(rng.choice(list(letters), size=int(rng.integers(1, 6))).tolist()) for _ in range(2000)]
    vocab = Vocabulary([*tokens, b'"', b"\x01", None], eos_ids=[len(tokens) + 2])
    cache = RowCache(_Auto(transitions, accepting), vocab, max_rows=2)
    name = int(naive_next_state(transitions, 0, b'{"name":"'))
    email = int(naive_next_state(transitions, 0, b'{"name":"a","age":1,"email":"'))
    table = token_table(transitions, vocab, accepting)
    first = cache.mask(name)
    assert cache.mask(email) is first and cache.row(name).flips is cache.row(email).flips
    for q in (name, email, 0):
        assert np.array_equal(cache.mask(q)[:-1], table[q][:-1] >= 0)
    cache.mask(1)
    cache.mask(2)
    assert all(len(bucket) == 0 for bucket in cache._flip_sets.values())


@pytest.mark.parametrize("pattern", ["person", "enum", "text"])
def test_rows_equal_byte_by_byte_walks_on_the_smollm2_vocabulary(smollm2_tokenizer, pattern: str) -> None:
    from stdsl.compiler.automata.build import compile_regex
    from stdsl.control.special_vocabulary import vocabulary_of

    regex = {"person": person_regex(), "enum": enum_regex(), "text": r'"([^"\\]|\\.){0,40}" ?[a-z ]{0,12}'}[pattern]
    automaton = compile_regex(regex)
    vocab = vocabulary_of(smollm2_tokenizer)
    transitions = np.asarray(automaton.transitions)
    cache = RowCache(automaton, vocab, max_rows=8)
    table = token_table(automaton, vocab)
    for q in range(automaton.num_states):
        assert np.array_equal(cache.next_states(q), table[q]), q
    rng = np.random.default_rng(len(pattern))
    for q in rng.choice(automaton.num_states, size=min(2, automaton.num_states), replace=False).tolist():
        row = cache.next_states(q)
        expected = [naive_next_state(transitions, q, None if vocab.eos[t] else vocab.token_bytes[t])
                    for t in range(vocab.size)]
        assert np.array_equal(row, np.asarray(expected, dtype=row.dtype)), q
