"""TokenMask (the allowed or the refused ids) expands to the bool mask it stands for; RowCache's equals the table."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_fixtures import dfa_and_vocab_strategy

from stdsl.errors import StdslError
from stdsl.kernels.rows import RowCache
from stdsl.kernels.token_mask import TokenMask, bitmask_words
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocabulary import Vocabulary


def _unpack(bitmask: np.ndarray, size: int) -> np.ndarray:
    """The bool mask of an int32 bitmask (bit j of word i is token 32·i + j), padding bits included."""
    return np.unpackbits(bitmask.view(np.uint8), bitorder="little").astype(bool)[: bitmask.shape[0] * 32]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2000).flatmap(
    lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), max_size=80), st.booleans())))
def test_token_mask_expands_to_its_set(case) -> None:
    size, ids, listed_allowed = case
    oracle = np.full(size, not listed_allowed)
    oracle[sorted(ids)] = listed_allowed
    mask = TokenMask.of(size, np.asarray(sorted(ids), dtype=np.int32), listed_allowed)
    assert np.array_equal(mask.dense(), oracle)
    assert mask.count == int(oracle.sum())
    assert mask.allowed_ids().tolist() == np.flatnonzero(oracle).tolist()
    assert all(mask.allows(t) == oracle[t] for t in range(size))
    bits = np.full(bitmask_words(size), 12345, dtype=np.int32)
    unpacked = _unpack(mask.fill_bitmask(bits), size)
    assert np.array_equal(unpacked[:size], oracle) and not unpacked[size:].any()
    assert mask.nbytes >= mask.listed.nbytes
    assert np.array_equal(_unpack(mask.fill_bitmask(bits), size)[:size], oracle)


def test_token_mask_refuses_bad_input() -> None:
    with pytest.raises(StdslError, match="sorted"):
        TokenMask.of(4, np.asarray([1, 4], dtype=np.int32), True)
    mask = TokenMask.of(4, np.asarray([1], dtype=np.int32), True)
    with pytest.raises(StdslError, match="token id"):
        mask.allows(4)
    with pytest.raises(StdslError, match="bitmask"):
        mask.fill_bitmask(np.zeros(2, dtype=np.int32))
    assert not mask.listed.flags.writeable


@settings(max_examples=150, deadline=None)
@given(dfa_and_vocab_strategy())
def test_row_cache_compact_masks_equal_the_table(case) -> None:
    transitions, accepting, tokens, eos = case
    vocab = Vocabulary(tokens, eos)
    table = token_table(transitions, vocab, accepting)
    cache = RowCache(_Auto(transitions, accepting), vocab, max_rows=2)
    bits = np.zeros(bitmask_words(vocab.size), dtype=np.int32)
    for q in [*range(transitions.shape[0]), 0]:
        oracle = table[q] >= 0
        oracle[vocab.eos_ids] = bool(accepting[q])
        compact = cache.token_mask(q)
        assert np.array_equal(compact.dense(), oracle)
        assert np.array_equal(_unpack(cache.fill_bitmask(q, bits), vocab.size)[: vocab.size], oracle)
        assert np.array_equal(cache.mask(q), oracle)
        assert cache.token_mask(q) is compact
    assert len(cache) <= 2


def test_string_states_share_one_compact_mask_per_acceptance() -> None:
    letters = [bytes([c]) for c in range(ord("a"), ord("z") + 1)]
    vocab = Vocabulary([*letters, b'"', None], eos_ids=[len(letters) + 1])
    transitions = np.full((3, 256), -1, dtype=np.int16)
    for q in (0, 1):
        transitions[q, ord("a") : ord("z") + 1] = q
        transitions[q, ord('"')] = 2
    accepting = np.asarray([False, True, True])
    cache = RowCache(_Auto(transitions, accepting), vocab)
    refused, accepted = cache.token_mask(0), cache.token_mask(1)
    assert not refused.listed_allowed and not accepted.listed_allowed
    assert refused.count == len(letters) + 1 and accepted.count == len(letters) + 2
    assert cache.row(0).flips is cache.row(1).flips
    assert cache.token_mask(2).listed_allowed and cache.token_mask(2).allowed_ids().tolist() == [len(letters) + 1]


class _Auto:
    def __init__(self, transitions: np.ndarray, accepting: np.ndarray) -> None:
        self.transitions, self.accepting = transitions, accepting
