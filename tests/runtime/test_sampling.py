"""Sampling under a mask: greedy is the masked argmax, seeded sampling is mlx_lm's rule, masks are obeyed."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_lm.sample_utils import make_sampler

from stdsl.errors import GenerationError
from stdsl.runtime.sampling import SamplingParams, mask_logits, sample

VOCAB = 512


def random_logits(seed: int) -> mx.array:
    rng = np.random.default_rng(seed)
    return mx.array(rng.normal(0.0, 3.0, VOCAB).astype(np.float32))


@pytest.mark.parametrize(
    "temperature,top_p,top_k",
    [(1.0, 1.0, 0), (0.7, 1.0, 0), (1.0, 0.9, 0), (0.8, 1.0, 20), (1.3, 0.8, 50), (0.5, 0.95, 5)],
)
def test_seeded_sampling_matches_mlx_lm(temperature: float, top_p: float, top_k: int) -> None:
    reference = make_sampler(temp=temperature, top_p=top_p if top_p < 1.0 else 0.0, top_k=top_k)
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k)
    allowed = np.ones(VOCAB, dtype=bool)
    for seed in range(8):
        logits = random_logits(seed)
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        mx.random.seed(seed)
        theirs = int(reference(logprobs[None])[0].item())
        mx.random.seed(seed)
        ours = sample(logits, allowed, params)
        assert ours == theirs


def test_greedy_is_masked_argmax() -> None:
    logits = random_logits(1)
    allowed = np.zeros(VOCAB, dtype=bool)
    allowed[[3, 77, 400]] = True
    expected = max((3, 77, 400), key=lambda i: float(logits[i].item()))
    assert sample(logits, allowed, SamplingParams()) == expected


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    allowed_ids=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6, unique=True),
    temperature=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    top_p=st.sampled_from([1.0, 0.9, 0.5]),
    top_k=st.sampled_from([0, 1, 3, 600]),
)
def test_sampled_token_is_always_allowed(seed: int, allowed_ids: list[int], temperature: float, top_p: float, top_k: int) -> None:
    allowed = np.zeros(VOCAB, dtype=bool)
    allowed[allowed_ids] = True
    mx.random.seed(seed)
    token = sample(random_logits(seed), allowed, SamplingParams(temperature, top_p, top_k))
    assert token in allowed_ids


def test_padding_logits_are_never_allowed() -> None:
    logits = mx.zeros((VOCAB + 64,))
    masked = mask_logits(logits, np.ones(VOCAB, dtype=bool))
    assert bool(mx.all(mx.isinf(masked[VOCAB:])).item())


def test_empty_mask_is_an_error() -> None:
    with pytest.raises(GenerationError, match="no token is admissible"):
        sample(random_logits(0), np.zeros(VOCAB, dtype=bool), SamplingParams())


@pytest.mark.parametrize("kwargs", [{"temperature": -1.0}, {"top_p": 1.5}, {"top_k": -2}])
def test_bad_parameters_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)
