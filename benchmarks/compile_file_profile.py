"""Where named MaskBench schemas' compiles go: each compiled once under cProfile in a fresh process of its own.

A fresh process pays what the coverage benchmark's forked workers pay (no memo of an earlier compile), so a refusal's
cost is all there.  Per schema: the outcome under `--max-seconds` (the deadline is wall time, so a loaded machine
refuses sooner), its process CPU time (profiled, so Python-heavy stages look slower than they are), the two stages
with the most own time (stages as in `compile_profile.py`) and the three functions with the most own time.

Usage: python benchmarks/compile_file_profile.py Github_easy---o6237 Github_medium---o15711 ... \
           [--checkout /work/base-NAME] --out benchmarks/results/compile_file_profile_NAME
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = """
import cProfile, json, pstats, sys, time, warnings
from collections import defaultdict
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from compile_profile import stage_of
import stdsl.caches
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.errors import StdslError
warnings.simplefilter("ignore")
assert stdsl.caches.__file__.startswith(sys.argv[4]), stdsl.caches.__file__
schema = json.loads(Path(sys.argv[1]).read_text())["schema"]
profiler = cProfile.Profile(time.process_time)
began = time.process_time()
profiler.enable()
try:
    compile_constraint(schema, max_states=100_000, max_seconds=float(sys.argv[2]), strict=False)
    outcome = "ok"
except StdslError as error:
    outcome = type(error).__name__
profiler.disable()
cpu = time.process_time() - began
stages = defaultdict(float)
functions = []
for (filename, line, name), (_cc, _nc, own, _cum, _callers) in pstats.Stats(profiler).stats.items():
    stages[stage_of(filename)] += own
    functions.append((own, f"{Path(filename).parent.name}/{Path(filename).name}:{line} {name}"))
total = sum(stages.values()) or 1.0
print(json.dumps({"outcome": outcome, "cpu_s": round(cpu, 2),
                  "stages": [[s, round(v / total, 2)] for s, v in sorted(stages.items(), key=lambda kv: -kv[1])[:2]],
                  "functions": [[f, round(own, 2)] for own, f in sorted(functions, reverse=True)[:3]]}))
"""


def profile_file(path: Path, max_seconds: float, checkout: str) -> dict:
    """One schema's profile row, from a fresh Python process importing `checkout`'s stdsl."""
    env = dict(os.environ, PYTHONPATH=checkout)
    done = subprocess.run([sys.executable, "-P", "-c", WORKER, str(path), str(max_seconds), str(REPO / "benchmarks"),
                           os.path.realpath(checkout)],
                          capture_output=True, text=True, env=env, check=True)
    return {"file": path.stem, **json.loads(done.stdout.strip().splitlines()[-1])}


def markdown(result: dict) -> str:
    """The rows as a results page."""
    lines = ["# Per-file compile profiles (fresh process each)\n", f"Command: `{result['command']}`\n",
             f"Checkout profiled: `{result['checkout']}`.\n",
             f"Load average before / after: {result['load_before']} / {result['load_after']}.\n",
             "| schema | outcome | CPU s (profiled) | top stages (share of own time) | heaviest functions (own s) |",
             "|---|---|---:|---|---|"]
    for row in result["rows"]:
        stages = ", ".join(f"{stage} {share}" for stage, share in row["stages"])
        functions = "; ".join(f"`{name}` {own}" for name, own in row["functions"])
        lines.append(f"| `{row['file']}` | {row['outcome']} | {row['cpu_s']} | {stages} | {functions} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Profile every named schema, write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="+", help="MaskBench file names, without .json")
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--max-seconds", type=float, default=9.5)
    parser.add_argument("--checkout", default=str(REPO), help="whose stdsl is profiled (e.g. a main worktree)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_file_profile"))
    args = parser.parse_args(argv)
    command = "python benchmarks/compile_file_profile.py " + " ".join(argv if argv is not None else sys.argv[1:])
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = [profile_file(Path(args.folder) / f"{name}.json", args.max_seconds, args.checkout) for name in args.names]
    result = {"command": command, "checkout": args.checkout, "rows": rows, "load_before": load_before,
              "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    Path(args.out).with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
