"""Reply grammars for many tools, this tree against another checkout (main) of stdsl: `tool_compile.py`'s stdsl
runs (cold and with one tool changed, build + first mask, process CPU seconds) in alternating processes, each tree
running its own copy of the script, so that a shared machine's load falls on both alike.  Reports the median and
range over the rounds per tree and the median ratio.  Writes benchmarks/results/tool_compile_ab.{md,json}.

    python benchmarks/tool_compile_ab.py --base /work/main --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
HERE = BENCH_DIR.parent


def _run(tree: Path, sizes: list[int], formats: list[str]) -> list[dict[str, Any]]:
    """One `tool_compile.py` run of `tree` (its own script and package, no peers): its rows."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run"
        environment = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run(["nice", "-n", "5", sys.executable, str(tree / "benchmarks" / "tool_compile.py"), "--peers",
                        "--sizes", *map(str, sizes), "--formats", *formats, "--out", str(out)],
                       cwd=tree, env=environment, check=True, stdout=subprocess.DEVNULL)
        rows: list[dict[str, Any]] = json.loads(out.with_suffix(".json").read_text())["rows"]
        return rows


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the other checkout (its root), e.g. /work/main")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 128, 400])
    parser.add_argument("--formats", nargs="+", default=["hermes", "qwen_xml", "harmony"])
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "tool_compile_ab"))
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    trees = {"base": Path(args.base).resolve(), "this": HERE}
    runs: dict[str, list[list[dict[str, Any]]]] = {"base": [], "this": []}
    loads = [_load()]
    for round_number in range(args.rounds):
        for label in (("base", "this") if round_number % 2 == 0 else ("this", "base")):
            runs[label].append(_run(trees[label], args.sizes, args.formats))
            loads.append(_load())
            print(label, round_number, "load", loads[-1], flush=True)
    table = []
    for index, row in enumerate(runs["base"][0]):
        entry: dict[str, Any] = {"tools": row["tools"], "format": row["format"]}
        for build in ("cold", "changed"):
            for label in ("base", "this"):
                values = [run[index][f"stdsl_{build}"]["cpu_s"] for run in runs[label]]
                entry[f"{label}_{build}"] = values
            entry[f"states_{build}"] = {label: runs[label][0][index][f"stdsl_{build}"]["states"]
                                        for label in ("base", "this")}
        table.append(entry)
    command = "python benchmarks/tool_compile_ab.py " + " ".join(sys.argv[1:])
    result = {"command": command.strip(), "machine": platform.platform(), "trees": {k: str(v) for k, v in
                                                                                     trees.items()},
              "load_averages": loads, "rows": table, "note": args.note}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    Path(args.out + ".md").write_text(_markdown(result))


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def _markdown(result: dict[str, Any]) -> str:
    lines = ["# Reply grammars for many tools: this tree against the base checkout, process CPU seconds", "",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']} (shared)  ",
             f"Trees: base `{result['trees']['base']}`, this `{result['trees']['this']}`  ",
             f"Load averages (1, 5, 15 min) before and after each run: {'; '.join(result['load_averages'])}", "",
             "Each cell: `tool_compile.py`'s stdsl build + first mask (`build_constraint`, then `RowCache.token_mask` "
             "of the start state on the Qwen3.5 vocabulary), process CPU seconds, median (range) over the rounds; "
             "cold empties every cache first, changed is the same list with one tool's schema replaced, built right "
             "after.  The trees run alternately, each its own copy of the script.", "",
             "| tools | format | base cold | this cold | this/base | base changed | this changed | this/base "
             "| states (base / this) |", "|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        ratio = {build: statistics.median(row[f"this_{build}"]) / statistics.median(row[f"base_{build}"])
                 for build in ("cold", "changed")}
        states = row["states_cold"]
        lines.append(f"| {row['tools']} | {row['format']} | {_cell(row['base_cold'])} | {_cell(row['this_cold'])} | "
                     f"{ratio['cold']:.2f} | {_cell(row['base_changed'])} | {_cell(row['this_changed'])} | "
                     f"{ratio['changed']:.2f} | {states['base']} / {states['this']} |")
    if result["note"]:
        lines += ["", result["note"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
