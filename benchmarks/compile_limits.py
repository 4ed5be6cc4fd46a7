"""Time to refusal (or compile) and peak memory of overlapping `oneOf` schemas under a compile time limit.

Issue 28's family: `n` objects under `oneOf`, each with six integer properties `k0`..`k5` whose bounds
overlap and two required names, so no two branches are provably disjoint and each is subtracted from
the others.  Every case runs in a fresh process (the stdsl on `--pythonpath`, default this checkout),
watched from outside: wall and CPU time from the call to its answer (the limit is wall time; on a loaded
machine CPU time shows the work done), peak resident memory (VmHWM), and a
hard stop at `--cap` seconds, so a compile that ignores its limit is reported as still running.
Writes a markdown table to stdout (benchmarks/results/compile_limits.md holds the committed run).

    python benchmarks/compile_limits.py                                  # this checkout
    python benchmarks/compile_limits.py --pythonpath /tmp/old --cap 120  # an older tree, checked out apart
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = [(8, 5.0), (9, 5.0), (10, 5.0), (11, 5.0), (12, 5.0), (12, 40.0)]
CHILD = r"""
import json, sys, time
import stdsl, stdsl.compiler.constraint, stdsl.compiler.json_schema.flatten
schema = json.loads(sys.stdin.read())
print("start", flush=True)
start, cpu = time.perf_counter(), time.process_time()
try:
    stdsl.compile(schema, max_seconds=float(sys.argv[1]))
    outcome = "compiled"
except Exception as error:
    outcome = type(error).__name__ + ": " + str(error).split(";")[0]
print(json.dumps({"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu, "outcome": outcome}),
      flush=True)
"""


def one_of_family(objects: int) -> dict:
    """`objects` open objects with overlapping integer members under `oneOf`."""
    branches = []
    for i in range(objects):
        members = {f"k{j}": {"type": "integer", "minimum": (i + j) % 5, "maximum": 10 + i} for j in range(6)}
        branches.append({"type": "object", "properties": members, "required": [f"k{i % 6}", f"k{(i + 1) % 6}"]})
    return {"oneOf": branches}


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM) in MB, 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """The process's user plus system CPU seconds so far (/proc/PID/stat), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_case(objects: int, limit: float, pythonpath: str, cap: float) -> dict:
    """Compile one schema of the family in a fresh process; its time from the call, outcome and peak memory."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(limit)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env, cwd=pythonpath)
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(json.dumps(one_of_family(objects)))
    child.stdin.close()
    child.stdout.readline()
    started, peak, cpu_at_start, cpu = time.perf_counter(), 0.0, cpu_seconds(child.pid), 0.0
    while child.poll() is None and time.perf_counter() - started < cap:
        peak, cpu = max(peak, peak_rss_mb(child.pid)), cpu_seconds(child.pid) or cpu
        time.sleep(0.1)
    if child.poll() is None:
        peak, cpu = max(peak, peak_rss_mb(child.pid)), cpu_seconds(child.pid) or cpu
        child.kill()
        child.wait()
        return {"objects": objects, "limit": limit, "seconds": None, "cpu": cpu - cpu_at_start,
                "outcome": f"still running at {cap:g} s", "peak_mb": peak}
    result = json.loads(child.stdout.read().strip().splitlines()[-1])
    return {"objects": objects, "limit": limit, "seconds": result["seconds"], "cpu": result["cpu"],
            "outcome": result["outcome"], "peak_mb": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pythonpath", default=str(REPO), help="the tree whose stdsl is measured")
    parser.add_argument("--cap", type=float, default=120.0, help="seconds after which a case is stopped")
    args = parser.parse_args()
    print("| objects | bytes | max_seconds | wall s | over the limit | CPU s | peak RSS (MB) | outcome |")
    print("|---|---|---|---|---|---|---|---|")
    for objects, limit in CASES:
        row = run_case(objects, limit, args.pythonpath, args.cap)
        seconds = "—" if row["seconds"] is None else f"{row['seconds']:.2f}"
        over = "—" if row["seconds"] is None else f"{100 * (row['seconds'] / limit - 1):+.1f}%"
        size = len(json.dumps(one_of_family(objects)))
        print(f"| {objects} | {size} | {limit:g} | {seconds} | {over} | {row['cpu']:.1f} | {row['peak_mb']:.0f} "
              f"| {row['outcome']} |", flush=True)


if __name__ == "__main__":
    main()
