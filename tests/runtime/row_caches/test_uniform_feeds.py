"""Uniform feeds for models whose recurrent layers scan padding into their states: a ragged pass split into passes of
one width (each row's feed intact, no padding after a real token), idle slots given their states back, and the load
probe choosing them only for models that need them."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mlx_lm.models.cache import ArraysCache

from stdsl.errors import UnsupportedModelError
from stdsl.runtime.batch.forward import forward_rows
from stdsl.runtime.platform.mlx_lm_models import make_prompt_cache
from stdsl.runtime.row_caches.load_probe import cache_layout
from stdsl.runtime.row_caches.recurrent import RowStatesCache
from stdsl.runtime.row_caches.uniform_feeds import uniform_parts
from tests.runtime.row_caches.architectures import tiny_net

feeds_strategy = st.lists(st.lists(st.integers(0, 99), max_size=6), min_size=1, max_size=6)


@given(feeds_strategy)
def test_uniform_parts_feed_each_row_its_whole_feed_one_width_a_pass(feeds: list[list[int]]) -> None:
    parts = uniform_parts(feeds)
    assert len(parts) == len({len(f) for f in feeds if f})
    for row, feed in enumerate(feeds):
        pieces = [list(part[row]) for part in parts]
        assert [t for piece in pieces for t in piece] == feed
        spent = [not piece for piece in pieces]
        assert spent == sorted(spent)  # a row feeds from the first part until its feed is spent, then never again
    for part in parts:
        assert len({len(f) for f in part if f}) == 1


def test_an_idle_slot_gets_its_state_back_after_a_pass_that_scanned_padding_into_it() -> None:
    cache = RowStatesCache(1)
    cache.keep_idle = True
    cache.append_rows([None, None], [0, 0])
    cache.prepare([1, 1], 1)
    cache[0] = mx.array([[1.0, 2.0], [3.0, 4.0]])
    cache.commit()
    cache.prepare([2, 0], 2)
    cache[0] = mx.array([[5.0, 6.0], [7.0, 8.0]])  # a model that scanned slot 1's padding into its state
    cache.commit()
    assert np.asarray(cache[0]).tolist() == [[5.0, 6.0], [3.0, 4.0]]
    assert cache.row_lengths == [3, 1]


def test_an_idle_slots_state_that_changed_shape_in_a_pass_is_an_error_not_a_broadcast() -> None:
    cache = RowStatesCache(1)
    cache.keep_idle = True
    cache.append_rows([None, None], [0, 0])
    cache.prepare([1, 1], 1)
    cache[0] = mx.zeros((2, 1))
    cache.commit()
    cache.prepare([2, 0], 2)
    cache[0] = mx.zeros((2, 3))
    with pytest.raises(ValueError, match="changed shape"):
        cache.commit()


def test_the_probe_feeds_uniform_passes_only_to_models_that_scan_padding(smollm2_tokenizer) -> None:
    scans = tiny_net("nemotron_h", smollm2_tokenizer.vocab_size)
    masks = tiny_net("mamba2", smollm2_tokenizer.vocab_size)
    assert cache_layout(scans, "nemotron_h").uniform_feeds
    assert not cache_layout(masks, "mamba2").uniform_feeds


def test_a_ragged_pass_of_uniform_feeds_equals_each_row_fed_alone(smollm2_tokenizer) -> None:
    """Rows feeding 5, 0, 2 and 5 tokens in one pass (two model passes): each fed row's logits and the waiting row's
    next ones equal mlx-lm's one-sequence cache."""
    net = tiny_net("nemotron_h", smollm2_tokenizer.vocab_size)
    caches = cache_layout(net).new()
    caches.append_rows([None] * 4, [0] * 4)
    rng = np.random.default_rng(3)
    alone = [make_prompt_cache(net) for _ in range(4)]
    for step in ([3, 1, 4, 2], [5, 0, 2, 5], [1, 3, 1, 1]):
        feeds = [rng.integers(10, 2000, n).tolist() for n in step]
        got = np.asarray(forward_rows(net, caches, feeds))
        for row, feed in enumerate(feeds):
            if feed:
                want = np.asarray(net(mx.array([feed]), cache=alone[row])[0, -1].astype(mx.float32))
                assert np.abs(got[row] - want).max() <= 1e-3 * (np.abs(want).max() + 1.0), (step, row)


class _TokenHistory(nn.Module):
    """A model whose recurrent state is its last two tokens (as LongCat's n-gram embedding keeps them): a row that has
    fed one token holds a shorter state than one that has fed three."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)

    def make_cache(self) -> list[ArraysCache]:
        return [ArraysCache(size=1)]

    def __call__(self, inputs: mx.array, cache: list[ArraysCache]) -> mx.array:
        history = inputs if cache[0][0] is None else mx.concatenate([cache[0][0], inputs], axis=1)
        cache[0][0] = history[:, -2:]
        return self.embed(history).sum(axis=1, keepdims=True) + self.embed(inputs)


def test_a_state_whose_shape_follows_the_rows_length_is_refused_not_fed_uniformly() -> None:
    with pytest.raises(UnsupportedModelError, match="shape follows the row's length"):
        cache_layout(_TokenHistory(), "token history")
