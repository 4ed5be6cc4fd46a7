"""Named MaskBench schemas compiled again and again in fresh forks, two checkouts alternating: CPU, user and system
time and page faults per compile.

A schema whose compile writes large tables pays for their fresh pages in system time, and numpy asks for huge pages
on arrays past 4 MB, which the kernel may compact memory to give (`defrag=madvise`): the same compile then takes
0.2 s in one fork and 0.5 s in the next (issue 36's o9870).  One forked compile per file, as `compile_paired.py
--forked` takes, cannot tell that apart from a slower build; this repeats it.  Each checkout runs in a worker of its
own that imported the compiler and compiled nothing, and forks a child per compile (`strict=False`, as
`jsonschema_coverage.py`); the workers take turns, file by file and repeat by repeat, so load falls on both alike.

    python benchmarks/compile_forked_repeats.py /work/base-NAME Github_easy---o9870 --repeats 5 \\
        --out benchmarks/results/compile_forked_repeats_NAME

`--max-seconds 9.5` with files refused at the time limit shows how long after the limit the refusal answers.
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
import json, os, resource, sys, time
import stdsl.caches
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.errors import StdslError
checkout, max_seconds = sys.argv[1], float(sys.argv[2])
assert os.path.realpath(stdsl.caches.__file__).startswith(os.path.realpath(checkout) + os.sep), stdsl.caches.__file__


def compile_once(schema):
    before, clock, wall = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
    try:
        compile_constraint(schema, max_states=100_000, max_seconds=max_seconds, strict=False)
        outcome = "ok"
    except StdslError as error:
        outcome = type(error).__name__
    cpu, after = time.process_time() - clock, resource.getrusage(resource.RUSAGE_SELF)
    return {"wall": time.perf_counter() - wall, "cpu": cpu, "user": after.ru_utime - before.ru_utime,
            "sys": after.ru_stime - before.ru_stime,
            "faults": after.ru_minflt - before.ru_minflt, "outcome": outcome}


for line in sys.stdin:
    schema = json.loads(open(json.loads(line)).read())["schema"]
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        os.write(write, json.dumps(compile_once(schema)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        print(pipe.read(), flush=True)
    os.waitpid(child, 0)
"""


def _each(runs: list[dict], key: str) -> str:
    """One column's value of every run, in run order."""
    return ", ".join(f"{run[key]:.3f}" for run in runs)


def _median(runs: list[dict], key: str) -> float:
    """One column's median over the runs."""
    return float(statistics.median(run[key] for run in runs))


def main(argv: list[str] | None = None) -> int:
    """Compile each named file `--repeats` times per checkout, alternating; write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the other checkout (its stdsl/ folder's parent)")
    parser.add_argument("files", nargs="+", help="MaskBench file names, with or without .json")
    parser.add_argument("--after", default=str(REPO))
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-seconds", type=float, default=60.0,
                        help="the compile time limit (a refusal at it answers within it: wall past the limit)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_forked_repeats"))
    args = parser.parse_args(argv)
    sides = {}
    for side, checkout in (("before", args.before), ("after", args.after)):
        env = dict(os.environ, PYTHONPATH=checkout)
        sides[side] = subprocess.Popen([sys.executable, "-P", "-W", "ignore", "-c", WORKER, checkout,
                                        str(args.max_seconds)], env=env,
                                       text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    load_before = os.getloadavg()
    rows: dict[str, dict[str, list[dict]]] = {}
    for name in args.files:
        path = Path(args.folder) / (name if name.endswith(".json") else name + ".json")
        rows[path.name] = {"before": [], "after": []}
        for repeat in range(args.repeats):
            for side in (("before", "after") if repeat % 2 == 0 else ("after", "before")):
                process = sides[side]
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write(json.dumps(str(path)) + "\n")
                process.stdin.flush()
                rows[path.name][side].append(json.loads(process.stdout.readline()))
    for process in sides.values():
        assert process.stdin is not None
        process.stdin.close()
        process.wait()
    result = {"command": "python benchmarks/compile_forked_repeats.py " + " ".join(
        argv if argv is not None else sys.argv[1:]), "load_before": [round(v, 2) for v in load_before],
        "load_after": [round(v, 2) for v in os.getloadavg()], "rows": rows}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    lines = ["# Forked compiles repeated, two checkouts alternating\n", f"Command: `{result['command']}`\n",
             f"Load average before / after: {result['load_before']} / {result['load_after']}.  Per file and side: "
             f"{args.repeats} compiles, each the first in a fresh fork (`strict=False`, `max_seconds="
             f"{args.max_seconds:g}`); CPU = user + system; wall from the compile's call to its answer.\n",
             "| file | side | CPU s (each) | CPU median | user median | system (each) | page faults | wall s (each) "
             "| outcome |",
             "|---|---|---|---:|---:|---|---:|---|---|"]
    for name, per_side in rows.items():
        for side in ("before", "after"):
            runs = per_side[side]
            lines.append(f"| `{name}` | {side} | {_each(runs, 'cpu')} | {_median(runs, 'cpu'):.3f} | "
                         f"{_median(runs, 'user'):.3f} | {_each(runs, 'sys')} | {_median(runs, 'faults'):.0f} | "
                         f"{_each(runs, 'wall')} | {runs[0]['outcome']} |")
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
