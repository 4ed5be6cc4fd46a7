"""Row slots and the prompt cache: ragged batched passes equal one sequence at a time; the trie finds longest prefixes.

Oracles: mlx-lm's own single-sequence KVCache for the logits, brute force for the longest common prefix.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.models.llama import Model as LlamaModel
from mlx_lm.models.llama import ModelArgs

from stdsl.runtime.batch.forward import forward_rows, make_row_caches
from stdsl.runtime.batch.prompt_cache import ARRAY_BYTES, PromptCache, entry_bytes
from stdsl.runtime.row_caches.recurrent import RecurrentState

VOCAB = 97


@pytest.fixture(scope="module")
def net():
    args = ModelArgs(model_type="llama", hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                     num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=VOCAB,
                     rope_theta=10000.0, rope_traditional=True, tie_word_embeddings=True)
    mx.random.seed(3)
    model = LlamaModel(args)
    mx.eval(model.parameters())
    return model


feeds = st.lists(st.lists(st.integers(0, VOCAB - 1), min_size=0, max_size=6), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(feeds, min_size=1, max_size=5), drop=st.integers(0, 3))
def test_ragged_passes_equal_single_sequences(net, steps, drop) -> None:
    rows = max(len(step) for step in steps)
    caches = make_row_caches(net, rows)
    alone = [make_prompt_cache(net) for _ in range(rows)]
    alive = list(range(rows))
    for number, step in enumerate(steps):
        feed = [step[i] if i < len(step) else [] for i in range(len(alive))]
        if not any(feed):
            continue
        got = np.asarray(forward_rows(net, caches, feed))
        for slot, (row, tokens) in enumerate(zip(alive, feed)):
            if tokens:
                want = np.asarray(net(mx.array([tokens]), cache=alone[row])[0, -1].astype(mx.float32))
                assert np.allclose(got[slot], want, atol=1e-4), (number, row)
        if number == 1 and len(alive) > 1:
            keep = [i for i in range(len(alive)) if i != drop % len(alive)]
            caches.keep(keep)
            alive = [alive[i] for i in keep]
    for layer, cache in enumerate(caches.leaves):
        for slot, row in enumerate(alive):
            assert cache.row_lengths[slot] == alone[row][layer].offset
            if cache.keys is not None and cache.row_lengths[slot]:
                keys, _ = cache.row(slot)
                want = alone[row][layer].keys[..., : cache.row_lengths[slot], :]
                assert keys.shape == want.shape and np.allclose(np.asarray(keys), np.asarray(want), atol=1e-4)


sequences = st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=8), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(stored=sequences, query=st.lists(st.integers(0, 5), min_size=0, max_size=9))
def test_prompt_cache_finds_the_longest_common_prefix(stored, query) -> None:
    cache = PromptCache(max_bytes=1 << 30)
    for sequence in stored:
        kv = mx.array(np.array(sequence, dtype=np.float32).reshape(1, 1, -1, 1))
        cache.store(sequence, [(kv, kv)])
    best = max((next((i for i, (a, b) in enumerate(zip(s, query)) if a != b), min(len(s), len(query)))
                for s in stored), default=0)
    hit = cache.lookup(query)
    if best == 0:
        assert hit is None
        return
    assert hit is not None and hit.length == best
    keys = np.asarray(hit.layers[0][0]).reshape(-1)
    assert keys[:best].tolist() == query[:best]


@settings(max_examples=40, deadline=None)
@given(stored=sequences, budget=st.integers(8, 12_000))
def test_prompt_cache_stays_under_its_byte_bound(stored, budget) -> None:
    cache = PromptCache(max_bytes=budget)
    for sequence in stored:
        kv = mx.array(np.zeros((1, 1, len(sequence), 1), dtype=np.float32))
        cache.store(sequence, [(kv, kv)])
        assert cache.nbytes <= budget
    for sequence in stored:
        cache.discard(sequence)
    assert cache.nbytes == 0 and len(cache) == 0 and cache.lookup(stored[0]) is None


@settings(max_examples=20, deadline=None)
@given(hits=st.lists(st.booleans(), min_size=1, max_size=4),
       prefix=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=5),
       tail=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=4))
def test_rows_admitted_with_and_without_a_cached_prefix_decode_as_alone(net, hits, prefix, tail) -> None:
    """A group mixing prompt-cache hits and misses, in any order (a miss first once gave fewer key rows than rows)."""
    solo = make_row_caches(net, 1)
    forward_rows(net, solo, [prefix])
    stored = solo.row(0)
    group = make_row_caches(net, 0)
    for hit in hits:
        group.append_rows([stored if hit else None], [len(prefix) if hit else 0])
    logits = forward_rows(net, group, [tail if hit else prefix + tail for hit in hits])
    alone = forward_rows(net, make_row_caches(net, 1), [prefix + tail])
    for row in range(len(hits)):
        np.testing.assert_allclose(np.array(logits[row]), np.array(alone[0]), atol=1e-4)


@settings(max_examples=25, deadline=None)
@given(schedule=st.lists(st.tuples(st.sampled_from(["feed", "drop", "join"]), st.integers(0, 7),
                                   st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=5)),
                         min_size=1, max_size=14))
def test_rows_leaving_and_joining_reuse_slots_and_decode_as_alone(net, schedule) -> None:
    """Rows leave (their slots freed, nothing copied), join (into a free slot when there is one, or at the end),
    and slots left free long enough are compacted: every pass still equals each row decoded alone."""
    caches = make_row_caches(net, 0)
    alone: list[list] = []
    for action, pick, tokens in schedule:
        if action == "join" or not alone:
            solo = make_row_caches(net, 1)
            forward_rows(net, solo, [tokens])
            caches.append_rows([solo.row(0)], [len(tokens)])
            reference = make_prompt_cache(net)
            net(mx.array([tokens]), cache=reference)
            alone.append(reference)
        elif action == "drop":
            keep = [i for i in range(len(alone)) if i != pick % len(alone)]
            caches.keep(keep)
            alone = [alone[i] for i in keep]
        else:
            feeds = [tokens[: 1 + (pick + i) % len(tokens)] for i in range(len(alone))]
            got = np.asarray(forward_rows(net, caches, feeds))
            for row, feed in enumerate(feeds):
                want = np.asarray(net(mx.array([feed]), cache=alone[row])[0, -1].astype(mx.float32))
                assert np.allclose(got[row], want, atol=1e-4), (action, row)
        assert caches.row_lengths == [reference[0].offset for reference in alone]
        if action == "feed" and alone:  # a pass compacts slots left free too long (drops alone copy nothing)
            assert len(caches.leaves[0].free_slots) <= max(len(alone), 1) + 1


def test_a_sequence_extending_a_stored_one_keeps_only_its_new_positions() -> None:
    """The next turn of a conversation shares the earlier turn's positions: bytes grow by the new positions only
    (with their arrays' and the entry's own bookkeeping), and both sequences still read back their own keys."""
    cache = PromptCache(max_bytes=1 << 20)

    def kv(tokens: list[int]) -> list:
        array = mx.array(np.array(tokens, dtype=np.float32).reshape(1, 1, -1, 1))
        return [(array, array)]

    def held(positions: int, segments: int, *keys: tuple[int, ...]) -> int:
        return positions * 8 + segments * 2 * ARRAY_BYTES + sum(entry_bytes(key) for key in keys)

    cache.store([1, 2, 3], kv([1, 2, 3]))
    assert cache.nbytes == held(3, 1, (1, 2, 3))
    cache.store([1, 2, 3, 4, 5], kv([1, 2, 3, 4, 5]))
    cache.store([1, 2, 9], kv([1, 2, 9]))
    assert cache.nbytes == held(3 + 2 + 1, 3, (1, 2, 3), (1, 2, 3, 4, 5), (1, 2, 9)) and len(cache) == 3
    for query in ([1, 2, 3, 4, 5, 6], [1, 2, 9, 9], [1, 2, 3]):
        hit = cache.lookup(query)
        assert hit is not None
        assert np.asarray(hit.layers[0][0]).reshape(-1)[: hit.length].tolist() == query[: hit.length]
    cache.discard([1, 2, 3])
    assert cache.nbytes == held(3 + 2 + 1, 3, (1, 2, 3, 4, 5), (1, 2, 9))  # its positions are still used
    cache.discard([1, 2, 3, 4, 5])
    cache.discard([1, 2, 9])
    assert cache.nbytes == 0


@settings(max_examples=60, deadline=None)
@given(stored=sequences, query=st.lists(st.integers(0, 5), min_size=0, max_size=9))
def test_an_exact_prompt_cache_reuses_only_whole_stored_sequences(stored, query) -> None:
    """With recurrent states (which cannot be cut) a hit is the longest stored sequence that is a whole prefix of
    the query (brute force), and gives back that sequence's own state and keys."""
    cache = PromptCache(max_bytes=1 << 30, exact=True)
    for sequence in stored:
        kv = mx.array(np.array(sequence, dtype=np.float32).reshape(1, 1, -1, 1))
        state = RecurrentState((mx.array([[float(sum(sequence))]]), None), len(sequence))
        cache.store(sequence, [state, (kv, kv)])
    whole = [s for s in stored if list(query[: len(s)]) == s]
    hit = cache.lookup(query)
    if not whole:
        assert hit is None
        return
    assert hit is not None and hit.length == max(len(s) for s in whole)
    state, (keys, _) = hit.layers
    assert isinstance(state, RecurrentState) and state.length == hit.length
    assert float(state.arrays[0].item()) == float(sum(query[: hit.length]))
    assert np.asarray(keys).reshape(-1)[: hit.length].tolist() == query[: hit.length]


def test_a_recurrent_state_of_another_length_is_not_stored() -> None:
    cache = PromptCache(max_bytes=1 << 20, exact=True)
    cache.store([1, 2, 3], [RecurrentState((mx.zeros((1, 2)),), 2)])
    assert len(cache) == 0 and cache.nbytes == 0
    cache.store([1, 2], [RecurrentState((mx.zeros((1, 2)),), 2)])
    assert len(cache) == 1 and cache.nbytes == 8 + entry_bytes((1, 2))
    cache.discard([1, 2])
    assert cache.nbytes == 0
