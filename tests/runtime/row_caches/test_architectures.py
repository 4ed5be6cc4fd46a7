"""Every cache kind mlx-lm models keep, through the batch engine, on tiny random-weight instances of mlx-lm's own
architectures over the real SmolLM2 tokenizer (`architectures.py`).

Oracles: mlx-lm's own one-sequence caches (`make_prompt_cache`) for the logits of every ragged pass, with rows
joining and leaving; sequential greedy decoding on mlx-lm's caches for the engine's outputs (a difference must
start at a near-tie); one token per pass (`reference=True`) for forced spans fed in one pass; `jsonschema` for
constrained outputs, Python's `re` for regex outputs and Lark's own parser for grammar outputs; a cold prefill for a
prompt-cache hit; mlx-lm's own `generate_step` for greedy free text from token ids.

The default run checks one architecture per cache kind (`REPRESENTATIVE`); `-m slow` runs every check on every other
architecture here and on every architecture mlx-lm's own model tests build that the engine serves.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import lark
import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache
from row_driver import RowDriver

import stdsl
from stdsl.errors import UnsupportedModelError
from stdsl.runtime.batch.forward import forward_rows, make_row_caches
from stdsl.runtime.batch.requests import compiled_constraint
from stdsl.runtime.certified.prefix import CertifiedPrefix
from stdsl.runtime.decode import generate
from stdsl.runtime.engine import Engine
from stdsl.runtime.model.loading import Model
from stdsl.runtime.options import DecodeOptions
from stdsl.runtime.row_caches.attention import GROWTH, RowSlotsCache, _capacity
from stdsl.runtime.row_caches.layers import BatchCaches
from stdsl.runtime.row_caches.load_probe import cache_layout
from tests.runtime.engine_oracle import NEAR_TIE, agrees
from tests.runtime.row_caches.architectures import ARCHITECTURES, tiny_net

SERVED = sorted(ARCHITECTURES)
REPRESENTATIVE = ["llama", "gemma3_text", "qwen3_5", "falcon_h1", "nemotron_h", "llama4"]
"""One per cache kind: plain KV, sliding windows beside full attention, recurrent states beside attention, a layer
keeping both (CacheList), recurrent layers that scan padding (fed uniform passes) and chunked attention."""
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


PREFILL_PIECE = 16
"""Tokens per prefill pass of a joining row: mlx-lm's Jamba (expanded 128 times in mlx-lm's test configuration)
scans a pass into a state per position, 8 MB each: a 552-token row fed at once took 14 GB, in pieces of 64 3 GB."""
REFUSED = {"afm7", "longcat_flash_ngram", "phi3small", "gpt_bigcode", *([] if mx.metal.is_available() else ["bitnet"])}
"""The architectures mlx-lm's tests build that the engine refuses (BitNet's kernel runs on Metal only)."""

CODE = r"[A-Z]{2}-[0-9]{3}"
LIST_LARK = r"""
start: "Colors: " COLOR ("," COLOR)~0..2 "."
COLOR: "red" | "green" | "blue" | WORD
%import common.WORD
%ignore " "
"""
CHECKS: list[Any] = []
"""Every check of one served model, in the order the slow sweep runs them."""


def check(function: Any) -> Any:
    CHECKS.append(function)
    return function


@pytest.fixture(scope="module")
def models(smollm2_tokenizer) -> dict[str, Model]:
    return {name: Model(net=tiny_net(name, smollm2_tokenizer.vocab_size), tokenizer=smollm2_tokenizer,
                        name=f"tiny-{name}") for name in REPRESENTATIVE}


def _alone(net: Any, cache: list[Any], tokens: list[int]) -> np.ndarray:
    return np.asarray(net(mx.array([tokens]), cache=cache)[0, -1].astype(mx.float32))


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    """Within 1e-3 of the largest finite logit; equal infinities agree (Phi-3-small's head sets ids to -inf)."""
    with np.errstate(invalid="ignore"):
        difference = np.abs(np.where(got == want, 0.0, got - want))
    return bool(difference.max() <= 1e-3 * (np.abs(want[np.isfinite(want)]).max(initial=0.0) + 1.0))


@check
def _ragged_rows(model: Model) -> None:
    _ragged_rows_equal_each_row_alone(model.net, model.name)


@check
def _long_rows_of_a_running_batch_keep_their_windows_and_equal_each_row_alone(model: Model) -> None:
    """The running batch's sliding-window layers forget positions older than the window once a row holds a window
    and GROWTH of them: the logits stay mlx-lm's, and a windowed layer holds a window's positions per row, not the
    history's."""
    windows = [leaf.window for leaf in cache_layout(model.net).new().leaves
               if isinstance(leaf, RowSlotsCache) and leaf.window]
    long = max(windows, default=0) + 2 * GROWTH + 40  # past every window and its GROWTH, held whole it needs more
    caches = _ragged_rows_equal_each_row_alone(model.net, model.name, bounded=True, first=(long, 2, long - 20))
    windowed = [leaf for leaf in caches.leaves if isinstance(leaf, RowSlotsCache) and leaf.window]
    for leaf in windowed:
        assert leaf.keys is not None and leaf.window is not None
        assert leaf.keys.shape[2] <= _capacity(leaf.window + GROWTH + 8) < _capacity(long)
    assert not windowed or not all(caches.whole(i) for i in range(len(caches.row_lengths)))


def _ragged_rows_equal_each_row_alone(net: Any, name: str, bounded: bool = False,
                                      first: tuple[int, ...] = (7, 2, 11)) -> BatchCaches:
    """Rows of different lengths, fed spans of different lengths (none, for a row that waits), joining from a
    prefill of their own and leaving mid-run: every pass's logits equal the row decoded alone by mlx-lm."""
    rng = np.random.default_rng(11)
    caches = cache_layout(net).new(bounded=bounded)
    alone: list[list[Any]] = []
    lengths: list[int] = []

    def join(length: int) -> None:
        tokens = rng.integers(10, 2000, length).tolist()
        solo = make_row_caches(net, 1)
        reference = make_prompt_cache(net)
        for start in range(0, length, PREFILL_PIECE):  # prefilled in pieces, as the engine prefills
            piece = tokens[start:start + PREFILL_PIECE]
            assert _close(np.asarray(forward_rows(net, solo, [piece])[0]), _alone(net, reference, piece))
        caches.append_rows([solo.row(0)], [length])
        alone.append(reference)
        lengths.append(length)

    for length in first:
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
    return caches


@check
def _free_text_equals_mlx_lm_generate_step(model: Model) -> None:
    """Greedy free text from token ids, two rows in one batch: each is mlx-lm's `generate_step` output, or first
    differs from it where its top two log-probabilities are a near-tie or where mlx-lm's token is one free text
    refuses within the budget (random weights pick byte pieces that leave the text invalid UTF-8, which the last
    token cannot do)."""
    prompts = [model.tokenizer.encode("Once upon a time"), model.tokenizer.encode("The capital of France is")]
    engine = Engine(model, max_rows=2)
    try:
        results = [h.result() for h in [engine.submit(ids, None, max_tokens=12) for ids in prompts]]
    finally:
        engine.close()
    for ids, result in zip(prompts, results):
        steps = list(generate_step(mx.array(ids), model.net, max_tokens=len(result.tokens)))
        want = [int(token) for token, _ in steps]
        first = next((i for i, (a, b) in enumerate(zip(result.tokens, want)) if a != b), None)
        if first is None:
            assert result.tokens == want[: len(result.tokens)], (model.name, result.tokens, want)
            continue
        top = np.sort(np.asarray(steps[first][1].astype(mx.float32)))[-2:]
        assert top[1] - top[0] <= NEAR_TIE or not _admitted(model, result.tokens[:first], want[first], 12), (
            model.name, first, result.tokens, want)


def _admitted(model: Model, before: list[int], token: int, budget: int) -> bool:
    """Whether free text of at most `budget` tokens admits `token` after the output tokens `before`."""
    control = RowDriver.request(model, compiled_constraint(None), DecodeOptions.of(max_tokens=budget))
    control.start()
    for sampled in before:
        control.advance(sampled)
    return bool(control.mask()[token])


@check
def _batch_rows_joining_and_leaving_equal_sequential_decoding(model: Model) -> None:
    """Free text, JSON under a schema, a regex and a Lark grammar, rows of different prompt lengths and budgets with
    more requests than rows (later ones join as earlier ones leave): each equals sequential greedy decoding on
    mlx-lm's own cache (or first differs at a near-tie), and every constrained output is valid by its own oracle,
    however it ended (eos, the constraint's end, or the budget closing it)."""
    grammar = stdsl.Grammar(LIST_LARK)
    requests: list[tuple[str, Any, int]] = [
        ("Tell me about the sea.", None, 10), ("Hi", None, 6),
        ("Ann Lee is 34 years old. Extract the person.", PERSON, 40), ("Bo is 7.", PERSON, 40),
        ("Give a product code.", stdsl.Regex(CODE), 12), ("Name two colors.", grammar, 24)]
    engine = Engine(model, max_rows=3)
    try:
        handles = [engine.submit(prompt, constraint, max_tokens=budget) for prompt, constraint, budget in requests]
        results = [h.result() for h in handles]
    finally:
        engine.close()
    for (prompt, constraint, budget), result in zip(requests, results):
        assert agrees(model, prompt, constraint, budget, result.tokens), (model.name, prompt)
        if constraint is None:
            continue
        assert result.accepted, (model.name, prompt, result.finish_reason)
        if constraint is PERSON:
            jsonschema.validate(json.loads(result.text), PERSON)
        elif constraint is grammar:
            lark.Lark(LIST_LARK, parser="earley", lexer="dynamic").parse(result.text)
        else:
            assert re.fullmatch(CODE, result.text), result.text


@check
def _forced_spans_in_one_pass_equal_one_token_per_pass(model: Model) -> None:
    fast = generate(model, "Ann Lee is 34.", PERSON, max_tokens=40)
    slow = generate(model, "Ann Lee is 34.", PERSON, max_tokens=40, reference=True)
    assert fast.tokens == slow.tokens
    assert fast.stats.passes == fast.stats.sampled_tokens < slow.stats.passes


@check
def _a_prompt_cache_hit_equals_a_cold_prefill(model: Model) -> None:
    """The next turn of a conversation starts from the stored end of the last one (recurrent states: an exact
    whole-sequence match) and decodes what a cold prefill decodes."""
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


@check
def _parallel_fields_equal_sequential_decoding(model: Model) -> None:
    """Certified drafting on every cache kind (plain and sliding-window attention cut to a prefix, recurrent states
    forked before each certification pass and restored): the tokens of sequential greedy decoding."""
    schema = {**PERSON, "properties": {**PERSON["properties"], "city": {"type": "string", "maxLength": 10}},
              "required": ["name", "age", "city"]}
    drafted = generate(model, "Ann Lee is 34.", schema, max_tokens=60, parallel_fields=True)
    plain = generate(model, "Ann Lee is 34.", schema, max_tokens=60)
    assert drafted.tokens == plain.tokens or agrees(model, "Ann Lee is 34.", schema, 60, drafted.tokens)
    assert drafted.stats.rounds > 0


@check
def _a_certified_prefix_cut_back_continues_as_the_kept_tokens_fed_alone(model: Model) -> None:
    """A certification pass then a cut (recurrent states: back to the fork, the kept tokens fed again): the next
    feed's logits at every position equal mlx-lm's one-sequence cache fed the prompt, the kept tokens and the next."""
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


@pytest.mark.parametrize("check_model", CHECKS, ids=lambda c: c.__name__.strip("_"))
@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_each_cache_kind_passes_every_check(models, name, check_model) -> None:
    """One architecture per cache kind through every check above."""
    check_model(models[name])


def test_a_model_that_cannot_be_batched_exactly_is_refused_with_the_reason(smollm2_tokenizer) -> None:
    """AFM-7's key-reuse layers rotate queries to the position `S - L` read off the batch's key array (the longest
    row's), so a shorter row's logits differ; uniform passes cannot help (rows still differ in length)."""
    from tests.runtime.row_caches.mlx_lm_test_configs import MLX_LM_TEST_CONFIGS

    config = next(c for c in MLX_LM_TEST_CONFIGS if c["model_type"] == "afm7")
    net = tiny_net("afm7", smollm2_tokenizer.vocab_size, config)
    with pytest.raises(UnsupportedModelError, match="afm7 .* logits on the engine's row caches differ"):
        cache_layout(net, "afm7")


def test_a_head_that_sets_ids_to_minus_infinity_is_served(smollm2_tokenizer) -> None:
    """Phi-3-small's head sets the ids its tokenizer never emits to -inf: equal infinities agree at load, and the
    engine's rows still equal the row decoded alone."""
    net = tiny_net("llama", smollm2_tokenizer.vocab_size)
    never = mx.arange(100, 140)

    class MaskedHead(type(net)):  # type: ignore[misc]
        def __call__(self, inputs: mx.array, cache: Any = None) -> mx.array:
            out = super().__call__(inputs, cache=cache)
            out[..., never] = -float("inf")
            return out

    net.__class__ = MaskedHead
    cache_layout(net, "masked-head llama")
    _ragged_rows_equal_each_row_alone(net, "masked-head llama")


def _every_configuration() -> list[dict[str, Any]]:
    from tests.runtime.row_caches.mlx_lm_model_tests import MLX_LM_MODEL_TESTS
    from tests.runtime.row_caches.mlx_lm_test_configs import MLX_LM_SINGLE_TESTS, MLX_LM_TEST_CONFIGS

    ours = [{**ARCHITECTURES[name], "model_type": name} for name in SERVED if name not in REPRESENTATIVE]
    return ours + MLX_LM_TEST_CONFIGS + MLX_LM_SINGLE_TESTS + MLX_LM_MODEL_TESTS


LONG_CHECKS = {"jamba": 7200}
"""Seconds the whole sweep of an architecture may take past the default 600: mlx-lm's Jamba test configuration
(expanded 128 times) took 4,078 s alone on 2 cores at load 5-7."""


def _sweep_params() -> list[Any]:
    return [pytest.param(config, id=config["model_type"],
                         marks=[pytest.mark.timeout(LONG_CHECKS[config["model_type"]])]
                         if config["model_type"] in LONG_CHECKS else [])
            for config in _every_configuration()]


@pytest.mark.slow
@pytest.mark.parametrize("config", _sweep_params())
def test_every_mlx_lm_architecture_is_refused_or_passes_every_check(smollm2_tokenizer, config) -> None:
    """Each architecture mlx-lm's own tests build (and those here beyond the representative ones): the ones in
    REFUSED refused with UnsupportedModelError naming them, every other one through every check the representative
    ones pass."""
    net = tiny_net(config["model_type"], smollm2_tokenizer.vocab_size, config)
    if config["model_type"] in REFUSED:
        with pytest.raises(UnsupportedModelError, match=config["model_type"]):
            cache_layout(net, config["model_type"])
        return
    model = Model(net=net, tokenizer=smollm2_tokenizer, name=config["model_type"])
    for check_model in CHECKS:
        check_model(model)
