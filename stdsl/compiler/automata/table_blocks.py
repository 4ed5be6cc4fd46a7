"""Large tables built a block at a time, with a deadline check between blocks.

A renaming or column take over a product of 140,000 states is one numpy call of 0.15-0.2 s on a loaded machine,
most of it page faults on the fresh memory it writes: `in_row_blocks` splits it into blocks of `BLOCK_CELLS`
cells, so the compile time limit is checked every few milliseconds (`minimize.renamed_rows`,
`automaton.columns_taken`); so do the fills, conversions and concatenations here.  It imports nothing beyond numpy
and the deadline, so every automata module can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from stdsl.compiler.deadline import check_deadline

BLOCK_CELLS = 1 << 19
"""Table cells built between two deadline checks (a few milliseconds of numpy work; 1 << 20 int64 cells were a
0.1 s stretch for a fresh process on a loaded machine).  A block of int32 cells (2 MB) is also under the 4 MB past
which numpy asks the kernel for huge pages, whose first touch may stall while it compacts memory: a temporary made a
block at a time reuses the memory the last block freed."""


def block_rows(width: int) -> int:
    """Rows of a `width`-column table that make one block of about `BLOCK_CELLS` cells (at least one)."""
    return max(1, BLOCK_CELLS // max(1, width))


def in_row_blocks(rows: int, width: int, dtype: np.dtype, block: Callable[[int, int], np.ndarray],
                  stage: str) -> np.ndarray:
    """The (rows, width) table whose rows lo..hi-1 are `block(lo, hi)`: one call when it holds at most
    `BLOCK_CELLS` cells, else one per block of rows with a deadline check (naming `stage`) before each."""
    if rows * width <= BLOCK_CELLS:
        return block(0, rows)
    out = np.empty((rows, width), dtype=dtype)
    step = block_rows(width)
    for lo in range(0, rows, step):
        check_deadline(stage)
        out[lo:lo + step] = block(lo, min(lo + step, rows))
    return out


def taken(source: np.ndarray, indices: np.ndarray, out: np.ndarray, stage: str,
          mode: Literal["wrap", "clip"] = "wrap") -> np.ndarray:
    """`np.take(source, indices, out=out, mode=mode)` ("wrap": a dead -1 reads the source's last entry) half a block
    of rows of `indices` at a time (int32 indices are read as an int64 copy, so a copy stays a block's 2 MB), with a
    deadline check between; `out` may be `indices` itself (each cell is read before it is written).  A 400-tool
    reply's numbering took one copy of 30 MB of indices at once, fresh pages on every first build."""
    step = max(1, block_rows(int(np.prod(indices.shape[1:]))) // 2)
    for lo in range(0, len(indices), step):
        check_deadline(stage)
        np.take(source, indices[lo:lo + step], out=out[lo:lo + step], mode=mode)
    return out


def target_runs(block: np.ndarray, word: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The runs of a block of rows: adjacent live symbols moving to one target, cut where a `word` of symbols ends
    (None: never), as the flat indices of each run's first and last cell."""
    live = block >= 0
    carried = np.zeros_like(live)
    carried[:, 1:] = live[:, 1:] & (block[:, 1:] == block[:, :-1])
    if word is not None:
        carried[:, ::word] = False
    carried_next = np.zeros_like(live)
    carried_next[:, :-1] = carried[:, 1:]
    return np.flatnonzero(live & ~carried), np.flatnonzero(live & ~carried_next)


def dead_table(shape: tuple[int, int], dtype: type[np.integer], stage: str, releasing: float = 0.0) -> np.ndarray:
    """`np.full(shape, -1, dtype)`, filled a block of rows at a time with a deadline check between (`releasing` as
    for `check_deadline`): a fresh process pays a page fault for each 4 KB it first writes (MaskBench o69209's
    pushdown call table took 0.7 s of CPU at once on a loaded machine)."""
    table = np.empty(shape, dtype=dtype)
    step = block_rows(shape[1])
    for lo in range(0, shape[0], step):
        check_deadline(stage, releasing)
        table[lo:lo + step] = -1
    return table


def converted(table: np.ndarray, dtype: type[np.integer], stage: str) -> np.ndarray:
    """`np.asarray(table, dtype=dtype)`: the table itself when it has that dtype, else copied a block at a time
    (`in_row_blocks`): a large subset construction's int32 table widened to int64 at once took 0.16 s on a loaded
    machine."""
    if table.dtype == dtype:
        return table
    return in_row_blocks(len(table), table.shape[1], np.dtype(dtype), lambda lo, hi: table[lo:hi].astype(dtype),
                         stage)


def concatenated(parts: Sequence[np.ndarray], stage: str) -> np.ndarray:
    """`np.concatenate(parts)` (at least one part; one-dimensional, or tables of one width), copied about
    `BLOCK_CELLS` cells at a time with a deadline check between: MaskBench o15711's NFA class moves took 0.26 s at
    once on a loaded machine."""
    width = int(np.prod(parts[0].shape[1:]))
    out = np.empty((sum(len(part) for part in parts),) + parts[0].shape[1:], dtype=np.result_type(*parts))
    step = block_rows(width)
    at = 0
    for part in parts:
        for lo in range(0, len(part), step):
            check_deadline(stage)
            piece = part[lo:lo + step]
            out[at:at + len(piece)] = piece
            at += len(piece)
    return out


def equal_row_keys(rows: np.ndarray, stage: str) -> np.ndarray:
    """A key per row of a 2-D integer array, equal exactly where the rows are equal, from one one-dimensional
    sort per column with a deadline check between: `np.unique(rows, axis=0)` sorts the rows as opaque records,
    0.28-0.34 s for 587,022 one-word rows (MaskBench o15711) against 0.05 s."""
    keys = np.zeros(len(rows), dtype=np.int64)
    for index, column in enumerate(rows.T):
        check_deadline(stage)
        values, ids = np.unique(column, return_inverse=True)
        ids = ids.reshape(-1).astype(np.int64)
        keys = ids if index == 0 else np.unique(keys * len(values) + ids, return_inverse=True)[1].reshape(-1)
    return keys
