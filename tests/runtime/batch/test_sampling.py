"""Sampling under a mask: greedy is the masked argmax, seeded sampling is mlx_lm's rule, masks are obeyed.

Per-row samplers: a seed fixes the draws, a row draws the same alone or inside any batch, draws stay
inside the mask at every temperature, and the draws follow softmax(logits / T) restricted to the mask.
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_lm.sample_utils import make_sampler

from stdsl.errors import GenerationError, OptionError
from stdsl.kernels.token_mask import pack_words
from stdsl.runtime.batch.sampling import (
    RowSampler,
    check_bitmask,
    mask_logits,
    sample,
    sample_packed,
    sample_rows,
    unpack_bitmask,
)
from stdsl.runtime.options import GREEDY_BELOW, SamplingParams

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
def test_sampled_token_is_always_allowed(seed: int, allowed_ids: list[int], temperature: float, top_p: float,
                                         top_k: int) -> None:
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


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -1.0},
        {"temperature": float("nan")},
        {"temperature": float("inf")},
        {"top_p": 1.5},
        {"top_p": 0.0},
        {"top_k": -2},
        {"seed": "x"},
        {"seed": -1},
    ],
)
def test_bad_parameters_are_option_errors_naming_the_argument(kwargs: dict) -> None:
    with pytest.raises(OptionError) as caught:
        SamplingParams(**kwargs)
    assert caught.value.argument == next(iter(kwargs))


def test_tiny_temperatures_are_greedy() -> None:
    for temperature in (1e-45, 1e-30, 1e-8, GREEDY_BELOW / 2):
        assert SamplingParams(temperature).greedy
    assert not SamplingParams(GREEDY_BELOW).greedy


def mask_of(ids: list[int], vocab: int = VOCAB) -> np.ndarray:
    allowed = np.zeros(vocab, dtype=bool)
    allowed[ids] = True
    return allowed


def test_the_same_seed_gives_the_same_draws() -> None:
    params = SamplingParams(temperature=2.0, seed=1234)
    first, second, other = RowSampler(params), RowSampler(params), RowSampler(SamplingParams(2.0, seed=1235))
    allowed = np.ones(VOCAB, dtype=bool)
    draws = [[sampler.draw(random_logits(step), allowed) for step in range(20)] for sampler in (first, second, other)]
    assert draws[0] == draws[1]
    assert draws[0] != draws[2]


def test_without_a_seed_every_sampler_gets_its_own_key() -> None:
    keys = {tuple(np.asarray(RowSampler(SamplingParams(1.0)).key).tolist()) for _ in range(8)}
    assert len(keys) == 8


row_params = st.builds(
    SamplingParams,
    temperature=st.sampled_from([0.0, 1e-30, 0.5, 1.0, 3.0]),
    top_p=st.sampled_from([1.0, 0.9, 0.3]),
    top_k=st.sampled_from([0, 1, 5]),
    seed=st.integers(0, 2**64 - 1),
)


@settings(max_examples=30, deadline=None)
@given(params=st.lists(row_params, min_size=1, max_size=6), steps=st.integers(1, 4), data=st.data())
def test_a_row_draws_the_same_alone_or_in_any_batch(params: list[SamplingParams], steps: int,
                                                    data: st.DataObject) -> None:
    rows = len(params)
    logits = [mx.array(np.random.default_rng(step).normal(0.0, 2.0, (rows, VOCAB)).astype(np.float32))
              for step in range(steps)]
    masks = [
        np.stack([mask_of(data.draw(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=40, unique=True)))
                  for _ in range(rows)])
        for _ in range(steps)
    ]
    batch = [RowSampler(p) for p in params]
    together = [sample_rows(logits[step], masks[step], batch) for step in range(steps)]
    for row, p in enumerate(params):
        alone = RowSampler(p)
        assert [alone.draw(logits[step][row], masks[step][row]) for step in range(steps)] == [
            together[step][row] for step in range(steps)
        ]


EDGE_TEMPERATURES = [0.0, 1e-45, 1e-30, 1e-6, GREEDY_BELOW, 0.5, 1.0, 1e4, 1e30, 1e38, 3.4e38, 1e300, 1.7e308]


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    allowed_ids=st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6, unique=True),
    temperature=st.sampled_from(EDGE_TEMPERATURES),
    top_p=st.sampled_from([1.0, 0.999, 0.5, 1e-9, 5e-324]),
    top_k=st.sampled_from([0, 1, 2, VOCAB - 1, VOCAB, VOCAB + 7]),
    scale=st.sampled_from([1.0, 1e-30, 1e4]),
)
def test_draws_stay_inside_the_mask_at_every_edge(
    seed: int, allowed_ids: list[int], temperature: float, top_p: float, top_k: int, scale: float
) -> None:
    params = SamplingParams(temperature, top_p, top_k, seed)
    allowed = mask_of(allowed_ids)
    logits = random_logits(seed) * scale
    assert RowSampler(params).draw(logits, allowed) in allowed_ids
    mx.random.seed(seed)
    assert sample(logits, allowed, params) in allowed_ids


def test_tiny_temperatures_take_the_masked_argmax() -> None:
    logits = random_logits(5)
    allowed = mask_of([2, 30, 300, 301])
    best = max((2, 30, 300, 301), key=lambda i: float(logits[i].item()))
    for temperature in (1e-45, 1e-30, 1e-6):
        assert RowSampler(SamplingParams(temperature, seed=0)).draw(logits, allowed) == best
        assert sample(logits, allowed, SamplingParams(temperature)) == best


def test_a_huge_temperature_is_uniform_over_the_mask() -> None:
    logits = mx.array(np.array([10.0, 0.0, -10.0, 5.0, 0.0, 0.0], dtype=np.float32))
    allowed = np.array([True, True, True, False, False, False])
    sampler = RowSampler(SamplingParams(1e300, seed=3))
    counts = np.bincount([sampler.draw(logits, allowed) for _ in range(600)], minlength=6)
    assert counts[3:].sum() == 0 and counts[:3].min() > 150


def chi_square_p_value(statistic: float, degrees: int) -> float:
    """P(X >= statistic) for X ~ chi-square with an even number of degrees of freedom (closed form)."""
    assert degrees % 2 == 0
    half = statistic / 2.0
    return float(np.exp(-half) * sum(half**i / math.factorial(i) for i in range(degrees // 2)))


DRAWS = 3000


@pytest.mark.parametrize(
    "temperature,top_k,top_p",
    [(1.0, 0, 1.0), (0.6, 0, 1.0), (2.5, 0, 1.0), (1.0, 3, 1.0), (1.0, 0, 0.8)],
)
def test_draws_follow_the_masked_softmax(temperature: float, top_k: int, top_p: float) -> None:
    logits_np = np.array([0.3, 1.2, -0.4, 2.0, 0.0, 0.9, -1.5, 0.5], dtype=np.float32)
    allowed = np.array([True, True, True, False, True, True, False, True])
    probs = np.where(allowed, np.exp(logits_np.astype(np.float64) / temperature), 0.0)
    if top_k:
        probs[np.argsort(-probs)[top_k:]] = 0.0
    if top_p < 1.0:
        order = np.argsort(-probs)
        mass_before = np.cumsum(probs[order] / probs.sum()) - probs[order] / probs.sum()
        probs[order[mass_before >= top_p]] = 0.0
    probs /= probs.sum()
    sampler = RowSampler(SamplingParams(temperature, top_p, top_k, seed=42))
    logits = mx.array(logits_np)
    counts = np.bincount([sampler.draw(logits, allowed) for _ in range(DRAWS)], minlength=len(probs))
    assert counts[probs == 0].sum() == 0
    support = probs > 0
    expected = probs[support] * DRAWS
    statistic = float(((counts[support] - expected) ** 2 / expected).sum())
    degrees = int(support.sum()) - 1
    if degrees % 2:
        degrees += 1
    assert chi_square_p_value(statistic, degrees) > 1e-4, (counts, expected)


def test_the_batch_rows_samplers_and_masks_must_agree() -> None:
    with pytest.raises(GenerationError, match="samplers"):
        sample_rows(mx.zeros((2, VOCAB)), np.ones((2, VOCAB), dtype=bool), [RowSampler(SamplingParams())])


def test_a_row_with_an_empty_mask_is_an_error() -> None:
    allowed = np.ones((2, VOCAB), dtype=bool)
    allowed[1] = False
    samplers = [RowSampler(SamplingParams()), RowSampler(SamplingParams(1.0, seed=0))]
    with pytest.raises(GenerationError, match="no token is admissible"):
        sample_rows(mx.zeros((2, VOCAB)), allowed, samplers)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), size=st.integers(1, 200), width=st.integers(1, 256))
def test_a_packed_bitmask_unpacks_on_the_device_to_its_bools(data, size: int, width: int) -> None:
    allowed = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=size, max_size=size), min_size=1,
                                          max_size=4)), dtype=bool)
    words = np.stack([pack_words(row) for row in allowed])
    expected = np.zeros((len(allowed), width), dtype=bool)
    expected[:, : min(size, width)] = allowed[:, :width]
    assert np.array_equal(np.array(unpack_bitmask(mx.array(words), width)), expected)
    if allowed[:, width:].any():
        with pytest.raises(GenerationError, match="beyond the model's"):
            check_bitmask(words, width)
    elif not expected.any(axis=1).all():
        with pytest.raises(GenerationError, match="no token is admissible"):
            check_bitmask(words, width)
    else:
        check_bitmask(words, width)


def test_packed_draws_equal_dense_draws() -> None:
    logits = mx.stack([random_logits(seed) for seed in range(3)])
    allowed = np.zeros((3, VOCAB), dtype=bool)
    allowed[0, [3, 70, 400]] = allowed[1, 100:300] = allowed[2, -1] = True
    params = [SamplingParams(), SamplingParams(1.0, seed=4), SamplingParams(0.7, top_k=5, seed=9)]
    dense = sample_rows(logits, allowed, [RowSampler(p) for p in params])
    words = np.stack([pack_words(row) for row in allowed])
    assert sample_packed(logits, words, [RowSampler(p) for p in params]) == dense
    assert all(allowed[i, token] for i, token in enumerate(dense))
