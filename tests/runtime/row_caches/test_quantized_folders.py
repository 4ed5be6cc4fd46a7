"""Quantized MLX folders (4-bit, 8-bit, mxfp4) of sliding-window and hybrid recurrent models load through mlx-lm,
kept quantized or dequantized (the CPU default), give the quantized model's own logits, and decode valid JSON on the
batch engine. mxfp4's scales are 8-bit exponents: dequantizing them as floats was an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import mlx.core as mx
import numpy as np
import pytest
from mlx import nn
from mlx.utils import tree_flatten

from stdsl.runtime.decode import generate
from stdsl.runtime.model.loading import load
from tests.runtime.row_caches.architectures import ARCHITECTURES, tiny_net

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["n"], "additionalProperties": False}
QUANTIZATIONS = {"4bit": {"group_size": 32, "bits": 4}, "8bit": {"group_size": 32, "bits": 8},
                 "mxfp4": {"group_size": 32, "bits": 4, "mode": "mxfp4"}}


def write_folder(net: Any, arch: str, tokenizer: Any, folder: Path, quantization: dict[str, Any]) -> None:
    """A local MLX folder as mlx-lm writes one: config (with its quantization), safetensors, tokenizer files."""
    folder.mkdir(parents=True)
    config = {**ARCHITECTURES[arch], "model_type": arch, "vocab_size": tokenizer.vocab_size,
              "quantization": quantization}
    (folder / "config.json").write_text(json.dumps(config))
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(net.parameters())))
    tokenizer.hf.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "bos_token": "<|im_start|>",
        "chat_template": tokenizer.chat_template}))


@pytest.mark.parametrize("arch", ["qwen3_5", "gemma3_text", "gpt_oss"])
@pytest.mark.parametrize("name", list(QUANTIZATIONS))
def test_a_quantized_folder_loads_and_decodes_valid_json(smollm2_tokenizer, tmp_path, arch, name) -> None:
    net = tiny_net(arch, smollm2_tokenizer.vocab_size)
    nn.quantize(net, **QUANTIZATIONS[name])
    write_folder(net, arch, smollm2_tokenizer, tmp_path / arch, QUANTIZATIONS[name])
    ids = smollm2_tokenizer.encode("Count to 3: 1 2")
    want = np.asarray(net(mx.array([ids]))[0].astype(mx.float32))
    for quantized in (False, True):
        model = load(str(tmp_path / arch), quantized=quantized)
        got = np.asarray(model.forward(ids, model.make_cache()))
        assert np.abs(got - want).max() <= 1e-4 * (np.abs(want).max() + 1)
    out = generate(model, "Give a number.", SCHEMA, max_tokens=12)
    assert out.accepted
    jsonschema.validate(json.loads(out.text), SCHEMA)  # a budget-closed output is valid too
