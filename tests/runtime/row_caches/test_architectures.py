"""Every cache kind mlx-lm models keep, through the batch engine, on tiny random-weight instances of mlx-lm's own
architectures over the real SmolLM2 tokenizer (`architectures.py`).

Oracles: mlx-lm's own one-sequence caches (`make_prompt_cache`) for the logits of every ragged pass, with rows
joining and leaving; sequential greedy decoding on mlx-lm's caches for the engine's outputs (a difference must
start at a near-tie); one token per pass (`reference=True`) for forced spans fed in one pass; `jsonschema` for
constrained outputs; a cold prefill for a prompt-cache hit.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import make_prompt_cache

from stdsl.errors import UnsupportedModelError
from stdsl.runtime.batch.engine import Engine
from stdsl.runtime.batch.forward import forward_rows, make_row_caches
from stdsl.runtime.certified.prefix import CertifiedPrefix
from stdsl.runtime.decode import generate
from stdsl.runtime.model.loading import Model
from stdsl.runtime.row_caches.load_probe import cache_layout
from tests.runtime.engine_oracle import agrees
from tests.runtime.row_caches.architectures import ARCHITECTURES, CHUNKED, tiny_net

SERVED = sorted(set(ARCHITECTURES) - {"nemotron_h"})
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def models(smollm2_tokenizer) -> dict[str, Model]:
    return {name: Model(net=tiny_net(name, smollm2_tokenizer.vocab_size), tokenizer=smollm2_tokenizer,
                        name=f"tiny-{name}") for name in SERVED}


def _alone(net: Any, cache: list[Any], tokens: list[int]) -> np.ndarray:
    return np.asarray(net(mx.array([tokens]), cache=cache)[0, -1].astype(mx.float32))


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(np.abs(got - want).max() <= 1e-3 * (np.abs(want).max() + 1.0))


@pytest.mark.parametrize("name", SERVED)
def test_each_kind_is_served_and_ragged_rows_joining_and_leaving_equal_each_row_alone(models, name) -> None:
    _ragged_rows_equal_each_row_alone(models[name].net, name)


def _ragged_rows_equal_each_row_alone(net: Any, name: str) -> None:
    """Rows of different lengths, fed spans of different lengths (none, for a row that waits), joining from a
    prefill of their own and leaving mid-run: every pass's logits equal the row decoded alone by mlx-lm."""
    rng = np.random.default_rng(11)
    caches = make_row_caches(net, 0)
    alone: list[list[Any]] = []
    lengths: list[int] = []

    def join(length: int) -> None:
        tokens = rng.integers(10, 2000, length).tolist()
        solo = make_row_caches(net, 1)
        got = np.asarray(forward_rows(net, solo, [tokens])[0])
        caches.append_rows([solo.row(0)], [length])
        reference = make_prompt_cache(net)
        assert _close(got, _alone(net, reference, tokens))
        alone.append(reference)
        lengths.append(length)

    for length in (7, 2, 11):
        join(length)
    schedule = [[1, 3, 0], [0, 1, 6], [2, 2, 2], "drop 1", [5, 1], "join 9", [1, 0, 4], "drop 0", [3, 1], [1, 1]]
    for step in schedule:
        if step == "drop 1" or step == "drop 0":
            gone = int(str(step)[-1])
            keep = [i for i in range(len(alone)) if i != gone]
            caches.keep(keep)
            alone, lengths = [alone[i] for i in keep], [lengths[i] for i in keep]
            continue
        if step == "join 9":
            join(9)
            continue
        feeds = [rng.integers(10, 2000, n).tolist() for n in step]  # type: ignore[union-attr]
        got = np.asarray(forward_rows(net, caches, feeds))
        for row, feed in enumerate(feeds):
            lengths[row] += len(feed)
            if feed:
                assert _close(got[row], _alone(net, alone[row], feed)), (name, step, row)
    assert caches.row_lengths == lengths


@pytest.mark.parametrize("name", SERVED)
def test_greedy_outputs_of_a_batch_equal_sequential_decoding(models, name) -> None:
    """Free text and JSON under a schema, rows of different prompt lengths and budgets decoded together: each equals
    sequential greedy decoding on mlx-lm's own cache (or first differs at a near-tie); JSON outputs validate."""
    model = models[name]
    requests = [("Tell me about the sea.", None, 10), ("Hi", None, 6),
                ("Ann Lee is 34 years old. Extract the person.", PERSON, 40), ("Bo is 7.", PERSON, 40)]
    engine = Engine(model, max_rows=4)
    try:
        handles = [engine.submit(prompt, constraint, max_tokens=budget) for prompt, constraint, budget in requests]
        results = [h.result() for h in handles]
    finally:
        engine.close()
    for (prompt, constraint, budget), result in zip(requests, results):
        assert agrees(model, prompt, constraint, budget, result.tokens), (name, prompt)
        if constraint is not None and result.finish_reason == "stop":
            jsonschema.validate(json.loads(result.text), constraint)


@pytest.mark.parametrize("name", SERVED)
def test_forced_spans_in_one_pass_equal_one_token_per_pass(models, name) -> None:
    model = models[name]
    fast = generate(model, "Ann Lee is 34.", PERSON, max_tokens=40)
    slow = generate(model, "Ann Lee is 34.", PERSON, max_tokens=40, reference=True)
    assert fast.tokens == slow.tokens
    assert fast.stats.passes == fast.stats.sampled_tokens < slow.stats.passes


@pytest.mark.parametrize("name", SERVED)
def test_a_prompt_cache_hit_equals_a_cold_prefill(models, name) -> None:
    """The next turn of a conversation starts from the stored end of the last one (recurrent states: an exact
    whole-sequence match) and decodes what a cold prefill decodes."""
    model = models[name]
    first = model.tokenizer.encode("The weather today is")
    warm = Engine(model, max_rows=2)
    cold = Engine(model, max_rows=2, prompt_cache_bytes=0)
    try:
        turn = warm.submit(first, None, max_tokens=6).result()
        fed = first + turn.tokens[:-1]
        follow = fed + model.tokenizer.encode(" and tomorrow")
        hits = warm.prompt_cache.hit_tokens
        again = warm.submit(follow, None, max_tokens=8).result()
        assert warm.prompt_cache.hit_tokens - hits >= len(fed) - 1
        assert again.tokens == cold.submit(follow, None, max_tokens=8).result().tokens
    finally:
        warm.close()
        cold.close()


@pytest.mark.parametrize("name", SERVED)
def test_parallel_fields_equal_sequential_decoding(models, name) -> None:
    """Certified drafting on every cache kind (plain and sliding-window attention cut to a prefix, recurrent states
    forked before each certification pass and restored): the tokens of sequential greedy decoding."""
    model = models[name]
    schema = {**PERSON, "properties": {**PERSON["properties"], "city": {"type": "string", "maxLength": 10}},
              "required": ["name", "age", "city"]}
    drafted = generate(model, "Ann Lee is 34.", schema, max_tokens=60, parallel_fields=True)
    plain = generate(model, "Ann Lee is 34.", schema, max_tokens=60)
    assert drafted.tokens == plain.tokens or agrees(model, "Ann Lee is 34.", schema, 60, drafted.tokens)
    assert drafted.stats.rounds > 0


@pytest.mark.parametrize("name", SERVED)
def test_a_certified_prefix_cut_back_continues_as_the_kept_tokens_fed_alone(models, name) -> None:
    """A certification pass then a cut (recurrent states: back to the fork, the kept tokens fed again): the next
    feed's logits at every position equal mlx-lm's one-sequence cache fed the prompt, the kept tokens and the next."""
    model = models[name]
    prompt = model.tokenizer.encode("Ann Lee is 34 years old.")
    drafted, kept, after = [101, 202, 303, 404, 505, 606], 2, [707, 808, 909]
    engine = Engine(model, max_rows=2)
    try:
        def run() -> tuple[np.ndarray, int]:
            certified = CertifiedPrefix(engine, prompt)
            logits = certified.feed(drafted)
            passes = certified.trim(len(drafted) - kept, logits[kept - 1])
            return certified.feed(after), passes

        got, passes = engine.call(run)
    finally:
        engine.close()
    assert passes == (0 if cache_layout(model.net).trimmable else 1)
    reference = make_prompt_cache(model.net)
    model.net(mx.array([prompt + drafted[:kept]]), cache=reference)
    want = np.asarray(model.net(mx.array([after]), cache=reference)[0].astype(mx.float32))
    assert all(_close(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize(("config", "reason"), [
    ("nemotron_h", "take in the padding"),
    ("llama4", "ChunkedKVCache"),
])
def test_a_model_that_cannot_be_batched_exactly_is_refused_with_the_reason(smollm2_tokenizer, config, reason) -> None:
    net = tiny_net(config, smollm2_tokenizer.vocab_size, CHUNKED if config == "llama4" else None)
    with pytest.raises(UnsupportedModelError, match=reason):
        cache_layout(net, config)


def _every_configuration() -> list[dict[str, Any]]:
    from tests.runtime.row_caches.mlx_lm_test_configs import MLX_LM_SINGLE_TESTS, MLX_LM_TEST_CONFIGS

    return MLX_LM_TEST_CONFIGS + MLX_LM_SINGLE_TESTS


@pytest.mark.slow
@pytest.mark.parametrize("config", _every_configuration(), ids=lambda c: c["model_type"])
def test_every_mlx_lm_architecture_is_refused_or_batched_exactly(smollm2_tokenizer, config) -> None:
    """Each architecture mlx-lm's own tests build: refused with UnsupportedModelError, or its ragged passes with
    rows joining and leaving equal each row decoded alone by mlx-lm."""
    net = tiny_net(config["model_type"], smollm2_tokenizer.vocab_size, config)
    try:
        cache_layout(net, config["model_type"])
    except UnsupportedModelError as error:
        assert config["model_type"] in str(error)
        return
    _ragged_rows_equal_each_row_alone(net, config["model_type"])
