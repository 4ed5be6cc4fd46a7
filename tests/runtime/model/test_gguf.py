"""GGUF reader: metadata and tensor infos of the SmolLM2 file, dequantization against ggml's reference
loops and against `mx.load`, and clear errors on malformed files."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from stdsl.model_files.gguf import GGMLType, GGUFError, GGUFFile
from stdsl.runtime.model.gguf_model import module_path, pack_codes, quantized_parts

# ----------------------------------------------------------------------------- ggml reference loops


def ref_q4_0(block: bytes) -> list[float]:
    d = np.frombuffer(block[0:2], "<f2")[0].astype(np.float32)
    qs = block[2:18]
    return [d * ((qs[j] & 0xF) - 8) for j in range(16)] + [d * ((qs[j] >> 4) - 8) for j in range(16)]


def ref_q4_1(block: bytes) -> list[float]:
    d, m = np.frombuffer(block[0:4], "<f2").astype(np.float32)
    qs = block[4:20]
    return [d * (qs[j] & 0xF) + m for j in range(16)] + [d * (qs[j] >> 4) + m for j in range(16)]


def ref_q8_0(block: bytes) -> list[float]:
    d = np.frombuffer(block[0:2], "<f2")[0].astype(np.float32)
    return [d * q for q in np.frombuffer(block[2:34], np.int8).astype(np.float32)]


def ref_q6_k(block: bytes) -> list[float]:
    """ggml's dequantize_row_q6_K for one super-block, transliterated."""
    ql, qh = block[0:128], block[128:192]
    sc = np.frombuffer(block[192:208], np.int8).astype(np.float32)
    d = np.frombuffer(block[208:210], "<f2")[0].astype(np.float32)
    y = [0.0] * 256
    for half in range(2):
        o, lo, hi, s = 128 * half, 64 * half, 32 * half, 8 * half
        for j in range(32):
            is_ = j // 16
            q1 = ((ql[lo + j] & 0xF) | (((qh[hi + j] >> 0) & 3) << 4)) - 32
            q2 = ((ql[lo + j + 32] & 0xF) | (((qh[hi + j] >> 2) & 3) << 4)) - 32
            q3 = ((ql[lo + j] >> 4) | (((qh[hi + j] >> 4) & 3) << 4)) - 32
            q4 = ((ql[lo + j + 32] >> 4) | (((qh[hi + j] >> 6) & 3) << 4)) - 32
            y[o + j] = d * sc[s + is_] * q1
            y[o + j + 32] = d * sc[s + is_ + 2] * q2
            y[o + j + 64] = d * sc[s + is_ + 4] * q3
            y[o + j + 96] = d * sc[s + is_ + 6] * q4
    return y


REFERENCE = {
    GGMLType.Q4_0: (32, 18, ref_q4_0, [0]),
    GGMLType.Q4_1: (32, 20, ref_q4_1, [0, 2]),
    GGMLType.Q8_0: (32, 34, ref_q8_0, [0]),
    GGMLType.Q6_K: (256, 210, ref_q6_k, [208]),
}

# ----------------------------------------------------------------------------- a tiny GGUF writer


def gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def write_gguf(path: Path, metadata: list[tuple[str, int, bytes]],
               tensors: list[tuple[str, tuple[int, ...], int, bytes]]) -> None:
    """Write GGUF v3: metadata as (key, value type, encoded value); tensors as (name, numpy shape, type, data)."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for key, kind, value in metadata:
        out += gguf_string(key) + struct.pack("<I", kind) + value
    offset = 0
    for name, shape, kind, data in tensors:
        out += gguf_string(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in reversed(shape))
        out += struct.pack("<IQ", kind, offset)
        offset += -(-len(data) // 32) * 32
    out += b"\0" * (-len(out) % 32)
    for _, _, _, data in tensors:
        out += data + b"\0" * (-len(data) % 32)
    path.write_bytes(bytes(out))


def random_blocks(kind: GGMLType, n_blocks: int, rng: np.random.Generator) -> bytes:
    """Random blocks with finite fp16 scale fields."""
    _, size, _, scale_offsets = REFERENCE[kind]
    blocks = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for offset in scale_offsets:
        scales = rng.uniform(-0.05, 0.05, size=n_blocks).astype("<f2")
        blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return blocks.tobytes()


@pytest.mark.parametrize("kind", list(REFERENCE))
def test_dequantization_matches_ggml_reference(tmp_path, kind):
    elems, size, reference, _ = REFERENCE[kind]
    rng = np.random.default_rng(int(kind))
    rows, cols = 3, 2 * elems
    data = random_blocks(kind, rows * cols // elems, rng)
    write_gguf(tmp_path / "t.gguf", [], [("w", (rows, cols), int(kind), data)])
    got = GGUFFile(tmp_path / "t.gguf").tensor("w")
    expected = np.array(
        [v for i in range(0, len(data), size) for v in reference(data[i : i + size])], dtype=np.float32
    ).reshape(rows, cols)
    assert got.shape == (rows, cols) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_float_types_and_metadata_values(tmp_path):
    values = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    bf16 = (values.view(np.uint32) >> 16).astype("<u2")
    metadata = [
        ("general.architecture", 8, gguf_string("llama")),
        ("a.u32", 4, struct.pack("<I", 7)),
        ("a.f32", 6, struct.pack("<f", 0.5)),
        ("a.bool", 7, struct.pack("<?", True)),
        ("a.ints", 9, struct.pack("<IQ", 5, 3) + struct.pack("<3i", -1, 0, 9)),
        ("a.strs", 9, struct.pack("<IQ", 8, 2) + gguf_string("x y") + gguf_string("é")),
    ]
    tensors = [
        ("f32", (3, 4), 0, values.tobytes()),
        ("f16", (3, 4), 1, values.astype("<f2").tobytes()),
        ("bf16", (3, 4), 30, bf16.tobytes()),
    ]
    write_gguf(tmp_path / "f.gguf", metadata, tensors)
    gguf = GGUFFile(tmp_path / "f.gguf")
    assert gguf.metadata["general.architecture"] == "llama"
    assert gguf.metadata["a.u32"] == 7 and gguf.metadata["a.f32"] == 0.5 and gguf.metadata["a.bool"] is True
    assert gguf.metadata["a.ints"].tolist() == [-1, 0, 9]
    assert gguf.metadata["a.strs"] == ["x y", "é"]
    np.testing.assert_array_equal(gguf.tensor("f32"), values)
    np.testing.assert_array_equal(gguf.tensor("f16"), values.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(gguf.tensor("bf16"), values, rtol=1e-2)


def test_malformed_files_raise_clear_errors(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + b"\0" * 64)
    with pytest.raises(GGUFError, match="not a GGUF file"):
        GGUFFile(bad)
    write_gguf(tmp_path / "ok.gguf", [("k", 8, gguf_string("v"))], [("w", (2, 32), 8, b"\0" * 68)])
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes((tmp_path / "ok.gguf").read_bytes()[:40])
    with pytest.raises(GGUFError, match="truncated|past the end"):
        GGUFFile(truncated)
    with pytest.raises(GGUFError, match="not found"):
        GGUFFile(tmp_path / "missing.gguf")
    with pytest.raises(GGUFError, match="no tensor named"):
        GGUFFile(tmp_path / "ok.gguf").tensor("nope")


# ----------------------------------------------------------------------------- the SmolLM2 file


def test_smollm2_header_and_metadata(smollm2_gguf):
    meta = smollm2_gguf.metadata
    assert smollm2_gguf.version == 3
    assert meta["general.architecture"] == "llama"
    assert meta["llama.block_count"] == 30 and meta["llama.embedding_length"] == 576
    assert meta["llama.attention.head_count"] == 9 and meta["llama.attention.head_count_kv"] == 3
    assert meta["tokenizer.ggml.pre"] == "smollm" and meta["tokenizer.ggml.model"] == "gpt2"
    assert len(meta["tokenizer.ggml.tokens"]) == 49152 and len(meta["tokenizer.ggml.merges"]) == 48900
    assert meta["tokenizer.ggml.eos_token_id"] == 2
    assert "<|im_start|>" in meta["tokenizer.chat_template"]


def test_smollm2_tensor_infos(smollm2_gguf):
    tensors = smollm2_gguf.tensors
    assert len(tensors) == 2 + 30 * 9
    assert {t.ggml_type for t in tensors.values()} == {GGMLType.F32, GGMLType.Q4_1, GGMLType.Q8_0}
    embedding = tensors["token_embd.weight"]
    assert embedding.shape == (49152, 576) and embedding.ggml_type == GGMLType.Q8_0
    keys = tensors["blk.0.attn_k.weight"]
    assert keys.shape == (192, 576) and keys.ggml_type == GGMLType.Q4_1
    assert tensors["blk.0.ffn_down.weight"].shape == (576, 1536)
    assert "output.weight" not in tensors
    for name in tensors:
        module_path(name)


def test_smollm2_tensors_match_mx_load(smollm2_gguf, smollm2_gguf_path):
    """mx.load unpacks Q4_1/Q8_0 into MLX affine layers: our layout and our dequantization both agree."""
    import mlx.core as mx

    loaded = mx.load(str(smollm2_gguf_path))
    for name in ("blk.0.attn_q.weight", "blk.7.ffn_down.weight", "token_embd.weight"):
        bits, parts = quantized_parts(smollm2_gguf, name)
        assert bits == (8 if name.startswith("token_embd") else 4)
        np.testing.assert_array_equal(parts["weight"], np.array(loaded[name]))
        stem = name[: -len("weight")]
        scales = np.array(loaded[stem + "scales"].astype(mx.float32))
        biases = np.array(loaded[stem + "biases"].astype(mx.float32))
        np.testing.assert_array_equal(parts["scales"], scales)
        np.testing.assert_array_equal(parts["biases"], biases)
        reference = mx.dequantize(loaded[name], mx.array(scales), mx.array(biases), group_size=32, bits=bits)
        np.testing.assert_allclose(smollm2_gguf.tensor(name), np.array(reference), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(smollm2_gguf.tensor("output_norm.weight"), np.array(loaded["output_norm.weight"]))


def test_pack_codes_puts_element_zero_in_the_low_bits():
    codes = np.arange(16, dtype=np.uint8).reshape(1, 16)
    assert pack_codes(codes, 4).tolist() == [[0x76543210, 0xFEDCBA98]]
    assert pack_codes(np.arange(4, dtype=np.uint8).reshape(1, 4), 8).tolist() == [[0x03020100]]
