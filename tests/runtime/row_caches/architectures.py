"""Tiny random-weight instances of mlx-lm's own architectures, one per cache kind, over a real tokenizer.

The configurations are those mlx-lm's `tests/test_models.py` builds (mlx-lm, MIT licence, Copyright © 2023-2024
Apple Inc.; `test_all_models` and the per-model tests), made smaller where a test would not notice (hidden
sizes, layers) and with sliding windows of a few positions, so that short prompts cross them. `vocab_size` is
the tokenizer's, so every test decodes real text.
"""

from __future__ import annotations

import importlib
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.utils import MODEL_REMAPPING

SEED = 5
PHI3SMALL_VOCABULARY = 100352

ARCHITECTURES: dict[str, dict[str, Any]] = {
    # plain KV caches
    "llama": {"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128, "num_attention_heads": 4,
              "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True},
    # sliding windows (RotatingKVCache) beside full attention
    "gemma3_text": {"hidden_size": 64, "num_hidden_layers": 4, "intermediate_size": 128, "num_attention_heads": 4,
                    "head_dim": 16, "rms_norm_eps": 1e-4, "num_key_value_heads": 1, "sliding_window": 4,
                    "sliding_window_pattern": 2},
    "gpt_oss": {"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 64, "num_attention_heads": 4,
                "num_key_value_heads": 2, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 4,
                "rope_theta": 10000, "layer_types": ["sliding_attention", "full_attention"]},
    "olmo3": {"num_heads": 4, "head_dim": 16, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "rope_theta": 1000, "num_hidden_layers": 4, "rms_norm_eps": 1e-4, "sliding_window": 4,
              "tie_word_embeddings": True, "max_position_embeddings": 1000},
    # recurrent states (ArraysCache) beside attention
    "qwen3_5": {"hidden_size": 64, "num_hidden_layers": 4, "intermediate_size": 128, "num_attention_heads": 4,
                "num_key_value_heads": 2, "linear_num_value_heads": 2, "linear_num_key_heads": 2,
                "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_conv_kernel_dim": 3,
                "rms_norm_eps": 1e-5, "head_dim": 16, "rope_theta": 1000.0, "partial_rotary_factor": 0.5,
                "max_position_embeddings": 1000, "full_attention_interval": 2},
    "lfm2": {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
             "norm_eps": 1e-5, "full_attn_idxs": [1, 3], "rope_theta": 10000, "block_dim": 64,
             "block_ffn_dim_multiplier": 1.5, "block_auto_adjust_ff_dim": True, "block_ff_dim": 128,
             "block_multiple_of": 32, "max_position_embeddings": 1000, "conv_bias": True, "conv_L_cache": 3},
    "nemotron_h": {"hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 4,
                   "max_position_embeddings": 1000, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "attention_bias": False, "mamba_num_heads": 4, "mamba_head_dim": 16, "mamba_proj_bias": False,
                   "ssm_state_size": 16, "conv_kernel": 3, "n_groups": 2, "time_step_limit": [1.0, 2.0],
                   "mlp_bias": False, "layer_norm_epsilon": 1e-4, "rms_norm_eps": 1e-5, "use_bias": True,
                   "use_conv_bias": True, "residual_in_fp32": True, "hybrid_override_pattern": ["*", "M", "*", "M"]},
    # recurrent state and attention in one layer (CacheList)
    "falcon_h1": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "head_dim": 16, "mamba_d_ssm": 64, "mamba_n_heads": 4,
                  "mamba_d_head": 16, "mamba_d_state": 16, "mamba_n_groups": 1, "mamba_d_conv": 4},
    # recurrent states only
    "mamba2": {"num_heads": 4, "head_dim": 16, "hidden_size": 64, "intermediate_size": 64, "state_size": 16,
               "num_hidden_layers": 2, "layer_norm_epsilon": 1e-4, "conv_kernel": 3, "n_groups": 2,
               "use_bias": False, "use_conv_bias": False, "tie_word_embeddings": True, "time_step_limit": [0.01, 10],
               "time_step_rank": "auto"},
    # chunked attention (ChunkedKVCache) beside full attention
    "llama4": {"num_hidden_layers": 4, "text_config": {
        "attention_bias": False, "attention_chunk_size": 8, "head_dim": 16, "hidden_size": 64,
        "interleave_moe_layer_step": 2, "intermediate_size": 64, "intermediate_size_mlp": 64,
        "max_position_embeddings": 1000, "model_type": "llama4", "num_attention_heads": 4, "num_experts_per_tok": 1,
        "num_hidden_layers": 4, "num_key_value_heads": 2, "num_local_experts": 2, "rms_norm_eps": 1e-4,
        "rope_scaling": None, "rope_theta": 1000, "use_qk_norm": True}},
}
"""Architecture → configuration (without `model_type` and `vocab_size`, which `tiny_net` adds)."""

def tiny_net(model_type: str, vocab_size: int, config: dict[str, Any] | None = None) -> Any:
    """A seeded random-weight float32 mlx-lm model of `model_type` over a vocabulary of `vocab_size`."""
    arch = importlib.import_module(f"mlx_lm.models.{MODEL_REMAPPING.get(model_type, model_type)}")
    settings = dict(ARCHITECTURES[model_type] if config is None else config)
    if model_type == "phi3small":  # its head sets ids up to 100,351 (its tokenizer's dummies) to -inf
        vocab_size = max(vocab_size, PHI3SMALL_VOCABULARY)
    settings.update(model_type=model_type, vocab_size=vocab_size)
    if "text_config" in settings:
        settings["text_config"] = {**settings["text_config"], "vocab_size": vocab_size}
    for part in (settings, settings.get("text_config", {})):
        if "vocab_size_per_layer_input" in part:  # Gemma 3n/4's per-layer embeddings are indexed by token id too
            part["vocab_size_per_layer_input"] = vocab_size
    mx.random.seed(SEED)
    net = arch.Model(arch.ModelArgs.from_dict(settings))
    net.update(nn.utils.tree_map(lambda p: p.astype(mx.float32) if mx.issubdtype(p.dtype, mx.floating) else p,
                                 net.parameters()))
    net.eval()
    mx.eval(net.parameters())
    return net
