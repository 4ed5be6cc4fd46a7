"""Llama- and Gemma 3-family GGUF checkpoints as mlx-lm models, quantized layers kept or dequantized.

Q4_0/Q4_1/Q8_0 are exactly MLX affine quantization with group size 32 (Q4_1: scales=d, biases=m;
Q8_0: codes q+128, biases=-128·d), so they load as `QuantizedLinear`/`QuantizedEmbedding` without
loss; every other type (F16, K-quants such as Q4_K/Q6_K, Q5_0, IQ types, ...) is dequantized to
float32, 4 bytes a weight (a Q4_K_M file grows about 7× in memory). llama GGUFs store Q/K rows for
interleaved RoPE, hence `rope_traditional=True`; Gemma 3 GGUFs keep Hugging Face's order and store
RMSNorm weights with the +1 already added, which mlx-lm's Gemma RMSNorm adds itself.
"""
from __future__ import annotations

import re
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from stdsl.model_files.gguf import AFFINE_SPLITTERS, GGUFError, GGUFFile
from stdsl.runtime.platform.mlx_lm_models import import_without_package_init, llama

GROUP_SIZE = 32
SUPPORTED_ARCHITECTURES = ("llama", "gemma3")
GEMMA3_SLIDING_WINDOW_PATTERN = 6
"""Every sixth Gemma 3 layer attends globally; GGUF does not store this (llama.cpp hard-codes it too)."""
GEMMA3_LOCAL_ROPE_BASE = 10000.0

_LLAMA_LAYER_NAMES = {
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
_GEMMA3_LAYER_NAMES = {
    **_LLAMA_LAYER_NAMES,
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
}
_LAYER_NAMES = {"llama": _LLAMA_LAYER_NAMES, "gemma3": _GEMMA3_LAYER_NAMES}
_GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)$")
_TOP = re.compile(r"(\w+)\.(weight|bias)$")


def module_path(gguf_name: str, arch: str = "llama") -> tuple[str, str]:
    """The mlx-lm module path and parameter ('weight'/'bias') for a GGUF tensor name of architecture `arch`."""
    block = _BLOCK.match(gguf_name)
    names = _LAYER_NAMES[arch]
    if block and block.group(2) in names:
        return f"model.layers.{block.group(1)}.{names[block.group(2)]}", block.group(3)
    top = _TOP.match(gguf_name)
    if top and top.group(1) in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[top.group(1)], top.group(2)
    raise GGUFError(f"GGUF tensor {gguf_name!r} has no place in a {arch} model")


def architecture(gguf: GGUFFile) -> str:
    """The file's `general.architecture`, refused with GGUFError unless this loader supports it."""
    arch = gguf.metadata.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        supported = ", ".join(SUPPORTED_ARCHITECTURES)
        raise GGUFError(f"{gguf.path}: architecture {arch!r} is not supported (supported: {supported})")
    return str(arch)


def model_args(gguf: GGUFFile) -> Any:
    """mlx-lm `ModelArgs` (llama's or gemma3_text's) from `{arch}.*` GGUF metadata."""
    meta = gguf.metadata
    arch = architecture(gguf)
    if "rope_freqs.weight" in gguf.tensors:
        raise GGUFError(f"{gguf.path}: per-dimension RoPE frequencies (rope_freqs.weight, Llama 3.1 scaling) "
                        "are not supported")

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
    common: dict[str, Any] = dict(
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
        rope_scaling=rope_scaling,
    )
    if arch == "gemma3":
        gemma3_text = import_without_package_init("mlx_lm.models.gemma3_text")
        return gemma3_text.ModelArgs(
            model_type="gemma3_text",
            query_pre_attn_scalar=head_dim,
            sliding_window=int(need("attention.sliding_window")),
            sliding_window_pattern=GEMMA3_SLIDING_WINDOW_PATTERN,
            rope_local_base_freq=GEMMA3_LOCAL_ROPE_BASE,
            **common,
        )
    return llama.ModelArgs(
        model_type="llama",
        rope_traditional=True,
        attention_bias="blk.0.attn_q.bias" in gguf.tensors,
        tie_word_embeddings="output.weight" not in gguf.tensors,
        **common,
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


def new_model(arch: str, args: Any, tied: bool) -> nn.Module:
    """An empty mlx-lm model of `arch`; a tied Gemma 3 drops its `lm_head` and reads out through the embedding."""
    if arch == "llama":
        return llama.Model(args)
    net = import_without_package_init("mlx_lm.models.gemma3_text").Model(args)
    if tied:
        net.sanitize({})
    return net


def load_gguf_model(gguf: GGUFFile, *, quantized: bool | None = None) -> nn.Module:
    """Build and fill an mlx-lm model (llama or gemma3_text) from a GGUF file; `quantized=None` picks by backend."""
    if quantized is None:
        quantized = default_quantized()
    arch = architecture(gguf)
    args = model_args(gguf)
    tied = "output.weight" not in gguf.tensors
    net = new_model(arch, args, tied)
    weights: list[tuple[str, mx.array]] = []
    bits_by_module: dict[str, int] = {}
    for name, info in gguf.tensors.items():
        path, parameter = module_path(name, arch)
        if path == "lm_head" and tied:
            continue
        matrix = parameter == "weight" and len(info.shape) == 2
        if quantized and matrix and info.ggml_type in AFFINE_SPLITTERS and info.shape[1] % GROUP_SIZE == 0:
            bits, parts = quantized_parts(gguf, name)
            bits_by_module[path] = bits
            weights.extend((f"{path}.{key}", mx.array(value)) for key, value in parts.items())
        else:
            values = gguf.tensor(name)
            if arch == "gemma3" and name.endswith("norm.weight"):
                values = values - 1.0
            weights.append((f"{path}.{parameter}", mx.array(values)))
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
