"""A GGUF file reader: header, metadata key/values, tensor infos and (dequantized) tensor data.

Numpy only, memory-mapped; tensor data is read lazily. F32, F16, BF16, Q4_0, Q4_1, Q8_0 and Q6_K are
decoded here (the affine types also split into MLX's layout); every other type, K-quants and IQ types
included, is dequantized by the `gguf` package (pure Python + numpy).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

from stdsl.errors import StdslError

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32


class GGUFError(StdslError):
    """A GGUF file is malformed or uses a feature this reader does not support."""


GGMLType = GGMLQuantizationType
"""ggml tensor element types (the ids stored in GGUF tensor infos), as the `gguf` package names them."""

BLOCK_LAYOUT: dict[GGMLType, tuple[int, int]] = dict(GGML_QUANT_SIZES)
"""(elements per block, bytes per block) of every ggml type."""

_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_ARRAY_DTYPES = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8",
                 12: "<f8"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's name, numpy-order shape (rows first), ggml type and absolute byte offset."""

    name: str
    shape: tuple[int, ...]
    ggml_type: GGMLType
    offset: int

    @property
    def n_elements(self) -> int:
        """Number of scalar elements in the tensor."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def n_bytes(self) -> int:
        """Bytes the tensor occupies in the file."""
        block_elems, block_bytes = BLOCK_LAYOUT[self.ggml_type]
        return self.n_elements // block_elems * block_bytes


class _Cursor:
    """Sequential little-endian reads over a memory map, with errors that name the offset."""

    def __init__(self, data: np.memmap, path: Path) -> None:
        self.data = data
        self.buffer: memoryview = data.data
        self.pos = 0
        self.path = path

    def take(self, n: int) -> memoryview:
        if self.pos + n > len(self.buffer):
            raise GGUFError(f"{self.path}: truncated at byte {self.pos} (needs {n} more bytes)")
        out = self.buffer[self.pos : self.pos + n]
        self.pos += n
        return out

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        length = self.scalar("<Q")
        return bytes(self.take(length)).decode("utf-8", errors="surrogateescape")

    def value(self, value_type: int) -> Any:
        if value_type in _SCALAR_FORMATS:
            return self.scalar(_SCALAR_FORMATS[value_type])
        if value_type == _STRING:
            return self.string()
        if value_type == _ARRAY:
            item_type = self.scalar("<I")
            count = self.scalar("<Q")
            if item_type in _ARRAY_DTYPES:
                dtype = np.dtype(_ARRAY_DTYPES[item_type])
                raw = self.take(count * dtype.itemsize)
                return np.frombuffer(raw, dtype=dtype).copy()
            return [self.value(item_type) for _ in range(count)]
        raise GGUFError(f"{self.path}: unknown metadata value type {value_type} at byte {self.pos}")


class GGUFFile:
    """A parsed GGUF file: `metadata` (key → value), `tensors` (name → TensorInfo), lazy data."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise GGUFError(f"GGUF file not found: {self.path}")
        self._data = np.memmap(self.path, dtype=np.uint8, mode="r")
        cursor = _Cursor(self._data, self.path)
        if bytes(cursor.take(4)) != GGUF_MAGIC:
            raise GGUFError(f"{self.path}: not a GGUF file (bad magic)")
        self.version: int = cursor.scalar("<I")
        if self.version not in (2, 3):
            raise GGUFError(f"{self.path}: unsupported GGUF version {self.version} (need 2 or 3)")
        tensor_count = cursor.scalar("<Q")
        kv_count = cursor.scalar("<Q")
        self.metadata: dict[str, Any] = {}
        for _ in range(kv_count):
            key = cursor.string()
            self.metadata[key] = cursor.value(cursor.scalar("<I"))
        infos = [self._read_tensor_info(cursor) for _ in range(tensor_count)]
        alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        data_start = -(-cursor.pos // alignment) * alignment
        self.tensors: dict[str, TensorInfo] = {}
        for name, shape, ggml_type, offset in infos:
            info = TensorInfo(name, shape, ggml_type, data_start + offset)
            if info.offset + info.n_bytes > len(self._data):
                raise GGUFError(f"{self.path}: tensor {name!r} extends past the end of the file")
            self.tensors[name] = info

    def _read_tensor_info(self, cursor: _Cursor) -> tuple[str, tuple[int, ...], GGMLType, int]:
        name = cursor.string()
        n_dims = cursor.scalar("<I")
        dims = tuple(cursor.scalar("<Q") for _ in range(n_dims))
        type_id = cursor.scalar("<I")
        offset = cursor.scalar("<Q")
        try:
            ggml_type = GGMLType(type_id)
        except ValueError:
            raise GGUFError(f"{self.path}: tensor {name!r} has unknown ggml type {type_id}") from None
        return name, tuple(reversed(dims)), ggml_type, offset

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as a uint8 array of shape (rows..., bytes per row), zero-copy."""
        info = self._info(name)
        block_elems, block_bytes = BLOCK_LAYOUT[info.ggml_type]
        row_bytes = info.shape[-1] // block_elems * block_bytes
        flat = self._data[info.offset : info.offset + info.n_bytes]
        return flat.reshape(*info.shape[:-1], row_bytes)

    def blocks(self, name: str) -> np.ndarray:
        """A quantized tensor's blocks as uint8 (rows..., blocks per row, bytes per block)."""
        info = self._info(name)
        block_elems, block_bytes = BLOCK_LAYOUT[info.ggml_type]
        return self.raw(name).reshape(*info.shape[:-1], info.shape[-1] // block_elems, block_bytes)

    def tensor(self, name: str) -> np.ndarray:
        """The tensor dequantized to float32 (float types converted), in numpy order."""
        info = self._info(name)
        if info.ggml_type == GGMLType.F32:
            return np.asarray(self.raw(name)).view("<f4").reshape(info.shape).astype(np.float32)
        if info.ggml_type == GGMLType.F16:
            return np.asarray(self.raw(name)).view("<f2").reshape(info.shape).astype(np.float32)
        if info.ggml_type == GGMLType.BF16:
            halves = np.asarray(self.raw(name)).view("<u2").astype(np.uint32) << 16
            return halves.view(np.float32).reshape(info.shape)
        if info.ggml_type not in _DEQUANTIZERS:
            values = dequantize(np.asarray(self.raw(name)), info.ggml_type)
            return np.asarray(values, dtype=np.float32).reshape(info.shape)
        blocks = np.asarray(self.blocks(name))
        values = _DEQUANTIZERS[info.ggml_type](blocks)
        return values.reshape(info.shape)

    def _info(self, name: str) -> TensorInfo:
        if name not in self.tensors:
            raise GGUFError(f"{self.path}: no tensor named {name!r}")
        info = self.tensors[name]
        block_elems, _ = BLOCK_LAYOUT[info.ggml_type]
        if info.shape[-1] % block_elems:
            raise GGUFError(f"{self.path}: tensor {name!r} row length {info.shape[-1]} is not a multiple of "
                            f"{block_elems}")
        return info


def _f16(blocks: np.ndarray, start: int) -> np.ndarray:
    """The little-endian float16 at byte `start` of each block, as float32 (..., 1)."""
    return np.ascontiguousarray(blocks[..., start : start + 2]).view("<f2").astype(np.float32)


def nibbles_q4(blocks: np.ndarray, start: int) -> np.ndarray:
    """The 32 4-bit codes of Q4_0/Q4_1 blocks in element order (low nibbles, then high), uint8."""
    packed = blocks[..., start : start + 16]
    return np.concatenate([packed & 0x0F, packed >> 4], axis=-1)


def q4_1_affine(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_1 blocks as (codes uint8 (...,32), scale d (...,1), offset m (...,1)): x = d·q + m."""
    return nibbles_q4(blocks, 4), _f16(blocks, 0), _f16(blocks, 2)


def q8_0_affine(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q8_0 blocks as unsigned affine (q+128 uint8, d, -128·d): x = d·(q+128) − 128·d = d·q."""
    codes = blocks[..., 2:34].view(np.int8).astype(np.int16) + 128
    scale = _f16(blocks, 0)
    return codes.astype(np.uint8), scale, -128.0 * scale


def q4_0_affine(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_0 blocks as affine (codes, d, -8·d): x = d·(q − 8)."""
    scale = _f16(blocks, 0)
    return nibbles_q4(blocks, 2), scale, -8.0 * scale


def _dequantize_affine(affine: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    codes, scale, offset = affine
    return codes.astype(np.float32) * scale + offset


def _dequantize_q6_k(blocks: np.ndarray) -> np.ndarray:
    """Q6_K super-blocks of 256: ql[128], qh[64], int8 scales[16], fp16 d (ggml's layout)."""
    ql = blocks[..., 0:128].astype(np.int16)
    qh = blocks[..., 128:192].astype(np.int16)
    scales = blocks[..., 192:208].view(np.int8).astype(np.float32)
    d = _f16(blocks, 208)
    out = []
    for half in range(2):
        lo = ql[..., 64 * half : 64 * half + 64]
        hi = qh[..., 32 * half : 32 * half + 32]
        q1 = (lo[..., :32] & 0xF) | ((hi >> 0 & 3) << 4)
        q2 = (lo[..., 32:] & 0xF) | ((hi >> 2 & 3) << 4)
        q3 = (lo[..., :32] >> 4) | ((hi >> 4 & 3) << 4)
        q4 = (lo[..., 32:] >> 4) | ((hi >> 6 & 3) << 4)
        out.extend([q1, q2, q3, q4])
    codes = np.concatenate(out, axis=-1).astype(np.float32) - 32.0
    group_scales = np.repeat(scales, 16, axis=-1)
    return d * group_scales * codes


_DEQUANTIZERS = {
    GGMLType.Q4_0: lambda b: _dequantize_affine(q4_0_affine(b)),
    GGMLType.Q4_1: lambda b: _dequantize_affine(q4_1_affine(b)),
    GGMLType.Q8_0: lambda b: _dequantize_affine(q8_0_affine(b)),
    GGMLType.Q6_K: _dequantize_q6_k,
}

AFFINE_SPLITTERS = {
    GGMLType.Q4_0: (4, q4_0_affine),
    GGMLType.Q4_1: (4, q4_1_affine),
    GGMLType.Q8_0: (8, q8_0_affine),
}
"""ggml types that are exactly MLX affine quantization with group size 32: type → (bits, splitter)."""
