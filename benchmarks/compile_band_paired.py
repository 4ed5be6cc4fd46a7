"""The MaskBench median band's forked first compile, two checkouts alternating: mean and median CPU ms and minor
page faults per compile, and the per-compile CPU ratio second/first.

The band is the 30 files around the p50 of a `/work/briefs/forked_all.py` result (every 10th file); each checkout
has a worker that imported the compiler and compiled nothing and forks a child per compile (`strict=False`); the
workers take turns file by file, and swap who goes first every round, so load falls on both alike.

    python benchmarks/compile_band_paired.py /work/BASE /work/AFTER forked_all_result.json 8
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

SAMPLE = "/work/shared/jsonschemabench/maskbench-sample/"
WORKER = r"""
import json, os, sys, time, resource
sys.path.insert(0, sys.argv[1])
from stdsl.compiler.constraint import compile as compile_constraint
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
        except Exception:
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


def main() -> None:
    first, second, forked_all, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    by_time = sorted(json.load(open(forked_all)).items(), key=lambda item: item[1][0])
    middle = len(by_time) // 2
    files = [SAMPLE + name for name, _ in by_time[middle - 15:middle + 15]]
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, checkout], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
               for checkout in (first, second)]
    results: list[list[list[float]]] = [[], []]
    for round_number in range(rounds):
        for path in files:
            for side in ((0, 1) if round_number % 2 == 0 else (1, 0)):
                stdin, stdout = workers[side].stdin, workers[side].stdout
                assert stdin is not None and stdout is not None
                stdin.write(path + "\n")
                stdin.flush()
                results[side].append(json.loads(stdout.readline()))
    for checkout, rows in zip((first, second), results):
        cpu = [row[0] * 1e3 for row in rows]
        print(f"{checkout} mean {statistics.mean(cpu):.3f} ms median {statistics.median(cpu):.3f} ms "
              f"faults {statistics.mean(row[1] for row in rows):.0f}")
    ratios = [after[0] / before[0] for before, after in zip(*results)]
    total = sum(row[0] for row in results[1]) / sum(row[0] for row in results[0])
    print(f"per-compile CPU ratio second/first: median {statistics.median(ratios):.3f}, of the sums {total:.3f}")


if __name__ == "__main__":
    main()
