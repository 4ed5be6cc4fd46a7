"""Issue 13 compile-speed cases, cold, beside llguidance in the same run, and how closely `max_seconds` is kept.

Each case is compiled in a forked worker (stdsl imported, nothing compiled yet: the first compile
of that schema in the process, as `jsonschema_coverage.py` times it), reporting wall and CPU
seconds; llguidance compiles the same schema (grammar and matcher on the Qwen3.5 vocabulary) in
its own forked worker.  Cases: the six extraction schemas, an enum of 5,000 short strings and an
object of 300 optional string properties.  Then constraints that cannot finish are compiled under
`max_seconds` and the time to the refusal is reported against the limit.

    python benchmarks/compile_speed.py --peers llguidance
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import time
from pathlib import Path
from typing import Any

from jsonschema_coverage import load_peers, run_peer

import stdsl  # noqa: F401  (imported before the workers fork, like the coverage runner)
from stdsl.compiler.constraint import Regex
from stdsl.compiler.constraint import compile as compile_constraint

REPO = Path(__file__).resolve().parents[1]
EXTRACTION = REPO / ".." / "shared" / "tasks" / "extraction"
RESULTS = REPO / "benchmarks" / "results"
TARGETS_MS = {"extraction": 5.0, "enum_5000": 50.0, "object_300": 300.0}
OVERSHOOT_CASES = {
    "NFA construction": "(?:(?:(?:ab){0,40}c){0,40}d){0,300}",
    "determinization": "(a|b)*a(a|b){16}",
    "determinization, wide levels": "(?:[a-z]{0,80}x){0,200}y",
}


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


def _compile_worker(spec: Any, max_seconds: float, conn: Any) -> None:
    """Worker: one cold compile, timed in wall and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        constraint = compile_constraint(spec, max_seconds=max_seconds)
        outcome = f"{constraint.num_states} states"
    except stdsl.errors.StdslError as exc:
        outcome = f"{type(exc).__name__}: {exc}"[:160]
    conn.send({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "outcome": outcome})


def run_cold(spec: Any, max_seconds: float) -> dict:
    """One compile in a forked worker."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    worker = ctx.Process(target=_compile_worker, args=(spec, max_seconds, child), daemon=True)
    worker.start()
    child.close()
    try:
        return parent.recv()
    finally:
        worker.join()
        parent.close()


def markdown(result: dict) -> str:
    """The results as tables."""
    peers = result["peers"]
    lines = ["# Compile speed (issue 13)", "", f"Command: `{result['command']}`", "",
             "Cold compile (forked worker, stdsl imported, nothing compiled yet); median of "
             f"{result['repeats']} runs; CPU is the worker's own CPU time (the machine is shared).", "",
             "| case | target ms | stdsl wall ms | stdsl CPU ms | states | "
             + " | ".join(f"{p} wall ms" for p in peers) + " |",
             "|---|---:|---:|---:|---|" + "---:|" * len(peers)]
    for name, row in result["cases"].items():
        peer_cells = " | ".join(f"{row['peers'][p]['ms']}" for p in peers)
        lines.append(f"| {name} | {TARGETS_MS[row['group']]:g} | {row['wall_ms']} | {row['cpu_ms']} | "
                     f"{row['outcome']} | {peer_cells} |")
    lines += ["", f"Time limit kept (`max_seconds={result['limit_s']}`): time from the call to the refusal.", "",
              "| stops in | pattern | seconds | over the limit |", "|---|---|---:|---:|"]
    for stage, row in result["overshoot"].items():
        lines.append(f"| {stage} | `{row['pattern']}` | {row['seconds']} | {row['over_percent']}% |")
    return "\n".join(lines) + "\n"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main(argv: list[str] | None = None) -> int:
    """Run the cases and the deadline checks; write results/compile_speed.{json,md}."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peers", default="llguidance", help="comma-separated peers (llguidance,xgrammar)")
    parser.add_argument("--repeats", type=int, default=3, help="cold compiles per case (median reported)")
    parser.add_argument("--limit", type=float, default=2.0, help="max_seconds for the deadline checks")
    parser.add_argument("--out", default=str(RESULTS / "compile_speed"), help="results file stem")
    args = parser.parse_args(argv)
    command = "python benchmarks/compile_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])
    peers = load_peers([n for n in args.peers.split(",") if n])
    result: dict[str, Any] = {"command": command, "repeats": args.repeats, "limit_s": args.limit,
                              "peers": list(peers), "cases": {}, "overshoot": {}}
    for name, (group, schema) in cases().items():
        runs = [run_cold(schema, 60.0) for _ in range(args.repeats)]
        row: dict[str, Any] = {"group": group, "outcome": runs[0]["outcome"],
                               "wall_ms": round(1e3 * _median([r["wall_s"] for r in runs]), 1),
                               "cpu_ms": round(1e3 * _median([r["cpu_s"] for r in runs]), 1), "peers": {}}
        for peer_name, peer in peers.items():
            timed = [run_peer(peer, schema, 60.0) for _ in range(args.repeats)]
            row["peers"][peer_name] = {"ms": round(1e3 * _median([t["seconds"] for t in timed]), 1),
                                       "error": timed[0]["error"]}
        result["cases"][name] = row
        print(name, row, flush=True)
    for stage, pattern in OVERSHOOT_CASES.items():
        run = run_cold(Regex(pattern), args.limit)
        result["overshoot"][stage] = {"pattern": pattern, "seconds": round(run["wall_s"], 3),
                                      "over_percent": round(100 * (run["wall_s"] / args.limit - 1), 1),
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
