"""The device walk kernels' sources: CUDA compiles with nvcc, and both bodies, compiled as C++
with a stand-in for their generated signatures and run thread by thread on the CPU over the
class form (`class_transitions[q, byte_class[b]]`), equal the
token table. The real device run is `check_walk_kernel()` on a GPU machine.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from stdsl.kernels.token_table import class_arrays, token_table
from stdsl.kernels.vocabulary import Vocabulary
from stdsl.kernels.walk import THREADGROUP, kernel_source, token_kinds

ARGS = (
    "const {table}* table, const int32_t* byte_class, const int32_t* states, const uint8_t* data, "
    "const int32_t* offsets, const uint8_t* kind, const bool* accepting, "
    "const int32_t* cover, const int32_t* sizes, int32_t* next_state, bool* mask"
)
CALL = "table, byte_class, states, data, offsets, kind, accepting, cover, sizes, next_state, mask"


def _run(command: list[str]) -> None:
    result = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("table_type", ["int16_t", "int32_t"])
def test_cuda_source_compiles(tmp_path: Path, table_type: str) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    source = (
        "#include <cstdint>\n#include <cooperative_groups.h>\n"
        "namespace cg = cooperative_groups;\n"
        f"__global__ void walk({ARGS.format(table=table_type)}) {{\n"
        f"{kernel_source('cuda')}\n}}\n"
    )
    (tmp_path / "walk.cu").write_text(source)
    _run(["nvcc", "-c", "-o", str(tmp_path / "walk.o"), str(tmp_path / "walk.cu")])


def _cpu_harness() -> str:
    """Both kernel bodies as C++ functions, and drivers that run every thread of the grid."""
    parts = [
        "#include <cstdint>\ntypedef unsigned int uint;\ntypedef unsigned long ulong;\n",
        "struct uint3 { uint x, y, z; };\nstruct dim3 { int x, y, z; };\n",
    ]
    for t in ("int16_t", "int32_t"):
        args = ARGS.format(table=t)
        parts.append(
            f"static void metal_{t}({args}, uint3 thread_position_in_grid) {{\n"
            f"{kernel_source('metal')}\n}}\n"
            f"static void cuda_{t}({args}, dim3 blockIdx, dim3 blockDim, dim3 threadIdx) {{\n"
            f"{kernel_source('cuda')}\n}}\n"
            f'extern "C" void run_metal_{t}({args}) {{\n'
            "  for (int b = 0; b < sizes[1]; ++b)\n"
            "    for (int x = 0; x < sizes[0]; ++x)\n"
            f"      metal_{t}({CALL}, uint3{{(uint)x, (uint)b, 0}});\n}}\n"
            f'extern "C" void run_cuda_{t}({args}) {{\n'
            f"  const int tg = {THREADGROUP};\n"
            "  for (int b = 0; b < sizes[1]; ++b)\n"
            "    for (int g = 0; g < (sizes[0] + tg - 1) / tg; ++g)\n"
            "      for (int x = 0; x < tg; ++x)\n"
            f"        cuda_{t}({CALL}, dim3{{g, b, 0}}, dim3{{tg, 1, 1}}, dim3{{x, 0, 0}});\n}}\n"
        )
    return "".join(parts)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    folder = tmp_path_factory.mktemp("walk_harness")
    (folder / "harness.cpp").write_text(_cpu_harness())
    library = folder / "harness.so"
    flags = ["-std=c++17", "-O1", "-shared", "-fPIC", "-Wall", "-Werror"]
    _run(["g++", *flags, "-o", str(library), str(folder / "harness.cpp")])
    return ctypes.CDLL(str(library))


@pytest.mark.parametrize("kind", ["metal", "cuda"])
@pytest.mark.parametrize("num_states", [23, 33000])
def test_kernel_bodies_equal_the_token_table(
    harness: ctypes.CDLL, kind: str, num_states: int
) -> None:
    rng = np.random.default_rng(num_states)
    alphabet = np.asarray(
        [0x22, 0x61, 0x7B, 0xC3, 0xA9, 0xE2, 0x82, 0xAC], dtype=np.uint8
    )
    tokens: list[bytes | None] = [
        bytes(rng.choice(alphabet, size=int(rng.integers(1, 7))).tolist())
        for _ in range(300)
    ]
    vocab = Vocabulary([*tokens, None, None], eos_ids=[301])
    dtype = np.int16 if num_states <= 32767 else np.int32
    transitions = np.full((num_states, 256), -1, dtype=dtype)
    live = rng.random((num_states, alphabet.shape[0])) < 0.85
    targets = rng.integers(0, num_states, size=live.shape)
    transitions[:, alphabet] = np.where(live, targets, -1)
    accepting = rng.random(num_states) < 0.5
    cover = rng.integers(0, 3, size=num_states).astype(np.int32)
    states = np.append(rng.integers(0, num_states, size=4), -1).astype(np.int32)
    rows = states.shape[0]
    next_state = np.zeros((rows, vocab.size), dtype=np.int32)
    mask = np.zeros((rows, vocab.size), dtype=bool)
    classes, byte_class, _ = class_arrays(transitions, accepting)
    arrays = [
        np.ascontiguousarray(classes.astype(dtype).reshape(-1)),
        byte_class.astype(np.int32),
        states,
        vocab.data,
        vocab.offsets,
        token_kinds(vocab),
        accepting,
        cover,
        np.asarray([vocab.size, rows, classes.shape[1]], dtype=np.int32),
        next_state,
        mask,
    ]
    run = getattr(
        harness, f"run_{kind}_{'int16_t' if dtype == np.int16 else 'int32_t'}"
    )
    run(*[a.ctypes.data_as(ctypes.c_void_p) for a in arrays])
    table = token_table(transitions, vocab, accepting)
    live_states = states[:-1]
    expected = table[live_states]
    assert np.array_equal(next_state[:-1], expected)
    assert (next_state[-1] == -1).all() and not mask[-1].any()
    long_enough = vocab.walk_lengths[None, :] >= cover[live_states][:, None]
    want = ((expected >= 0) & long_enough) | (
        vocab.eos[None, :] & accepting[live_states][:, None]
    )
    assert np.array_equal(mask[:-1], want)
