"""The subset construction's symbol classes (`automata/symbol_classes.py`): their cost per call by the number of byte
sets, read bit by bit and unpacked with numpy, and the calls' total for several `MANY_SETS` thresholds.

The calls are those the compiles of the named MaskBench files and of every k-th file make (`strict=False`, every
cache emptied before each file), captured once and then timed in this process (best of `--repeats`).

    python benchmarks/symbol_classes_speed.py Kubernetes---kb_233_Normalized --every 40 \\
        --out benchmarks/results/symbol_classes_speed
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
THRESHOLDS = (16, 24, 40, 56, 72)


def captured_calls(files: list[Path]) -> list[tuple[list[Any], int]]:
    """Every `symbol_classes` call (byte sets, alphabet) that compiling `files` makes."""
    import stdsl.caches
    from stdsl.compiler.automata import determinize
    from stdsl.compiler.constraint import compile as compile_constraint

    calls: list[tuple[list[Any], int]] = []
    original = determinize.symbol_classes

    def recorded(byte_sets: list[Any], alphabet: int = 256) -> Any:
        calls.append((list(byte_sets), alphabet))
        return original(byte_sets, alphabet)

    determinize.symbol_classes = recorded  # type: ignore[assignment]
    try:
        for path in files:
            stdsl.caches.clear()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    compile_constraint(json.loads(path.read_text())["schema"], max_states=100_000, max_seconds=20,
                                       strict=False)
                except Exception:  # noqa: BLE001 - a refusal's calls count as well
                    pass
    finally:
        determinize.symbol_classes = original
    return calls


def best_seconds(calls: list[tuple[list[Any], int]], threshold: int, repeats: int) -> float:
    """The least time over `repeats` passes of `symbol_classes` over `calls` with `MANY_SETS = threshold`."""
    from stdsl.compiler.automata import symbol_classes as module

    saved = module.MANY_SETS
    module.MANY_SETS = threshold
    try:
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for byte_sets, alphabet in calls:
                module.symbol_classes(byte_sets, alphabet)
            best = min(best, time.perf_counter() - start)
        return best
    finally:
        module.MANY_SETS = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="MaskBench file names, with or without .json")
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "symbol_classes_speed"))
    args = parser.parse_args()
    folder = Path(args.folder)
    files = [folder / (name if name.endswith(".json") else f"{name}.json") for name in args.files]
    files += sorted(folder.glob("*.json"))[::args.every]
    calls = captured_calls(files)

    by_size: dict[int, list[tuple[list[Any], int]]] = defaultdict(list)
    for call in calls:
        by_size[min(len(call[0]) // 8 * 8, 96)].append(call)
    sizes = []
    for low in sorted(by_size):
        group = by_size[low]
        bits, unpacked = (best_seconds(group, threshold, args.repeats) / len(group) * 1e6
                          for threshold in (10**9, 0))
        sizes.append({"sets": f"{low}-{low + 7}" if low < 96 else "96+", "calls": len(group),
                      "bits_us": round(bits, 1), "unpacked_us": round(unpacked, 1)})
    totals = {threshold: round(best_seconds(calls, threshold, args.repeats) * 1e3, 2) for threshold in THRESHOLDS}

    command = "python benchmarks/" + Path(__file__).name + " " + " ".join(sys.argv[1:])
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        {"command": command, "machine": platform.platform(), "files": len(files), "calls": len(calls),
         "by_sets": sizes, "total_ms_by_threshold": totals}, indent=1))
    lines = ["# Symbol classes of the subset construction, per call", "", f"Command: `{command}`  ",
             f"Machine: {platform.platform()}", "",
             f"{len(calls)} calls from compiling {len(files)} MaskBench files (strict=False, caches emptied per "
             f"file); best of {args.repeats} passes.", "",
             "| byte sets | calls | bit by bit (us a call) | unpacked (us a call) |", "|---|---:|---:|---:|"]
    lines += [f"| {row['sets']} | {row['calls']} | {row['bits_us']} | {row['unpacked_us']} |" for row in sizes]
    lines += ["", "| MANY_SETS | all calls (ms) |", "|---:|---:|"]
    lines += [f"| {threshold} | {total} |" for threshold, total in totals.items()]
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
