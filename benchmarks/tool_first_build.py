"""A tool list's first reply build in a fresh process, this tree against another checkout: wall, user and system CPU
seconds, minor page faults and the peak memory it adds.

`tool_compile.py` times cold builds in one process, where every build after the first reuses the memory the one
before freed.  A process's first build of a large list writes fresh pages, and numpy asks the kernel for huge pages
for every array of 4 MB or more: where transparent huge pages are `madvise` with `defrag=madvise` (a common Linux
default), the first touch of such an array may stall while the kernel compacts memory, system time that varies from
run to run.  This measures what a server pays the first time it meets a list: each (size, format) is built once per
process, after one small regex compile (imports and first-use memos untimed), the trees alternating round by round
on the same random tools (`random_tools.py`).

    python benchmarks/tool_first_build.py /tmp/base --sizes 128 400 --rounds 5 --out benchmarks/results/NAME
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
HERE = BENCH_DIR.parent
FORMATS = ("hermes", "qwen_xml", "harmony")
WORKER = """
import json, os, resource, sys, time
tree, bench, size, tool_format = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sys.path[:0] = [tree, bench]
import stdsl
assert os.path.realpath(stdsl.__file__).startswith(os.path.realpath(tree) + os.sep), stdsl.__file__
from stdsl.compiler.constraint_spec import build_constraint
from random_tools import random_tools
tools = random_tools(size, seed=size)
spec = {"kind": "tools", "format": tool_format, "choice": "auto", "parallel": True, "content": None,
        "tools": [{"name": t["function"]["name"], "parameters": t["function"]["parameters"]} for t in tools]}
build_constraint({"kind": "regex", "pattern": "a"}, 600)
before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
states = build_constraint(spec, 600).num_states
wall, after = time.perf_counter() - wall, resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "user": after.ru_utime - before.ru_utime, "sys": after.ru_stime - before.ru_stime,
                  "faults": after.ru_minflt - before.ru_minflt, "peak_mb": (after.ru_maxrss - before.ru_maxrss) / 1024,
                  "states": states}))
"""
MEASURES = ("wall", "user", "sys", "faults", "peak_mb")


def _build(tree: Path, size: int, tool_format: str) -> dict[str, float]:
    """One first build in a fresh process of `tree`'s stdsl."""
    done = subprocess.run([sys.executable, "-c", WORKER, str(tree), str(BENCH_DIR), str(size), tool_format],
                          check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _markdown(result: dict[str, Any]) -> str:
    lines = ["# A tool list's first reply build in a fresh process", "",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']}; load {result['loads'][0]} at the "
             f"start, {result['loads'][-1]} at the end; base `{result['base']}`", "",
             "Medians over the rounds (each a fresh process per tree, the trees alternating): wall, user and system "
             "CPU seconds of the build, minor page faults, and the peak resident memory it adds (MB).", "",
             "| tools | format | wall base / this | user base / this | sys base / this | faults base / this | "
             "peak MB base / this | states |", "|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        cells = [f"{row['base'][key]:.3f} / {row['this'][key]:.3f}" if key in ("wall", "user", "sys")
                 else f"{row['base'][key]:.0f} / {row['this'][key]:.0f}" for key in MEASURES]
        lines.append(f"| {row['tools']} | {row['format']} | " + " | ".join(cells) + f" | {row['states']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the other checkout's root")
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 400])
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "tool_first_build"))
    args = parser.parse_args()
    trees = {"base": Path(args.base).resolve(), "this": HERE}
    loads = [" ".join(f"{value:.2f}" for value in os.getloadavg())]
    runs: dict[tuple[int, str, str], list[dict[str, float]]] = {}
    for round_number in range(args.rounds):
        for size in args.sizes:
            for tool_format in args.formats:
                for label in ("base", "this") if round_number % 2 == 0 else ("this", "base"):
                    runs.setdefault((size, tool_format, label), []).append(_build(trees[label], size, tool_format))
        loads.append(" ".join(f"{value:.2f}" for value in os.getloadavg()))
        print("round", round_number, "load", loads[-1], flush=True)
    rows = []
    for size in args.sizes:
        for tool_format in args.formats:
            row: dict[str, Any] = {"tools": size, "format": tool_format,
                                   "states": runs[(size, tool_format, "this")][0]["states"]}
            for label in ("base", "this"):
                measured = runs[(size, tool_format, label)]
                row[label] = {key: statistics.median(run[key] for run in measured) for key in MEASURES}
                row[label + "_runs"] = measured
            rows.append(row)
    result = {"command": "python benchmarks/tool_first_build.py " + " ".join(sys.argv[1:]),
              "machine": platform.platform(), "base": str(trees["base"]), "loads": loads, "rows": rows}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    Path(args.out + ".md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
