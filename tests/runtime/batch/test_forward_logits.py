"""The batch forward gives the model's own logits: `net(...)` at each row's last fed position.

Every allow-listed architecture's head-only shortcut equals `net(...)` (tied and untied heads, ragged feeds
over a cache that already holds rows), and a model with a logit transform (granite's `logits_scaling`) goes
through `net(...)`: its logits through the forward equal `net(...)`, and seeded sampling through the engine
draws exactly what a one-sequence sampler on `net(...)` logits draws.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models import granite, llama, qwen2, qwen3
from mlx_lm.models.cache import make_prompt_cache
from row_driver import RowDriver

from stdsl.runtime.batch.forward import (
    HEAD_ONLY_ARCHITECTURES,
    HEAD_ONLY_BY_NAME,
    forward_rows,
    head_only,
    make_row_caches,
)
from stdsl.runtime.batch.requests import compiled_constraint, prompt_tokens
from stdsl.runtime.batch.sampling import RowSampler
from stdsl.runtime.engine import Engine
from stdsl.runtime.model.loading import Model
from stdsl.runtime.options import DecodeOptions, SamplingParams
from tests.runtime.row_caches.architectures import ARCHITECTURES, tiny_net
from tests.runtime.row_caches.mlx_lm_test_configs import MLX_LM_TEST_CONFIGS

VOCAB = 512
COMMON = {"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128, "num_attention_heads": 4,
          "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "vocab_size": VOCAB}


def _seeded(make: Any, args: Any) -> Any:
    """`make(args)` with weights drawn from a fixed seed, evaluated."""
    mx.random.seed(7)
    net = make(args)
    net.eval()
    mx.eval(net.parameters())
    return net


def _llama(tied: bool) -> Any:
    return _seeded(llama.Model, llama.ModelArgs(model_type="llama", tie_word_embeddings=tied, **COMMON))


def _qwen2(tied: bool) -> Any:
    return _seeded(qwen2.Model, qwen2.ModelArgs(model_type="qwen2", tie_word_embeddings=tied, **COMMON))


def _qwen3(tied: bool) -> Any:
    return _seeded(qwen3.Model, qwen3.ModelArgs(model_type="qwen3", tie_word_embeddings=tied, head_dim=16,
                                                max_position_embeddings=4096, rope_theta=10000.0, **COMMON))


def _granite(vocab_size: int = VOCAB, scaling: float = 8.0) -> Any:
    args = granite.ModelArgs(model_type="granite", **{**COMMON, "vocab_size": vocab_size}, logits_scaling=scaling,
                             attention_multiplier=0.25, embedding_multiplier=4.0, residual_multiplier=0.5,
                             max_position_embeddings=4096, attention_bias=False, mlp_bias=False, rope_theta=10000.0)
    return _seeded(granite.Model, args)


def _alone(net: Any, tokens: list[int]) -> np.ndarray:
    """`net(...)`'s float32 logits after `tokens`, decoded alone with mlx-lm's own cache."""
    return np.asarray(net(mx.array([tokens]), cache=make_prompt_cache(net))[0, -1].astype(mx.float32))


def _batched(net: Any, prefixes: list[list[int]], tails: list[list[int]]) -> np.ndarray:
    """Logits of a ragged pass over `tails` after the rows' `prefixes` were fed in a first ragged pass."""
    caches = make_row_caches(net, len(prefixes))
    forward_rows(net, caches, prefixes)
    return np.asarray(forward_rows(net, caches, tails))


@pytest.mark.parametrize("build", [_llama, _qwen2, _qwen3])
@pytest.mark.parametrize("tied", [True, False])
def test_the_head_only_shortcut_equals_the_models_own_call(build, tied: bool) -> None:
    net = build(tied)
    assert head_only(net) and type(net) in HEAD_ONLY_ARCHITECTURES
    rng = np.random.default_rng(3)
    prefixes = [rng.integers(0, VOCAB, n).tolist() for n in (5, 1, 9)]
    tails = [rng.integers(0, VOCAB, n).tolist() for n in (3, 1, 6)]
    got = _batched(net, prefixes, tails)
    for row, (prefix, tail) in enumerate(zip(prefixes, tails)):
        np.testing.assert_allclose(got[row], _alone(net, prefix + tail), rtol=1e-4, atol=1e-4)


def _gemma3_text(tied: bool) -> Any:
    net = tiny_net("gemma3_text", VOCAB)
    net.tie_word_embeddings = tied  # what its sanitize sets for a checkpoint without lm_head
    return net


def _qwen3_5(tied: bool) -> Any:
    return tiny_net("qwen3_5", VOCAB, {**ARCHITECTURES["qwen3_5"], "tie_word_embeddings": tied})


def _nemotron_h(tied: bool) -> Any:
    return tiny_net("nemotron_h", VOCAB)  # its lm_head is never tied


@pytest.mark.parametrize("build", [_gemma3_text, _qwen3_5, _nemotron_h])
@pytest.mark.parametrize("tied", [True, False])
def test_the_head_only_shortcut_of_sliding_and_hybrid_models_equals_their_own_call(build, tied: bool) -> None:
    """Gemma 3 (sliding windows), Qwen3.5 (Gated DeltaNet, a wrapper around its text model), tied and untied, and
    Nemotron-H (Mamba 2 layers fed uniform passes, a `backbone`)."""
    _assert_head_only_rows_equal_alone(build(tied), 5, (6, 1, 9), (3, 1, 7))


def _assert_head_only_rows_equal_alone(net: Any, seed: int, prefix_lengths: tuple[int, ...],
                                       tail_lengths: tuple[int, ...]) -> None:
    """`net` splits its head, and each row of a ragged batch (random prefixes, then tails) equals the row alone."""
    assert head_only(net)
    rng = np.random.default_rng(seed)
    prefixes = [rng.integers(0, VOCAB, n).tolist() for n in prefix_lengths]
    tails = [rng.integers(0, VOCAB, n).tolist() for n in tail_lengths]
    got = _batched(net, prefixes, tails)
    for row, (prefix, tail) in enumerate(zip(prefixes, tails)):
        np.testing.assert_allclose(got[row], _alone(net, prefix + tail), rtol=1e-4, atol=1e-4)


MORE_HEADS = ["olmo3", "qwen3_next", "gpt_oss", "glm4", "lfm2", "mamba2"]
"""The allow-listed architectures beyond those above, built as the engine's architecture tests build them (else from
mlx-lm's own test configurations)."""


def _from_mlx_lm_tests(model_type: str, tied: bool) -> Any:
    config = ARCHITECTURES.get(model_type) or next(c for c in MLX_LM_TEST_CONFIGS if c["model_type"] == model_type)
    return tiny_net(model_type, VOCAB, {**config, "tie_word_embeddings": tied})


def test_every_allow_listed_architecture_is_tested() -> None:
    tested = {"gemma3_text", "qwen3_5", "nemotron_h", *MORE_HEADS}
    assert {module.rsplit(".", 1)[1] for module, _ in HEAD_ONLY_BY_NAME} == tested


@pytest.mark.parametrize("model_type", MORE_HEADS)
@pytest.mark.parametrize("tied", [True, False])
def test_the_head_only_shortcut_of_more_architectures_equals_their_own_call(model_type: str, tied: bool) -> None:
    """OLMo 3, Qwen3-Next, gpt-oss, GLM-4 (always `lm_head`), LFM2 (always tied) and Mamba 2 (a `backbone`), tied and
    untied where their configuration says."""
    _assert_head_only_rows_equal_alone(_from_mlx_lm_tests(model_type, tied), 6, (5, 1, 8), (2, 1, 6))


def test_a_logit_transform_applies_through_the_forward() -> None:
    net = _granite()
    assert not head_only(net)
    rng = np.random.default_rng(4)
    prefixes = [rng.integers(0, VOCAB, n).tolist() for n in (4, 7)]
    tails = [rng.integers(0, VOCAB, n).tolist() for n in (2, 5)]
    got = _batched(net, prefixes, tails)
    for row, (prefix, tail) in enumerate(zip(prefixes, tails)):
        expected = _alone(net, prefix + tail)
        np.testing.assert_allclose(got[row], expected, rtol=1e-4, atol=1e-4)
        cache = make_prompt_cache(net)
        untransformed = np.asarray(net.model.embed_tokens.as_linear(net.model(mx.array([prefix + tail]), cache))[0, -1])
        assert not np.allclose(untransformed, expected, rtol=1e-2), "the transform must change the logits"


def _sampled_alone(model: Model, prompt: str, seed: int, max_tokens: int) -> list[int]:
    """Seeded free-text tokens of one sequence sampled on `net(...)` logits by the engine's own row sampler."""
    options = DecodeOptions.of(max_tokens=max_tokens, temperature=1.0, seed=seed)
    control = RowDriver.request(model, compiled_constraint(None), options)
    feed = prompt_tokens(model, prompt) + control.start()
    cache = make_prompt_cache(model.net)
    sampler = RowSampler(SamplingParams(temperature=1.0, seed=seed))
    while not control.finished:
        logits = model.net(mx.array([feed]), cache=cache)[0, -1].astype(mx.float32)
        feed = control.advance(sampler.draw(logits, control.mask()))
        if not feed:
            break
    return list(control.tokens)


def test_seeded_sampling_through_the_engine_sees_the_transformed_logits(smollm2_tokenizer) -> None:
    model = Model(net=_granite(smollm2_tokenizer.vocab_size), tokenizer=smollm2_tokenizer, name="tiny-granite")
    engine = Engine(model, max_rows=2)
    prompts = ["Say something.", "Something else."]
    handles = [engine.submit(p, None, max_tokens=12, temperature=1.0, seed=11 + k) for k, p in enumerate(prompts)]
    for k, (prompt, handle) in enumerate(zip(prompts, handles)):
        assert handle.result(timeout=120).tokens == _sampled_alone(model, prompt, 11 + k, 12)
    engine.close()


@pytest.mark.parametrize("build", [_llama, _gemma3_text, _qwen3_5, _nemotron_h])
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("read", [(True, False, True, False), (False, False, False, True), (True, True, True, True)])
@pytest.mark.parametrize("kept", [None, [3, 0, 1, 2], [0, 1, 2, 3]])
def test_the_head_on_read_rows_alone_gives_the_full_heads_logits_and_tokens(build, tied: bool, read, kept) -> None:
    """Plain, sliding-window, hybrid (Gated DeltaNet) and uniform-fed (Mamba 2) families: a ragged pass that runs the
    head only on the rows read gives those rows the logits and greedy tokens of the pass that runs it on every row,
    the others zeros, also once a row has left (its slot free, the others moved or not); the caches move alike (the
    next pass, reading every row, agrees too)."""
    net = build(tied)
    rng = np.random.default_rng(8)
    prefixes = [rng.integers(0, VOCAB, n).tolist() for n in (4, 1, 7, 2, 3)]
    tails = [rng.integers(0, VOCAB, n).tolist() for n in (3, 1, 5, 2)]
    nexts = [[int(t)] for t in rng.integers(0, VOCAB, 4)]
    full, some = make_row_caches(net, 5), make_row_caches(net, 5)
    for caches in (full, some):
        forward_rows(net, caches, prefixes, [False] * 5)
        caches.keep(kept or [0, 1, 2, 3])
        if kept is None:
            caches.compact()
    expected = np.asarray(forward_rows(net, full, tails))
    got = np.asarray(forward_rows(net, some, tails, read))
    assert got.shape == expected.shape == (4, VOCAB)
    for row, wanted in enumerate(read):
        if wanted:
            np.testing.assert_allclose(got[row], expected[row], rtol=1e-4, atol=1e-4)
            assert got[row].argmax() == expected[row].argmax()
        else:
            assert not got[row].any()
    np.testing.assert_allclose(np.asarray(forward_rows(net, some, nexts)), np.asarray(forward_rows(net, full, nexts)),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("build", [_llama, _gemma3_text])
@pytest.mark.parametrize("tied", [True, False])
def test_a_head_split_over_two_streams_gives_the_whole_heads_logits_bit_for_bit(build, tied: bool,
                                                                                monkeypatch) -> None:
    """A head matrix of `SPLIT_HEAD_BYTES` or more projects its two halves of the vocabulary on two streams; the
    logits equal the one-stream projection's exactly (each is the same dot product), over ragged feeds."""
    import stdsl.runtime.batch.forward as forward_module

    net = build(tied)
    rng = np.random.default_rng(5)
    prefixes = [rng.integers(0, VOCAB, n).tolist() for n in (4, 1, 7)]
    tails = [rng.integers(0, VOCAB, n).tolist() for n in (3, 1, 5)]

    def logits() -> np.ndarray:
        caches = make_row_caches(net, 3)
        forward_rows(net, caches, prefixes, [False] * 3)
        return np.asarray(forward_rows(net, caches, tails))

    whole = logits()
    used: list[object] = []
    side_stream = forward_module.side_stream
    monkeypatch.setattr(forward_module, "SPLIT_HEAD_BYTES", 0)
    monkeypatch.setattr(forward_module, "side_stream", lambda: used.append(1) or side_stream())
    split = logits()
    assert used, "the head should have been split"
    assert np.array_equal(split, whole)
