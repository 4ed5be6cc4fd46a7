"""What the collector pause (`stdsl.compiler.collector_pause`) buys and costs: CPU and peak memory of MaskBench
compiles with the compile thresholds against Python's own, in the same checkout and the same sitting.

One worker imports the compiler and compiles nothing; each compile is the first in a child forked from it
(`strict=False`, 100,000 states, as `jsonschema_coverage.py`).  In a "python" child `COMPILE_THRESHOLDS` is set
to zeros, so the pause leaves Python's thresholds (700, 10, 10) as they are; in a "paused" child it runs as
shipped.  The two modes alternate file by file and repeat by repeat, so load falls on both alike.  Memory is the
child's peak resident set less its resident set when the compile began.

    python benchmarks/compile_collector.py --every 10 --repeats 1 --out benchmarks/results/compile_collector
    python benchmarks/compile_collector.py --files Github_ultra---o48404 MCPspec---ServerResult --repeats 3
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stdsl.compiler import collector_pause  # noqa: E402
from stdsl.compiler.constraint import compile as compile_constraint  # noqa: E402
from stdsl.errors import StdslError  # noqa: E402

MODES = ("python", "paused")


def _resident_mb() -> float:
    """This process's resident set now, in MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _compile_once(schema: object, mode: str) -> dict:
    """One compile in this (forked) process under `mode`: CPU s, peak memory growth in MB, the collector's passes
    (all generations), outcome."""
    if mode == "python":
        collector_pause.COMPILE_THRESHOLDS = (0, 0, 0)
    collected = sum(generation["collections"] for generation in gc.get_stats())
    resident, clock = _resident_mb(), time.process_time()
    try:
        compile_constraint(schema, max_states=100_000, max_seconds=60, strict=False)
        outcome = "ok"
    except StdslError as error:
        outcome = type(error).__name__
    cpu = time.process_time() - clock
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"cpu": cpu, "memory": max(0.0, peak - resident), "outcome": outcome,
            "collections": sum(generation["collections"] for generation in gc.get_stats()) - collected}


def _forked(schema: object, mode: str) -> dict:
    """`_compile_once` in a child forked for it."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        os.write(write, json.dumps(_compile_once(schema, mode)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        found = json.loads(pipe.read())
    os.waitpid(child, 0)
    return found


def main(argv: list[str] | None = None) -> int:
    """Compile the chosen files in both modes, alternating; write the table and the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10, help="every n-th file of the folder, sorted by name")
    parser.add_argument("--files", nargs="*", help="named files instead (with or without .json)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_collector"))
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    paths = ([folder / (name if name.endswith(".json") else name + ".json") for name in args.files] if args.files
             else sorted(folder.glob("*.json"))[::args.every])
    rows: dict[str, dict[str, list[dict]]] = {}
    for number, path in enumerate(paths):
        schema = json.loads(path.read_text())["schema"]
        rows[path.name] = {mode: [] for mode in MODES}
        for repeat in range(args.repeats):
            for mode in (MODES if (number + repeat) % 2 == 0 else MODES[::-1]):
                rows[path.name][mode].append(_forked(schema, mode))
    per_file = {name: {mode: {key: statistics.median(run[key] for run in runs[mode])
                              for key in ("cpu", "memory", "collections")} | {"outcome": runs[mode][0]["outcome"]}
                       for mode in MODES} for name, runs in rows.items()}
    ratios = [file["paused"]["cpu"] / file["python"]["cpu"] for file in per_file.values() if file["python"]["cpu"]]
    totals = {mode: sum(file[mode]["cpu"] for file in per_file.values()) for mode in MODES}
    changed = [name for name, file in per_file.items() if file["python"]["outcome"] != file["paused"]["outcome"]]
    command = "python benchmarks/compile_collector.py " + " ".join(argv if argv is not None else sys.argv[1:])
    Path(args.out).with_suffix(".json").write_text(json.dumps({"command": command, "rows": rows}, indent=1))
    lines = ["# Compile CPU and memory with the collector pause against Python's thresholds\n",
             f"Command: `{command}`\n",
             f"{len(per_file)} files, {args.repeats} forked compile(s) per file and mode (medians); CPU of all files "
             f"{totals['python']:.2f} s with Python's thresholds, {totals['paused']:.2f} s paused "
             f"({totals['paused'] / totals['python']:.3f}x); median per-file ratio "
             f"{statistics.median(ratios):.3f}; outcomes changed: {', '.join(changed) or 'none'}.\n",
             "Files above 0.1 s of CPU with Python's thresholds, slowest first:\n",
             "| file | CPU s python | CPU s paused | ratio | collections python / paused | memory MB python | "
             "memory MB paused | outcome |", "|---|---:|---:|---:|---|---:|---:|---|"]
    for name, file in sorted(per_file.items(), key=lambda item: -item[1]["python"]["cpu"]):
        if file["python"]["cpu"] < 0.1:
            continue
        python, paused = file["python"], file["paused"]
        lines.append(f"| `{name}` | {python['cpu']:.3f} | {paused['cpu']:.3f} | {paused['cpu'] / python['cpu']:.2f} | "
                     f"{python['collections']:.0f} / {paused['collections']:.0f} | {python['memory']:.0f} | "
                     f"{paused['memory']:.0f} | {paused['outcome']} |")
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
