"""Issue 13 compile-speed cases, cold, beside llguidance in the same run, and how closely `max_seconds` is kept.

Each case is compiled in a forked worker (stdsl imported, nothing compiled yet: the first compile
of that schema in the process, as `jsonschema_coverage.py` times it), reporting wall and CPU
seconds and the worker's minor page faults; the same worker then compiles the schema again under
another cache key (a `title` added), the warm floor.  The case is also compiled in a fresh
interpreter (started, stdsl imported, then the one compile timed): what a new user's process pays,
without the copy-on-write faults a forked worker takes on the parent's pages.  llguidance compiles
the same schema (grammar and matcher on the Qwen3.5 vocabulary) in its own forked worker.
Cases: the six extraction schemas, an enum of 5,000 short strings and an object of 300 optional
string properties.  Then constraints that cannot finish are compiled under
`max_seconds` and the time to the refusal is reported against the limit.

    python benchmarks/compile_speed.py --peers llguidance
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jsonschema_coverage import load_peers, run_peer

import stdsl  # noqa: F401  (imported before the workers fork, like the coverage runner)
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.constraint import Regex
from stdsl.compiler.constraint import compile as compile_constraint

REPO = Path(__file__).resolve().parents[1]
EXTRACTION = REPO / ".." / "shared" / "tasks" / "extraction"
RESULTS = REPO / "benchmarks" / "results"
TARGETS_MS = {"extraction": 5.0, "enum_5000": 50.0, "object_300": 300.0}
OVERSHOOT_CASES = {
    "NFA construction": ("(?:(?:(?:ab){0,40}c){0,40}d){0,300}", 0.3),
    "determinization": ("(a|b)*a(a|b){21}", 1.0),
    "determinization, wide levels": ("(?:[a-z]{0,80}x){0,200}y", 1.0),
}
"""Stage → (pattern, `max_seconds`): `tests/compiler/test_deadline.py`'s cases, each needing several times its limit
in its stage on any machine; the state budget is lifted (`OVERSHOOT_MAX_STATES`) so that only the clock stops them."""
OVERSHOOT_MAX_STATES = 10**8


def cases() -> dict[str, tuple[str, Any]]:
    """Name → (target group, schema)."""
    out: dict[str, tuple[str, Any]] = {}
    for path in sorted(EXTRACTION.glob("*.json")):
        out[path.stem] = ("extraction", json.loads(path.read_text())["schema"])
    rng = random.Random(5000)
    words: set[str] = set()
    while len(words) < 5000:
        words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))))
    out["enum_5000"] = ("enum_5000", {"enum": sorted(words)})
    out["object_300"] = ("object_300", {"type": "object",
                                        "properties": {f"field_{i}": {"type": "string"} for i in range(300)}})
    return out


def _compile_worker(spec: Any, max_seconds: float, max_states: int, conn: Any) -> None:
    """Worker: one cold compile, timed in wall and CPU seconds with its minor page faults, then the warm floor."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        constraint = compile_constraint(spec, max_seconds=max_seconds, max_states=max_states)
        outcome = f"{constraint.num_states} states"
    except stdsl.errors.StdslError as exc:
        outcome = f"{type(exc).__name__}: {exc}"[:160]
    result = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "outcome": outcome,
              "page_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults}
    if isinstance(spec, dict):
        cpu = time.process_time()
        compile_constraint({**spec, "title": "warm"}, max_seconds=max_seconds)
        result["warm_cpu_s"] = time.process_time() - cpu
    conn.send(result)


def run_cold(spec: Any, max_seconds: float, max_states: int = DEFAULT_MAX_STATES) -> dict:
    """One compile in a forked worker."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    worker = ctx.Process(target=_compile_worker, args=(spec, max_seconds, max_states, child), daemon=True)
    worker.start()
    child.close()
    try:
        return parent.recv()
    finally:
        worker.join()
        parent.close()


FRESH_SCRIPT = """
import json, sys, time
import stdsl
from stdsl.compiler.constraint import compile
spec = json.load(open(sys.argv[1]))
wall, cpu = time.perf_counter(), time.process_time()
compile(spec, max_seconds=float(sys.argv[2]))
print(json.dumps({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}))
"""


def run_fresh(spec: Any, max_seconds: float) -> dict:
    """One compile in a fresh interpreter that imports stdsl first (the import is not timed)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
        json.dump(spec, handle)
        handle.flush()
        done = subprocess.run([sys.executable, "-c", FRESH_SCRIPT, handle.name, str(max_seconds)],
                              capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def markdown(result: dict) -> str:
    """The results as tables."""
    peers = result["peers"]
    lines = ["# Compile speed (issue 13)", "", f"Command: `{result['command']}`", "",
             "Cold compile, median of "
             f"{result['repeats']} runs.  *Forked*: a worker forked from a parent that imported stdsl and compiled "
             "nothing (as `jsonschema_coverage.py` times it); CPU is the worker's own CPU time (the machine is "
             "shared), faults its minor page faults during the compile (copy-on-write of the parent's pages).  "
             "*Warm*: the same worker compiling the schema again under another cache key.  *Fresh*: a new "
             "interpreter that imported stdsl, its first compile (what a new user's process pays).", "",
             "| case | target ms | forked wall ms | forked CPU ms | forked faults | warm CPU ms | fresh CPU ms | "
             "states | " + " | ".join(f"{p} wall ms" for p in peers) + " |",
             "|---|---:|---:|---:|---:|---:|---:|---|" + "---:|" * len(peers)]
    for name, row in result["cases"].items():
        peer_cells = " | ".join(f"{row['peers'][p]['ms']}" for p in peers)
        lines.append(f"| {name} | {TARGETS_MS[row['group']]:g} | {row['wall_ms']} | {row['cpu_ms']} | "
                     f"{row['page_faults']} | {row['warm_cpu_ms']} | {row['fresh_cpu_ms']} | {row['outcome']} | "
                     f"{peer_cells} |")
    lines += ["", "Time limit kept: time from the call to the refusal, the state budget lifted.", "",
              "| stops in | pattern | `max_seconds` | seconds | over the limit | outcome |",
              "|---|---|---:|---:|---:|---|"]
    for stage, row in result["overshoot"].items():
        lines.append(f"| {stage} | `{row['pattern']}` | {row['limit_s']:g} | {row['seconds']} | "
                     f"{row['over_percent']}% | {row['outcome'][:90]} |")
    return "\n".join(lines) + "\n"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main(argv: list[str] | None = None) -> int:
    """Run the cases and the deadline checks; write results/compile_speed.{json,md}."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peers", default="llguidance", help="comma-separated peers (llguidance,xgrammar)")
    parser.add_argument("--repeats", type=int, default=3, help="cold compiles per case (median reported)")
    parser.add_argument("--out", default=str(RESULTS / "compile_speed"), help="results file stem")
    parser.add_argument("--only", default="", help="comma-separated case and stop-stage names to run (default: all)")
    args = parser.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    command = "python benchmarks/compile_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])
    peers = load_peers([n for n in args.peers.split(",") if n])
    result: dict[str, Any] = {"command": command, "repeats": args.repeats,
                              "peers": list(peers), "cases": {}, "overshoot": {}}
    for name, (group, schema) in cases().items():
        if only and name not in only:
            continue
        runs = [run_cold(schema, 60.0) for _ in range(args.repeats)]
        fresh = [run_fresh(schema, 60.0) for _ in range(args.repeats)]
        row: dict[str, Any] = {"group": group, "outcome": runs[0]["outcome"],
                               "wall_ms": round(1e3 * _median([r["wall_s"] for r in runs]), 1),
                               "cpu_ms": round(1e3 * _median([r["cpu_s"] for r in runs]), 1),
                               "page_faults": int(_median([r["page_faults"] for r in runs])),
                               "warm_cpu_ms": round(1e3 * _median([r["warm_cpu_s"] for r in runs]), 1),
                               "fresh_cpu_ms": round(1e3 * _median([r["cpu_s"] for r in fresh]), 1), "peers": {}}
        for peer_name, peer in peers.items():
            timed = [run_peer(peer, schema, 60.0) for _ in range(args.repeats)]
            row["peers"][peer_name] = {"ms": round(1e3 * _median([t["seconds"] for t in timed]), 1),
                                       "error": timed[0]["error"]}
        result["cases"][name] = row
        print(name, row, flush=True)
    for stage, (pattern, limit) in OVERSHOOT_CASES.items():
        if only and stage not in only:
            continue
        run = run_cold(Regex(pattern), limit, OVERSHOOT_MAX_STATES)
        result["overshoot"][stage] = {"pattern": pattern, "limit_s": limit, "seconds": round(run["wall_s"], 3),
                                      "over_percent": round(100 * (run["wall_s"] / limit - 1), 1),
                                      "outcome": run["outcome"]}
        print(stage, result["overshoot"][stage], flush=True)
    stem = Path(args.out)
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    stem.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
