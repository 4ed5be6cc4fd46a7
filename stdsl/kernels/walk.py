"""The walk kernel (Theorem 18(ii), D.2): one walk per token per row recomputes the token table's row.

Thread t of row b reads state q_b and follows token t's bytes through the automaton table; the
mask is `next >= 0` (with the boundary cover `len(t) >= cover[q]`) or `eos and accepting[q]`.
Paths: a Metal kernel, a CUDA kernel, the same walk as MLX ops ('mlx') and as numpy over tokens
sorted by length ('numpy'), and on the CPU by default the trie level pass per row ('portable',
the fastest there). All equal the token table.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from stdsl.errors import StdslError
from stdsl.kernels.combined import WalkTable
from stdsl.kernels.token_table import (
    DEAD,
    ScaledTable,
    root_row,
    token_table_rows,
)
from stdsl.kernels.vocabulary import Vocabulary
from stdsl.kernels.walk_layout import WalkLayout, token_kinds, walk_layout

_KERNEL_DIR = Path(__file__).resolve().parent
THREADGROUP = 256
COMPACT_POSITIONS = 2
COMPACT_MIN = 4096


def _walk_row_numpy(
    table: ScaledTable,
    state: int,
    vocab: Vocabulary,
    layout: WalkLayout,
    out: np.ndarray,
) -> None:
    """Walk every token from one state; write next states (-1 dead) into `out` (V,) at token ids.

    Position-major bytes serve the full token set; once most tokens are dead (a structural
    state), the survivors are compacted and walked on alone through the packed bytes.
    """
    out[:] = DEAD
    if state < 0 or layout.alive.shape[0] == 0:
        return
    scaled, sink, byte_class = table.flat, table.sink, table.byte_class
    alive = layout.alive.tolist()
    first_step = scaled[state * table.stride + byte_class]
    live_bytes = np.flatnonzero(first_step != sink)
    offsets = layout.first_byte_offsets
    if int((offsets[live_bytes + 1] - offsets[live_bytes]).sum()) * 2 < alive[0]:
        groups = [
            layout.by_first_byte[offsets[b] : offsets[b + 1]]
            for b in live_bytes.tolist()
        ]
        survivors = (
            np.sort(np.concatenate(groups)) if groups else np.zeros(0, dtype=np.int32)
        )
        current = _walk_survivors(
            table,
            vocab,
            layout,
            survivors,
            first_step[layout.position_bytes[0][survivors]],
            1,
        )
        out[layout.order[survivors]] = table.states_of(current)
        return
    current = np.full(alive[0], state * table.stride, dtype=np.int32)
    finished = np.full(alive[0], sink, dtype=np.int32)
    index = np.empty(alive[0], dtype=np.int32)
    for i, n in enumerate(alive):
        view = current[:n]
        np.add(view, table.columns(layout.position_bytes[i]), out=index[:n])
        np.take(scaled, index[:n], out=view)
        end = alive[i + 1] if i + 1 < len(alive) else 0
        finished[end:n] = view[end:n]
        if i < COMPACT_POSITIONS and end > COMPACT_MIN:
            survivors = np.flatnonzero(view[:end] != sink)
            if survivors.shape[0] * 2 < end:
                finished[survivors] = _walk_survivors(
                    table, vocab, layout, survivors, view[survivors], i + 1
                )
                break
    out[layout.order] = table.states_of(finished)


def _walk_survivors(
    table: ScaledTable,
    vocab: Vocabulary,
    layout: WalkLayout,
    survivors: np.ndarray,
    current: np.ndarray,
    position: int,
) -> np.ndarray:
    """Finish the walks of a few surviving tokens (positions in layout order, lengths descending)."""
    tokens = layout.order[survivors]
    starts = vocab.offsets[tokens]
    lengths = vocab.walk_lengths[tokens]
    index = np.empty_like(current)
    i = position
    n = int(np.count_nonzero(lengths > i))
    while n:
        np.add(starts[:n], i, out=index[:n])
        np.add(current[:n], table.byte_class[vocab.data[index[:n]]], out=index[:n])
        np.take(table.flat, index[:n], out=current[:n])
        i += 1
        n = int(np.count_nonzero(lengths[:n] > i))
    return current


def walk_next_states_numpy(
    table: Any, states: Sequence[int] | np.ndarray, vocab: Vocabulary
) -> np.ndarray:
    """Portable walk on the CPU with numpy: next states (B, V) int32, -1 dead (specials and eos too)."""
    prepared = WalkTable.of(table)
    states = _check_states(states, prepared)
    layout = walk_layout(vocab)
    out = np.empty((states.shape[0], vocab.size), dtype=np.int32)
    for b, q in enumerate(states.tolist()):
        _walk_row_numpy(prepared.scaled, q, vocab, layout, out[b])
    return out


def walk_next_states_mlx(
    table: Any, states: Sequence[int] | np.ndarray, vocab: Vocabulary
) -> mx.array:
    """Portable walk with MLX ops (any device): gathers per byte position over the still-walking tokens."""
    prepared = WalkTable.of(table)
    states = _check_states(states, prepared)
    layout = walk_layout(vocab)
    device = vocab.cached(
        "walk_layout_mlx",
        lambda: (
            mx.array(layout.order),
            tuple(mx.array(p) for p in layout.position_bytes),
        ),
    )
    order, position_bytes = device
    scaled = device_array(prepared, "scaled")
    byte_class = device_array(prepared, "byte_class")
    stride = prepared.scaled.stride
    start = mx.array(np.maximum(states, 0).astype(np.int32) * stride)[:, None]
    current = mx.broadcast_to(
        start, (states.shape[0], int(layout.alive[0]) if layout.alive.shape[0] else 0)
    )
    pieces: list[mx.array] = []
    alive = layout.alive.tolist()
    for i, n in enumerate(alive):
        current = mx.take(scaled, current[:, :n] + mx.take(byte_class, position_bytes[i])[None, :])
        end = alive[i + 1] if i + 1 < len(alive) else 0
        pieces.append(current[:, end:n])
    walked = (
        mx.concatenate(pieces[::-1], axis=1)
        if pieces
        else mx.zeros((states.shape[0], 0), dtype=mx.int32)
    )
    walked = mx.where(walked == prepared.sink, DEAD, walked // stride)
    walked = mx.where(mx.array(states >= 0)[:, None], walked, DEAD)
    out = mx.full((states.shape[0], vocab.size), DEAD, dtype=mx.int32)
    out[:, order] = walked
    return out


def _check_states(states: Sequence[int] | np.ndarray, table: WalkTable) -> np.ndarray:
    """States as an int32 vector; -1 (dead row) allowed, anything else must be a valid state."""
    states = np.asarray(states, dtype=np.int64).reshape(-1)
    if states.size and (states.min() < DEAD or states.max() >= table.num_states):
        raise StdslError(
            f"walk: states must lie in [-1, {table.num_states - 1}], got {states.tolist()}"
        )
    return states.astype(np.int32)


def backend() -> str:
    """Which walk runs by default: 'metal', 'cuda' (GPU default device with the backend), else 'portable'."""
    if mx.default_device() == mx.gpu:
        if mx.metal.is_available():
            return "metal"
        if mx.cuda.is_available():
            return "cuda"
    return "portable"


@cache
def kernel_source(kind: str) -> str:
    """Body of the device walk kernel, 'metal' or 'cuda'."""
    suffix = {"metal": "walk.metal", "cuda": "walk.cu"}[kind]
    return (_KERNEL_DIR / suffix).read_text()


@cache
def _device_kernel(kind: str, table_dtype: str) -> Any:
    """The compiled-on-first-use MLX custom kernel for 'metal' or 'cuda' and a table dtype.

    Each table dtype gets its own kernel name: MLX caches compiled kernels by name.
    """
    make = mx.fast.metal_kernel if kind == "metal" else mx.fast.cuda_kernel
    return make(
        name=f"stdsl_walk_{table_dtype}",
        input_names=[
            "table",
            "byte_class",
            "states",
            "data",
            "offsets",
            "kind",
            "accepting",
            "cover",
            "sizes",
        ],
        output_names=["next_state", "mask"],
        source=kernel_source(kind),
    )


_DEVICE_TABLES: weakref.WeakKeyDictionary[WalkTable, dict[str, mx.array]] = weakref.WeakKeyDictionary()


def device_array(table: WalkTable, name: str) -> mx.array:
    """An MLX copy of one of a walk table's arrays, made once per table.

    'table' (class table, flat, -1 dead), 'byte_class' (int32), 'scaled' (the scaled walk table),
    'accepting', or 'no_cover' (zeros per state).
    """
    arrays = _DEVICE_TABLES.setdefault(table, {})
    if name not in arrays:
        source = {
            "table": lambda: table.class_transitions.reshape(-1),
            "byte_class": lambda: table.scaled.byte_class,
            "scaled": lambda: table.scaled.flat,
            "accepting": lambda: table.accepting,
            "no_cover": lambda: np.zeros(table.num_states, dtype=np.int32),
        }[name]
        arrays[name] = mx.array(source())
    return arrays[name]


def device_vocabulary(vocab: Vocabulary) -> dict[str, mx.array]:
    """The vocabulary's device arrays (packed bytes, offsets, kinds, lengths), made once per vocabulary."""

    def build() -> dict[str, mx.array]:
        data = vocab.data if vocab.data.size else np.zeros(1, dtype=np.uint8)
        return {
            "data": mx.array(data),
            "offsets": mx.array(vocab.offsets),
            "kind": mx.array(token_kinds(vocab)),
            "lengths": mx.array(vocab.walk_lengths),
            "eos": mx.array(vocab.eos),
        }

    return vocab.cached("device_vocabulary", build)


def _walk_device(
    kind: str,
    table: WalkTable,
    states: np.ndarray,
    vocab: Vocabulary,
    cover: mx.array,
    accepting: mx.array,
) -> tuple[mx.array, mx.array]:
    """Run the device kernel: (next states (B, V) int32, mask (B, V) bool)."""
    arrays = device_vocabulary(vocab)
    rows = int(states.shape[0])
    outputs = _device_kernel(kind, str(table.state_dtype))(
        inputs=[
            device_array(table, "table"),
            device_array(table, "byte_class"),
            mx.array(states),
            arrays["data"],
            arrays["offsets"],
            arrays["kind"],
            accepting,
            cover,
            mx.array(np.asarray([vocab.size, rows, table.num_classes], dtype=np.int32)),
        ],
        grid=(vocab.size, rows, 1),
        threadgroup=(THREADGROUP, 1, 1),
        output_shapes=[(rows, vocab.size), (rows, vocab.size)],
        output_dtypes=[mx.int32, mx.bool_],
    )
    return outputs[0], outputs[1]


def _cover_vector(table: WalkTable, cover: Any) -> np.ndarray:
    """Per-state minimum token byte length as an int32 vector (zeros when no cover)."""
    if cover is None:
        return np.zeros(table.num_states, dtype=np.int32)
    cover_np = np.asarray(cover, dtype=np.int32).reshape(-1)
    if cover_np.shape[0] != table.num_states:
        raise StdslError(
            f"walk: cover must have one entry per state ({table.num_states}), got {cover_np.shape[0]}"
        )
    return cover_np


def _cover_array(table: WalkTable, cover: Any) -> mx.array:
    """The cover as an MLX vector (cached zeros when there is no cover)."""
    if cover is None:
        return device_array(table, "no_cover")
    return mx.array(_cover_vector(table, cover))


def walk_next_states_trie(
    table: Any, states: Sequence[int] | np.ndarray, vocab: Vocabulary
) -> np.ndarray:
    """Portable rows on the CPU by the trie level pass from each root (the fastest CPU path): (B, V) int32."""
    prepared = WalkTable.of(table)
    states = _check_states(states, prepared)
    out = np.full((states.shape[0], vocab.size), DEAD, dtype=np.int32)
    for b, q in enumerate(states.tolist()):
        if q >= 0:
            out[b] = root_row(prepared.scaled, q, vocab)
    return out


CPU_PATHS = {"portable": walk_next_states_trie, "numpy": walk_next_states_numpy}


def walk_next_states(
    table: Any,
    states: Sequence[int] | np.ndarray,
    vocab: Vocabulary,
    path: str | None = None,
) -> mx.array:
    """Next state of every token from each row's state: (B, V) int32, -1 dead; specials and eos -1.

    `path`: 'metal' / 'cuda' (device kernel), 'mlx' (MLX token walk), 'numpy' (numpy token walk),
    'portable' (numpy trie pass); default: `backend()`.
    """
    prepared = WalkTable.of(table)
    states_np = _check_states(states, prepared)
    path = path or backend()
    if path in ("metal", "cuda"):
        cover = _cover_array(prepared, None)
        return _walk_device(
            path, prepared, states_np, vocab, cover, device_array(prepared, "accepting")
        )[0]
    if path == "mlx":
        return walk_next_states_mlx(prepared, states_np, vocab)
    if path in CPU_PATHS:
        return mx.array(CPU_PATHS[path](prepared, states_np, vocab))
    raise StdslError(f"walk: unknown path {path!r} (metal, cuda, mlx, numpy, portable)")


def walk_mask(
    table: Any,
    accepting: Any,
    states: Sequence[int] | np.ndarray,
    vocab: Vocabulary,
    cover: Any = None,
    path: str | None = None,
) -> mx.array:
    """Allowed tokens (B, V) bool: walk alive (and len >= cover[q]) or (eos and q accepting).

    `accepting` overrides the table's accepting vector when given; `cover` is per state.
    """
    prepared = WalkTable.of(table)
    states_np = _check_states(states, prepared)
    accepting_np = (
        prepared.accepting
        if accepting is None
        else np.asarray(accepting, dtype=bool).reshape(-1)
    )
    if accepting_np.shape[0] != prepared.num_states:
        raise StdslError(
            f"walk: accepting must have one entry per state ({prepared.num_states})"
        )
    cover_np = _cover_vector(prepared, cover)
    path = path or backend()
    if path in ("metal", "cuda"):
        accepting_device = (
            device_array(prepared, "accepting")
            if accepting is None
            else mx.array(accepting_np)
        )
        return _walk_device(
            path,
            prepared,
            states_np,
            vocab,
            _cover_array(prepared, cover),
            accepting_device,
        )[1]
    safe = np.maximum(states_np, 0)
    accepting_rows = accepting_np[safe] & (states_np >= 0)
    if path in CPU_PATHS:
        next_states = CPU_PATHS[path](prepared, states_np, vocab)
        mask = next_states >= 0
        if cover is not None:
            mask &= vocab.walk_lengths[None, :] >= cover_np[safe][:, None]
        mask[:, vocab.eos_ids] = accepting_rows[:, None]
        return mx.array(mask)
    if path != "mlx":
        raise StdslError(
            f"walk: unknown path {path!r} (metal, cuda, mlx, numpy, portable)"
        )
    arrays = device_vocabulary(vocab)
    next_device = walk_next_states_mlx(prepared, states_np, vocab)
    long_enough = arrays["lengths"][None, :] >= mx.array(cover_np[safe])[:, None]
    return ((next_device >= 0) & long_enough) | (
        arrays["eos"][None, :] & mx.array(accepting_rows)[:, None]
    )


def check_walk_kernel(path: str | None = None, seed: int = 0) -> None:
    """Self-check of a walk path (default: this machine's backend) against the token table.

    Random byte vocabulary with multibyte tokens, specials and eos; a small int16 table and a
    large int32 one, several rows with a cover. Raises StdslError on the first mismatch.
    """
    path = path or backend()
    rng = np.random.default_rng(seed)
    alphabet = np.asarray(
        [0x22, 0x61, 0x62, 0x7B, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0x00], dtype=np.uint8
    )
    tokens: list[bytes | None] = [
        bytes(rng.choice(alphabet, size=int(rng.integers(1, 9))).tolist())
        for _ in range(700)
    ]
    tokens += [None, None, b"\xc3\xa9", bytes(range(256))[:40]]
    vocab = Vocabulary(tokens, eos_ids=[700])
    for num_states in (37, 33000):
        transitions = np.full((num_states, 256), -1, dtype=np.int32)
        live = rng.random((num_states, alphabet.shape[0])) < 0.8
        transitions[:, alphabet] = np.where(
            live, rng.integers(0, num_states, size=live.shape), -1
        )
        accepting = rng.random(num_states) < 0.4
        table = WalkTable(transitions, accepting)
        states = rng.integers(0, num_states, size=6)
        cover = rng.integers(0, 4, size=num_states)
        expected = token_table_rows(transitions, states, vocab, accepting).astype(
            np.int32
        )
        got = np.array(walk_next_states(table, states, vocab, path=path))
        if not np.array_equal(got, expected):
            bad = np.argwhere(got != expected)[0]
            raise StdslError(
                f"walk kernel ({path}, {num_states} states): row {bad[0]} token {bad[1]} gives "
                f"{got[tuple(bad)]}, table {expected[tuple(bad)]}"
            )
        want_mask = (
            (expected >= 0) & (vocab.walk_lengths[None, :] >= cover[states][:, None])
        ) | (vocab.eos[None, :] & accepting[states][:, None])
        got_mask = np.array(
            walk_mask(table, None, states, vocab, cover=cover, path=path)
        )
        if not np.array_equal(got_mask, want_mask):
            bad = np.argwhere(got_mask != want_mask)[0]
            raise StdslError(
                f"walk mask ({path}, {num_states} states): row {bad[0]} token {bad[1]} differs from the table"
            )
