"""Two checkouts' JSON Schema compile CPU time, file by file, interleaved (a before/after check on a loaded machine).

Each checkout runs in its own worker process (its `stdsl` first on the path); the driver hands both the same file
in turn, so load changes hit both alike.  A worker first compiles one small schema (its imports are not timed),
then for each file clears every `stdsl.caches` entry, compiles, and reports the process CPU time and the wall time
of the compile (those of the try with the fewest CPU seconds of `--repeats` for a fast schema, one try past 50 ms).
A checkout from before the pushdown body DFAs were a `stdsl.caches` kind kept them in a module dict
(`pushdown.grammar._BODY_DFAS`), which `clear()` left: the worker empties it too, so both sides compile cold.
Reported: percentiles of each side (CPU and wall), files above `--above` seconds of CPU, the median of the per-file
ratio, and files whose outcome differs (there should be none).

With `--forked` a worker imports the compiler, compiles nothing, and compiles each file once in a child forked for
it, as `jsonschema_coverage.py` does (`strict=False` there, `--strict` for the default): what a schema costs a
process that has compiled nothing before, where the warm worker's per-process memos (the free-form value's DFA,
kept pushdown bodies, leaf caches) are already filled.

    python benchmarks/compile_paired.py /tmp/before --every 10 --out benchmarks/results/compile_paired
    python benchmarks/compile_paired.py /tmp/before --every 10 --forked --out benchmarks/results/compile_paired_forked
    python benchmarks/compile_paired.py /tmp/before --every 1 --match Kubernetes--- --forked --out /tmp/kubernetes
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
import json, os, sys, time
import stdsl.caches
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.pushdown import grammar
from stdsl.errors import StdslError
checkout, forked, strict = json.loads(sys.argv[1])
assert os.path.realpath(stdsl.caches.__file__).startswith(os.path.realpath(checkout) + os.sep), stdsl.caches.__file__


def compile_once(schema):
    began, clock = time.perf_counter(), time.process_time()
    try:
        compile_constraint(schema, max_states=100_000, max_seconds=60, strict=strict)
        outcome = "ok"
    except StdslError as error:
        outcome = type(error).__name__
    return time.process_time() - clock, outcome, time.perf_counter() - began


def in_child(schema):
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        os.write(write, json.dumps(compile_once(schema)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        found = json.loads(pipe.read())
    os.waitpid(child, 0)
    return found


if not forked:
    compile_constraint({"type": "object", "properties": {"a": {"type": "string"}, "b": {"enum": [1, "x"]}}})
for line in sys.stdin:
    path, repeats = json.loads(line)
    schema = json.loads(open(path).read())["schema"]
    if forked:
        print(json.dumps(in_child(schema)), flush=True)
        continue
    best = None
    for _ in range(repeats):
        stdsl.caches.clear()
        if isinstance(getattr(grammar, "_BODY_DFAS", None), dict):
            grammar._BODY_DFAS.clear()
        found = compile_once(schema)
        best = found if best is None or found[0] < best[0] else best
        if found[0] > 0.05:
            break
    print(json.dumps(best), flush=True)
"""


def worker(checkout: str, forked: bool, strict: bool) -> subprocess.Popen:
    """A compile worker importing the stdsl of `checkout` (compiling each schema in a forked child if `forked`);
    `-P` keeps the working directory off its path, which would otherwise put the checkout run from first."""
    env = dict(os.environ, PYTHONPATH=checkout)
    command = [sys.executable, "-P", "-W", "ignore", "-c", WORKER, json.dumps([checkout, forked, strict])]
    return subprocess.Popen(command, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def main(argv: list[str] | None = None) -> int:
    """Compile every k-th MaskBench file in both workers, alternating; write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the other checkout (its stdsl/ folder's parent)")
    parser.add_argument("--after", default=str(REPO))
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--offset", type=int, default=0, help="the files taken are files[offset::every]")
    parser.add_argument("--match", default="", help="only files whose name contains this (e.g. Kubernetes---)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--forked", action="store_true",
                        help="each compile the first in a child forked from a worker that compiled nothing")
    parser.add_argument("--strict", action="store_true",
                        help="with --forked, compile with strict=True (the default is jsonschema_coverage's False)")
    parser.add_argument("--open", action="store_true",
                        help="without --forked, compile with strict=False (jsonschema_coverage's and "
                             "compile_settings.py's setting; the default is strict=True)")
    parser.add_argument("--above", type=float, default=0.3, help="CPU seconds: files above it are listed per side")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_paired"))
    args = parser.parse_args(argv)
    strict = args.strict or not (args.forked or args.open)
    files = sorted(path for path in Path(args.folder).resolve().glob("*.json") if args.match in path.name)
    files = files[args.offset::args.every]
    sides = {"before": worker(args.before, args.forked, strict), "after": worker(args.after, args.forked, strict)}
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

    quantiles = (0.5, 0.9, 0.95, 0.99)
    ratios = [row["after"][0] / row["before"][0] for row in rows.values() if row["before"][0] > 0]
    result = {"command": "python benchmarks/compile_paired.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "files": len(rows), "forked": args.forked, "strict": strict,
              "cpu_ms": {side: {f"p{int(q * 100)}": pct(side, q) for q in quantiles} for side in ("before", "after")},
              "wall_ms": {side: {f"p{int(q * 100)}": pct(side, q, 2) for q in quantiles}
                          for side in ("before", "after")},
              "above": {side: sorted((name for name, row in rows.items() if row[side][0] > args.above),
                                     key=lambda name: -rows[name][side][0]) for side in ("before", "after")},
              "median_ratio_after_over_before": round(statistics.median(ratios), 3),
              "outcome_changed": [name for name, row in rows.items() if row["before"][1] != row["after"][1]],
              "rows": rows}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    how = ("the first in a child forked from a worker that compiled nothing" if args.forked
           else "caches cleared, the fewest of the tries")
    lines = ["# JSON Schema compile CPU time, two checkouts interleaved\n", f"Command: `{result['command']}`\n",
             f"{len(rows)} files; process CPU and wall ms of one compile ({how}; strict={strict}); the median "
             f"per-file CPU ratio after/before is {result['median_ratio_after_over_before']}; outcomes changed: "
             f"{result['outcome_changed'] or 'none'}.\n",
             "| side | CPU p50 | CPU p90 | CPU p95 | CPU p99 | wall p50 | wall p90 | wall p95 | wall p99 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {side} | " + " | ".join(str(v) for v in [*result["cpu_ms"][side].values(),
                                                            *result["wall_ms"][side].values()]) + " |"
              for side in ("before", "after")]
    lines += ["", f"Files above {args.above} s of CPU, slowest first (CPU s before / after):", ""]
    lines += [f"- {side} ({len(result['above'][side])}): " + ", ".join(
        f"`{name}` {rows[name]['before'][0]:.3f} / {rows[name]['after'][0]:.3f}" for name in result["above"][side])
        for side in ("before", "after")]
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
