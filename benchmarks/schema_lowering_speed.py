"""The JSON Schema lowering's CPU time (every `recursive_schema_to_ir` call of a compile, summed) and the compile's,
per named MaskBench file, two checkouts alternating, each compile the first in a fresh fork (`strict=False`).

A file's compile is mostly other stages (subset construction, the pushdown grammar), whose time swings with the host's
speed more than the lowering's share changes: this times the lowering alone, inside the same compiles.  Each checkout
runs in a worker that imported the compiler and compiled nothing; the workers take turns, repeat by repeat.  The
per-file ratio is the median of the repeats' after/before ratios (each pair run back to back).

    python benchmarks/schema_lowering_speed.py /work/main Kubernetes---kb_233_Normalized --repeats 9
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
WORKER = r"""
import json, os, sys, time
import stdsl.caches
from stdsl.compiler.constraint import compile as compile_constraint
import stdsl.compiler.json_schema.recursive as recursive
lowering = recursive.recursive_schema_to_ir
spent = [0.0]


def timed(*args, **kwargs):
    clock = time.process_time()
    try:
        return lowering(*args, **kwargs)
    finally:
        spent[0] += time.process_time() - clock


recursive.recursive_schema_to_ir = timed
for line in sys.stdin:
    schema = json.loads(open(json.loads(line)).read())["schema"]
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        clock = time.process_time()
        try:
            compile_constraint(schema, max_states=100_000, max_seconds=60, strict=False)
            outcome = "ok"
        except Exception as error:
            outcome = type(error).__name__
        total = time.process_time() - clock
        os.write(write, json.dumps([spent[0], total, outcome]).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        print(pipe.read(), flush=True)
    os.wait()
"""


def main(argv: list[str] | None = None) -> int:
    """Compile each named file `--repeats` times per checkout, alternating; print and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the other checkout (its stdsl/ folder's parent)")
    parser.add_argument("files", nargs="+", help="MaskBench file names, with or without .json")
    parser.add_argument("--after", default=str(REPO))
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", default=None, help="write the table here (.md)")
    args = parser.parse_args(argv)
    workers = {side: subprocess.Popen([sys.executable, "-P", "-W", "ignore", "-c", WORKER],
                                      env=dict(os.environ, PYTHONPATH=checkout), text=True, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
               for side, checkout in (("before", args.before), ("after", args.after))}
    lines = ["| file | lowering ms before (median, min) | after (median, min) | lowering ratio (median of pairs) | "
             "compile ms before / after (medians) | outcome |", "|---|---:|---:|---:|---:|---|"]
    print("\n".join(lines), flush=True)
    for name in args.files:
        path = Path(args.folder) / (name if name.endswith(".json") else name + ".json")
        runs: dict[str, list[list]] = {"before": [], "after": []}
        for repeat in range(args.repeats):
            for side in (("before", "after") if repeat % 2 == 0 else ("after", "before")):
                worker = workers[side]
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write(json.dumps(str(path)) + "\n")
                worker.stdin.flush()
                runs[side].append(json.loads(worker.stdout.readline()))
        before, after = runs["before"], runs["after"]
        ratio = statistics.median(b[0] / a[0] for a, b in zip(before, after) if a[0] > 0)
        line = (f"| `{path.stem}` | {statistics.median(r[0] for r in before) * 1000:.1f}, "
                f"{min(r[0] for r in before) * 1000:.1f} | {statistics.median(r[0] for r in after) * 1000:.1f}, "
                f"{min(r[0] for r in after) * 1000:.1f} | {ratio:.2f} | "
                f"{statistics.median(r[1] for r in before) * 1000:.0f} / "
                f"{statistics.median(r[1] for r in after) * 1000:.0f} | {before[0][2]} / {after[0][2]} |")
        lines.append(line)
        print(line, flush=True)
    for worker in workers.values():
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait()
    if args.out:
        command = "python benchmarks/schema_lowering_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.out).write_text(f"Command: `{command}`\n\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
