"""The mask's way from the controller to the logits per step: dense bools (main before issue 34) against one packed
bitmask, at 49,152 tokens (SmolLM2's vocabulary) and 1, 4 and 8 rows, interleaved in one process.

Dense, as the core did: the row state's copy of the memoized mask, the core's (B, V) bool array, its upload and
`mx.where`. Packed, as it does now: each row's memoized words written into the preallocated int32 bitmask, one
upload of (B, V / 32) words, unpacked beside the logits and `mx.where`. Both masks are the same free-text-like mask
(every token but a few); each timing is the median of `--repeats` rounds of `--steps` steps, evaluated to the end.

    python benchmarks/mask_upload.py

Writes benchmarks/results/mask_upload.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import mlx.core as mx
import numpy as np

from stdsl.control.controller import write_words
from stdsl.kernels.token_mask import bitmask_words, pack_words
from stdsl.runtime.batch.sampling import _compiled_masking

VOCAB = 49_152
RESULT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "mask_upload.md"


def dense_step(masks: list[np.ndarray], logits: mx.array) -> mx.array:
    copies = [mask.copy() for mask in masks]
    allowed = np.zeros((len(masks), VOCAB), dtype=bool)
    for k, mask in enumerate(copies):
        allowed[k] = mask
    return mx.where(mx.array(allowed), logits, mx.array(-float("inf"), mx.float32))


def packed_step(words: list[np.ndarray], bitmask: np.ndarray, logits: mx.array) -> mx.array:
    for k, row in enumerate(words):
        write_words(row, bitmask[k])
    return _compiled_masking()(mx.array(bitmask[: len(words)]), logits)


def timed(step, steps: int) -> float:
    began = time.perf_counter()
    for _ in range(steps):
        mx.eval(step())
    return 1000 * (time.perf_counter() - began) / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    lines = ["# Mask upload per step: dense bools against one packed bitmask (49,152 tokens)", "",
             f"`python benchmarks/mask_upload.py --rows {' '.join(map(str, args.rows))} --steps {args.steps} "
             f"--repeats {args.repeats}`; ms per step (median of rounds), host bytes copied per step; load average "
             f"{os.getloadavg()[0]:.1f} at the start.", "",
             "| rows | dense ms | packed ms | dense / packed | dense bytes copied | packed bytes copied |",
             "|---:|---:|---:|---:|---:|---:|"]
    for rows in args.rows:
        masks = []
        for _ in range(rows):
            mask = np.ones(VOCAB, dtype=bool)
            mask[rng.choice(VOCAB, 40, replace=False)] = False
            mask.setflags(write=False)
            masks.append(mask)
        words = [pack_words(mask) for mask in masks]
        bitmask = np.zeros((8, bitmask_words(VOCAB)), dtype=np.int32)
        logits = mx.array(rng.normal(size=(rows, VOCAB)).astype(np.float32))
        dense, packed = [], []
        for _ in range(args.repeats):
            dense.append(timed(lambda: dense_step(masks, logits), args.steps))
            packed.append(timed(lambda: packed_step(words, bitmask, logits), args.steps))
        d, p = float(np.median(dense)), float(np.median(packed))
        dense_bytes = 3 * rows * VOCAB  # the row state's copy, the core's array, the upload
        packed_bytes = 2 * rows * bitmask.shape[1] * 4  # the words into the bitmask, the upload
        lines.append(f"| {rows} | {d:.3f} | {p:.3f} | {d / p:.2f} | {dense_bytes:,} | {packed_bytes:,} |")
        print(lines[-1], flush=True)
    RESULT.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
