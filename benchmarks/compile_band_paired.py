"""The MaskBench median band's forked first compile, two checkouts alternating: mean and median CPU ms and minor
page faults per compile, and the per-compile CPU ratio second/first.

The band is the `--band` files around the p50 of the first checkout's forked compiles of every `--every`-th
MaskBench file (one pass, picked before the rounds); each checkout has a worker that imported the compiler and
compiled nothing and forks a child per compile (`strict=False`); the workers take turns file by file, and swap who
goes first every round, so load falls on both alike.

    python benchmarks/compile_band_paired.py /work/BASE --after /work/AFTER --rounds 8
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = r"""
import json, os, sys, time, resource
sys.path.insert(0, sys.argv[1])
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.errors import StdslError
import stdsl
assert stdsl.__file__.startswith(sys.argv[1]), stdsl.__file__
for line in sys.stdin:
    schema = json.load(open(line.strip()))['schema']
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        faults, clock = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
        try:
            compile_constraint(schema, max_states=100_000, max_seconds=60, strict=False)
        except StdslError:
            pass
        cpu = time.process_time() - clock
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        os.write(w, json.dumps([cpu, faults]).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as pipe:
        out = pipe.read()
    os.waitpid(pid, 0)
    print(out, flush=True)
"""


def _compiled(worker: subprocess.Popen, path: Path) -> list[float]:
    """One forked compile of `path` by `worker`: [CPU s, minor page faults]."""
    stdin, stdout = worker.stdin, worker.stdout
    assert stdin is not None and stdout is not None
    stdin.write(f"{path}\n")
    stdin.flush()
    found: list[float] = json.loads(stdout.readline())
    return found


def main() -> None:
    """Pick the band on the first checkout, then compile it `--rounds` times on both, alternating; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the first checkout (its stdsl/ folder's parent)")
    parser.add_argument("--after", default=str(REPO))
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--band", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    first, second = args.before, args.after
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, checkout], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
               for checkout in (first, second)]
    sample = sorted(Path(args.folder).glob("*.json"))[::args.every]
    by_time = sorted(sample, key=lambda path: _compiled(workers[0], path)[0])
    middle = len(by_time) // 2
    files = by_time[max(0, middle - args.band // 2):middle + (args.band + 1) // 2]
    results: list[list[list[float]]] = [[], []]
    for round_number in range(args.rounds):
        for path in files:
            for side in ((0, 1) if round_number % 2 == 0 else (1, 0)):
                results[side].append(_compiled(workers[side], path))
    for checkout, rows in zip((first, second), results):
        cpu = [row[0] * 1e3 for row in rows]
        print(f"{checkout} mean {statistics.mean(cpu):.3f} ms median {statistics.median(cpu):.3f} ms "
              f"faults {statistics.mean(row[1] for row in rows):.0f}")
    ratios = [after[0] / before[0] for before, after in zip(*results)]
    total = sum(row[0] for row in results[1]) / sum(row[0] for row in results[0])
    print(f"per-compile CPU ratio second/first: median {statistics.median(ratios):.3f}, of the sums {total:.3f}")


if __name__ == "__main__":
    main()
