"""Memoized packed bitmasks (`PackedMasks`, `RowCache.fill_bitmask`) equal the freshly computed mask, evicted or not.

The oracle is the token table (every token's walk from the state, eos iff accepting) packed by numpy's packbits.
States are asked in random orders under random byte bounds, so keys are evicted and filled again, and string-like
states that share one `TokenMask` share one array.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_fixtures import dfa_and_vocab_strategy

from stdsl.errors import StdslError
from stdsl.kernels.packed_masks import PackedMask, PackedMasks
from stdsl.kernels.rows import RowCache
from stdsl.kernels.token_mask import TokenMask, bitmask_words
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocabulary import Vocabulary


def packbits_words(allowed: np.ndarray) -> np.ndarray:
    """The int32 bitmask of a bool mask (bit j of word i is token 32·i + j, padding 0), by numpy's packbits."""
    words = np.zeros(bitmask_words(allowed.shape[0]), dtype=np.int32)
    data = np.packbits(allowed, bitorder="little")
    words.view(np.uint8)[: data.shape[0]] = data
    return words


def assert_memo_consistent(memo: PackedMasks) -> None:
    """The byte bound holds (or only the newest key is left), and the bytes are the distinct arrays held."""
    assert memo.nbytes <= memo.max_bytes or len(memo) == 1
    distinct = {id(words): words.nbytes for words in memo._by_key.values()}
    assert memo.nbytes == sum(distinct.values())


class _Auto:
    def __init__(self, transitions: np.ndarray, accepting: np.ndarray) -> None:
        self.transitions, self.accepting = transitions, accepting


@settings(max_examples=150, deadline=None)
@given(dfa_and_vocab_strategy(), st.data())
def test_row_cache_fills_equal_the_table_under_any_byte_bound(case, data) -> None:
    transitions, accepting, tokens, eos = case
    vocab = Vocabulary(tokens, eos)
    table = token_table(transitions, vocab, accepting)
    words = bitmask_words(vocab.size)
    num_states = transitions.shape[0]
    max_bytes = data.draw(st.integers(1, 4 * words * (num_states + 1)), label="max_packed_bytes")
    order = data.draw(st.lists(st.integers(0, num_states - 1), min_size=1, max_size=30), label="states")
    cache = RowCache(_Auto(transitions, accepting), vocab, max_rows=data.draw(st.integers(1, 3)),
                     max_packed_bytes=max_bytes)
    out = np.full(words, 0x5A5A5A5A, dtype=np.int32)
    for q in order:
        oracle = table[q] >= 0
        oracle[vocab.eos_ids] = bool(accepting[q])
        assert cache.fill_bitmask(q, out) is out
        assert np.array_equal(out, packbits_words(oracle)), q
        assert_memo_consistent(cache.packed)
    assert cache.packed.hits + cache.packed.misses == len(order)
    assert cache.nbytes >= cache.packed.nbytes


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_packed_masks_equal_the_masks_after_eviction_and_share_equal_ones(data) -> None:
    size = data.draw(st.integers(1, 5000), label="size")
    ids = st.sets(st.integers(0, size - 1), max_size=40).map(lambda s: np.asarray(sorted(s), dtype=np.int32))
    masks = data.draw(st.lists(st.builds(TokenMask.of, st.just(size), ids, st.booleans()), min_size=1, max_size=5))
    owners = data.draw(st.lists(st.integers(0, len(masks) - 1), min_size=1, max_size=12), label="mask of key")
    memo = PackedMasks(size, data.draw(st.integers(1, 4 * bitmask_words(size) * 4), label="max_bytes"))
    out = np.zeros(bitmask_words(size), dtype=np.int32)
    for key in data.draw(st.lists(st.integers(0, len(owners) - 1), min_size=1, max_size=40), label="keys"):
        mask = masks[owners[key]]
        memo.fill(key, lambda k: masks[owners[k]], out)
        assert np.array_equal(out, packbits_words(mask.dense())), key
        assert_memo_consistent(memo)
    held = list(memo._by_key.items())
    for key, words in held:
        for other, other_words in held:
            if owners[key] == owners[other]:
                assert words is other_words, "keys of one TokenMask share one array"


@pytest.mark.parametrize("listed_allowed", [True, False])
def test_few_differing_words_pack_sparse_and_many_pack_whole(listed_allowed: bool) -> None:
    size = 32 * 64 + 5
    for ids, sparse in ((np.asarray([0, 31, 700, size - 1]), True), (np.arange(0, size, 9), False)):
        mask = TokenMask.of(size, ids.astype(np.int32), listed_allowed)
        packed = PackedMask.of(mask)
        assert (packed.fill is not None) == sparse
        out = np.full(bitmask_words(size), 0x5A5A5A5A, dtype=np.int32)
        packed.write(out)
        assert np.array_equal(out, packbits_words(mask.dense()))


def test_a_warm_fill_does_not_ask_for_the_mask_again() -> None:
    mask = TokenMask.of(70, np.asarray([3, 64, 69], dtype=np.int32), True)
    asked: list[int] = []
    memo = PackedMasks(70)
    out = np.zeros(3, dtype=np.int32)
    for _ in range(3):
        memo.fill(7, lambda key: asked.append(key) or mask, out)
    assert asked == [7] and memo.hits == 2 and memo.misses == 1
    assert out.tolist() == [1 << 3, 0, 1 | 1 << 5]


def test_packed_masks_refuse_bad_input() -> None:
    with pytest.raises(StdslError, match="max_bytes"):
        PackedMasks(10, max_bytes=0)
    memo = PackedMasks(40)
    mask = TokenMask.of(40, np.asarray([1], dtype=np.int32), True)
    for bad in (np.zeros(2, dtype=np.int64), np.zeros(3, dtype=np.int32), np.zeros((2, 2), dtype=np.int32)[:, 0]):
        with pytest.raises(StdslError, match="PackedMasks: the bitmask"):
            memo.fill(0, lambda key: mask, bad)
    with pytest.raises(StdslError, match="over 41 tokens"):
        memo.fill(1, lambda key: TokenMask.of(41, np.asarray([1], dtype=np.int32), True), np.zeros(2, dtype=np.int32))
    assert len(memo) == 0 and memo.nbytes == 0
