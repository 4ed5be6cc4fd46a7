"""Two checkouts' JSON Schema compile CPU time, file by file, interleaved (a before/after check on a loaded machine).

Each checkout runs in its own worker process (its `stdsl` first on the path); the driver hands both the same file
in turn, so load changes hit both alike.  A worker first compiles one small schema (its imports are not timed),
then for each file clears every `stdsl.caches` entry, compiles, and reports the process CPU time and the wall time
of the compile (those of the try with the fewest CPU seconds of `--repeats` for a fast schema, one try past 50 ms).
A checkout from before the pushdown body DFAs were a `stdsl.caches` kind kept them in a module dict
(`pushdown.grammar._BODY_DFAS`), which `clear()` left: the worker empties it too, so both sides compile cold.
Reported: percentiles of each side (CPU and wall), files above `--above` seconds of CPU, the median of the per-file
ratio, and files whose outcome differs (there should be none).

    python benchmarks/compile_paired.py /tmp/before --every 10 --out benchmarks/results/compile_paired
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = """
import json, sys, time
import stdsl
import stdsl.caches
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.pushdown import grammar
from stdsl.errors import StdslError
compile_constraint({"type": "object", "properties": {"a": {"type": "string"}, "b": {"enum": [1, "x"]}}})
for line in sys.stdin:
    path, repeats = json.loads(line)
    schema = json.loads(open(path).read())["schema"]
    best, wall, outcome = None, None, "ok"
    for _ in range(repeats):
        stdsl.caches.clear()
        if isinstance(getattr(grammar, "_BODY_DFAS", None), dict):
            grammar._BODY_DFAS.clear()
        began, began_wall = time.process_time(), time.perf_counter()
        try:
            compile_constraint(schema, max_states=100_000, max_seconds=60)
        except StdslError as error:
            outcome = type(error).__name__
        spent, spent_wall = time.process_time() - began, time.perf_counter() - began_wall
        if best is None or spent < best:
            best, wall = spent, spent_wall
        if spent > 0.05:
            break
    print(json.dumps([best, outcome, wall, stdsl.__file__]), flush=True)
"""


def worker(checkout: str) -> subprocess.Popen:
    """A compile worker importing the stdsl of `checkout`: run in that folder, since `python -c` puts the current
    folder ahead of PYTHONPATH (from any other folder holding a `stdsl/`, both workers would import that one)."""
    folder = str(Path(checkout).resolve())
    env = dict(os.environ, PYTHONPATH=folder)
    return subprocess.Popen([sys.executable, "-W", "ignore", "-c", WORKER], env=env, text=True, cwd=folder,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def main(argv: list[str] | None = None) -> int:
    """Compile every k-th MaskBench file in both workers, alternating; write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the other checkout (its stdsl/ folder's parent)")
    parser.add_argument("--after", default=str(REPO))
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--above", type=float, default=0.3, help="CPU seconds: files above it are listed per side")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_paired"))
    args = parser.parse_args(argv)
    files = sorted(Path(args.folder).resolve().glob("*.json"))[::args.every]
    sides = {"before": worker(args.before), "after": worker(args.after)}
    rows: dict[str, dict[str, list]] = {}
    for index, path in enumerate(files):
        order = ("before", "after") if index % 2 == 0 else ("after", "before")
        rows[path.name] = {}
        for side in order:
            process = sides[side]
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps([str(path), args.repeats]) + "\n")
            process.stdin.flush()
            rows[path.name][side] = json.loads(process.stdout.readline())
    for process in sides.values():
        assert process.stdin is not None
        process.stdin.close()
        process.wait()

    def pct(side: str, q: float, column: int = 0) -> float:
        values = sorted(row[side][column] for row in rows.values())
        return round(1e3 * values[min(len(values) - 1, int(q * len(values)))], 2)

    ratios = [row["after"][0] / row["before"][0] for row in rows.values() if row["before"][0] > 0]
    result = {"command": "python benchmarks/compile_paired.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "files": len(rows),
              "cpu_ms": {side: {f"p{int(q * 100)}": pct(side, q) for q in (0.5, 0.9, 0.95, 0.99)}
                         for side in ("before", "after")},
              "wall_ms": {side: {f"p{int(q * 100)}": pct(side, q, 2) for q in (0.5, 0.9, 0.95, 0.99)}
                          for side in ("before", "after")},
              "above": {side: sorted((name for name, row in rows.items() if row[side][0] > args.above),
                                     key=lambda name: -rows[name][side][0]) for side in ("before", "after")},
              "median_ratio_after_over_before": round(statistics.median(ratios), 3),
              "outcome_changed": [name for name, row in rows.items() if row["before"][1] != row["after"][1]],
              "stdsl": {side: sorted({row[side][3] for row in rows.values()}) for side in ("before", "after")},
              "rows": rows}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    lines = ["# JSON Schema compile CPU time, two checkouts interleaved\n", f"Command: `{result['command']}`\n",
             f"{len(rows)} files; process CPU ms of one compile (caches cleared); the median per-file ratio "
             f"after/before is {result['median_ratio_after_over_before']}; outcomes changed: "
             f"{result['outcome_changed'] or 'none'}; stdsl imported from {result['stdsl']['before']} (before) and "
             f"{result['stdsl']['after']} (after).\n",
             "| side | time | p50 | p90 | p95 | p99 |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {side} | {clock} | " + " | ".join(str(v) for v in result[f"{clock}_ms"][side].values()) + " |"
              for clock in ("cpu", "wall") for side in ("before", "after")]
    lines += ["", f"Files above {args.above} s of CPU, slowest first (CPU s before / after):", ""]
    lines += [f"- {side} ({len(result['above'][side])}): " + ", ".join(
        f"`{name}` {rows[name]['before'][0]:.3f} / {rows[name]['after'][0]:.3f}" for name in result["above"][side])
        for side in ("before", "after")]
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
