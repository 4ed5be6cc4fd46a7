"""The level-pass token table (Algorithm 4) equals plain per-(state, token) walks on random DFAs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from kernel_fixtures import dfa_and_vocab_strategy, naive_table, person_dfa

from stdsl.errors import StdslError
from stdsl.kernels.token_table import (
    automaton_arrays,
    scaled_table,
    state_dtype,
    token_table,
    token_table_rows,
)
from stdsl.kernels.vocabulary import Vocabulary


@settings(max_examples=150, deadline=None)
@given(dfa_and_vocab_strategy())
def test_table_equals_naive_walks(case) -> None:
    transitions, accepting, tokens, eos = case
    vocab = Vocabulary(tokens, eos)
    table = token_table(transitions, vocab, accepting)
    assert table.shape == (transitions.shape[0], len(tokens))
    assert table.dtype == np.int16
    assert np.array_equal(table, naive_table(transitions, tokens, eos))


def test_specials_and_eos_are_dead_everywhere() -> None:
    transitions, accepting = person_dfa()
    tokens = [b'{"', None, b"a", b'{"name":"', b"x"]
    vocab = Vocabulary(tokens, eos_ids=[4])
    table = token_table(transitions, vocab, accepting)
    assert (table[:, 1] == -1).all() and (table[:, 4] == -1).all()
    assert table[0, 3] == 9 and table[0, 0] == 2


def test_accepts_an_automaton_object() -> None:
    class Auto:
        def __init__(self, t, a):
            self.transitions, self.accepting = t, a

    transitions, accepting = person_dfa()
    vocab = Vocabulary([b"{", b'"', b"x"], eos_ids=[])
    assert np.array_equal(
        token_table(Auto(transitions, accepting), vocab),
        token_table(transitions, vocab, accepting),
    )


def test_bad_automata_are_refused() -> None:
    with pytest.raises(StdslError, match="shape"):
        automaton_arrays(np.zeros((3, 255), dtype=np.int16), np.zeros(3, dtype=bool))
    with pytest.raises(StdslError, match="accepting"):
        automaton_arrays(np.zeros((3, 256), dtype=np.int16), np.zeros(2, dtype=bool))
    with pytest.raises(StdslError, match=r"\[-1, 2\]"):
        automaton_arrays(np.full((3, 256), 3, dtype=np.int16), np.zeros(3, dtype=bool))
    with pytest.raises(StdslError, match="transitions"):
        automaton_arrays(object())


def test_scaled_table_and_dtype() -> None:
    transitions = np.array([[1] + [-1] * 255, [-1] * 256], dtype=np.int16)
    scaled = scaled_table(transitions)
    assert scaled.shape == (3 * 256,)
    assert scaled[0] == 256 and scaled[1] == 512 and (scaled[512:] == 512).all()
    assert state_dtype(32767) == np.int16 and state_dtype(32768) == np.int32


@settings(max_examples=60, deadline=None)
@given(dfa_and_vocab_strategy())
def test_table_rows_for_chosen_states(case) -> None:
    transitions, accepting, tokens, eos = case
    vocab = Vocabulary(tokens, eos)
    states = np.arange(transitions.shape[0])[::-1]
    rows = token_table_rows(transitions, states, vocab, accepting)
    assert np.array_equal(rows, token_table(transitions, vocab, accepting)[states])
    with pytest.raises(StdslError, match="states"):
        token_table_rows(transitions, [transitions.shape[0]], vocab, accepting)
