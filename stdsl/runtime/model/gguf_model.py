"""Llama-family GGUF checkpoints as mlx-lm `llama.Model`s, quantized layers kept or dequantized.

Q4_0/Q4_1/Q8_0 are exactly MLX affine quantization with group size 32 (Q4_1: scales=d, biases=m;
Q8_0: codes q+128, biases=-128·d), so they load as `QuantizedLinear`/`QuantizedEmbedding` without
loss; other types (F16, Q6_K, ...) are dequantized. GGUF stores Q/K rows for interleaved RoPE,
hence `rope_traditional=True`.
"""
from __future__ import annotations

import re
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from stdsl.model_files.gguf import AFFINE_SPLITTERS, GGUFError, GGUFFile
from stdsl.runtime.mlx_lm_models import llama

GROUP_SIZE = 32
SUPPORTED_ARCHITECTURES = ("llama",)

_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)$")
_TOP = re.compile(r"(\w+)\.(weight|bias)$")


def module_path(gguf_name: str) -> tuple[str, str]:
    """The mlx-lm module path and parameter ('weight'/'bias') for a GGUF tensor name."""
    block = _BLOCK.match(gguf_name)
    if block and block.group(2) in _LAYER_NAMES:
        return f"model.layers.{block.group(1)}.{_LAYER_NAMES[block.group(2)]}", block.group(3)
    top = _TOP.match(gguf_name)
    if top and top.group(1) in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[top.group(1)], top.group(2)
    raise GGUFError(f"GGUF tensor {gguf_name!r} has no place in a llama model")


def model_args(gguf: GGUFFile) -> llama.ModelArgs:
    """mlx-lm `ModelArgs` from `{arch}.*` GGUF metadata."""
    meta = gguf.metadata
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise GGUFError(f"{gguf.path}: architecture {arch!r} is not supported (supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
    if "rope_freqs.weight" in gguf.tensors:
        raise GGUFError(f"{gguf.path}: per-dimension RoPE frequencies (rope_freqs.weight, Llama 3.1 scaling) are not supported")

    def need(key: str) -> Any:
        if f"{arch}.{key}" not in meta:
            raise GGUFError(f"{gguf.path}: metadata lacks {arch}.{key}")
        return meta[f"{arch}.{key}"]

    heads = int(need("attention.head_count"))
    hidden = int(need("embedding_length"))
    head_dim = int(meta.get(f"{arch}.attention.key_length", hidden // heads))
    rope_dims = int(meta.get(f"{arch}.rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        raise GGUFError(f"{gguf.path}: partial RoPE ({rope_dims} of {head_dim} dims) is not supported")
    rope_scaling: dict[str, float | str] | None = None
    if meta.get(f"{arch}.rope.scaling.type") == "linear":
        rope_scaling = {"type": "linear", "factor": float(meta[f"{arch}.rope.scaling.factor"])}
    vocab = meta.get(f"{arch}.vocab_size") or len(meta.get("tokenizer.ggml.tokens", ()))
    return llama.ModelArgs(
        model_type="llama",
        hidden_size=hidden,
        num_hidden_layers=int(need("block_count")),
        intermediate_size=int(need("feed_forward_length")),
        num_attention_heads=heads,
        num_key_value_heads=int(meta.get(f"{arch}.attention.head_count_kv", heads)),
        rms_norm_eps=float(meta.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
        vocab_size=int(vocab or gguf.tensors["token_embd.weight"].shape[0]),
        head_dim=head_dim,
        max_position_embeddings=int(meta.get(f"{arch}.context_length", 4096)),
        rope_theta=float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
        rope_traditional=True,
        rope_scaling=rope_scaling,
        attention_bias="blk.0.attn_q.bias" in gguf.tensors,
        tie_word_embeddings="output.weight" not in gguf.tensors,
    )


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack unsigned codes (rows, cols) into MLX's uint32 layout: element 0 in the lowest bits."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    if bits == 8:
        return codes.view(np.uint32)
    if bits == 4:
        return np.ascontiguousarray(codes[..., 0::2] | (codes[..., 1::2] << 4)).view(np.uint32)
    raise GGUFError(f"cannot pack {bits}-bit codes")


def quantized_parts(gguf: GGUFFile, name: str) -> tuple[int, dict[str, np.ndarray]]:
    """(bits, {weight, scales, biases}) of an affine-quantized GGUF tensor in MLX's layout."""
    info = gguf.tensors[name]
    bits, split = AFFINE_SPLITTERS[info.ggml_type]
    codes, scales, biases = split(np.asarray(gguf.blocks(name)))
    rows = info.shape[0]
    return bits, {
        "weight": pack_codes(codes.reshape(rows, -1), bits),
        "scales": scales.reshape(rows, -1).astype(np.float32),
        "biases": biases.reshape(rows, -1).astype(np.float32),
    }


def default_quantized() -> bool:
    """Keep weights quantized on a GPU; on MLX's CPU backend fp32 matmuls are 10–50× faster."""
    return mx.default_device().type == mx.DeviceType.gpu


def load_gguf_model(gguf: GGUFFile, *, quantized: bool | None = None) -> llama.Model:
    """Build and fill an mlx-lm llama `Model` from a GGUF file; `quantized=None` picks by backend."""
    if quantized is None:
        quantized = default_quantized()
    args = model_args(gguf)
    net = llama.Model(args)
    weights: list[tuple[str, mx.array]] = []
    bits_by_module: dict[str, int] = {}
    for name, info in gguf.tensors.items():
        path, parameter = module_path(name)
        if path == "lm_head" and args.tie_word_embeddings:
            continue
        matrix = parameter == "weight" and len(info.shape) == 2
        if quantized and matrix and info.ggml_type in AFFINE_SPLITTERS and info.shape[1] % GROUP_SIZE == 0:
            bits, parts = quantized_parts(gguf, name)
            bits_by_module[path] = bits
            weights.extend((f"{path}.{key}", mx.array(value)) for key, value in parts.items())
        else:
            weights.append((f"{path}.{parameter}", mx.array(gguf.tensor(name))))
    if bits_by_module:
        nn.quantize(
            net,
            class_predicate=lambda path, module: (
                {"group_size": GROUP_SIZE, "bits": bits_by_module[path]} if path in bits_by_module else False
            ),
        )
    net.load_weights(weights, strict=True)
    net.eval()
    mx.eval(net.parameters())
    return net

