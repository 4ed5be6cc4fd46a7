"""Where a JSON Schema compile spends its time: per stage, over (a sample of) the MaskBench files.

Each schema is compiled once in this process with every `stdsl.caches` entry cleared first (the pushdown's kept
body DFAs and the free-form value's DFA stay, as in any process that compiled before), under `cProfile`; a
function's own time is charged to the stage of the file it is defined in (schema resolve and IR, regex
parsing, NFA, DFA, minimization, string tries, pushdown grammars, automaton tables, the rest). Stage shares
are reported over all schemas, over those near the median compile time (the p40-p60 band) and over the
slowest 2% (the p99 tail), so a cut can aim at what dominates each; the profiler counts process CPU time (the
machine is shared).  Wall and CPU times are measured in a separate pass without the profiler (cProfile slows
Python-heavy stages more than NumPy-heavy ones).

Usage: python benchmarks/compile_profile.py [FOLDER] --every 5 --out benchmarks/results/compile_profile
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import stdsl.caches
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.errors import StdslError

REPO = Path(__file__).resolve().parents[1]
STAGES = (
    ("json_schema/", "schema resolve + IR"),
    ("compiler/ir.py", "schema resolve + IR"),
    ("regex/", "regex parse"),
    ("automata/nfa.py", "NFA"),
    ("automata/determinize.py", "DFA (subset)"),
    ("automata/minimization/", "minimize"),
    ("automata/strings.py", "string tries"),
    ("automata/automaton.py", "automaton tables"),
    ("automata/ops.py", "automaton ops"),
    ("pushdown/", "pushdown grammar"),
    ("compiler/", "compiler (other)"),
    ("numpy", "numpy"),
)


def stage_of(filename: str) -> str:
    """The stage a function belongs to, by the file it is defined in."""
    for part, stage in STAGES:
        if part in filename:
            return stage
    return "python builtins / other"


def compile_once(schema: Any, max_seconds: float) -> str:
    """Compile with empty caches; the outcome ('ok' or the refusal's class name)."""
    stdsl.caches.clear()
    try:
        compile_constraint(schema, max_states=100_000, max_seconds=max_seconds)
    except StdslError as error:
        return type(error).__name__
    return "ok"


def profile_one(schema: Any, max_seconds: float) -> dict[str, float]:
    """Own time per stage (profiled seconds) of one compile."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    compile_once(schema, max_seconds)
    profiler.disable()
    stages: dict[str, float] = defaultdict(float)
    for (filename, _line, _name), (_cc, _nc, own, _cum, _callers) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        stages[stage_of(filename)] += own
    return dict(stages)


def top_functions(schemas: list[Any], max_seconds: float, count: int) -> list[tuple[str, float, float]]:
    """The functions with the most own time over these schemas: (function, own s, cumulative s)."""
    profiler = cProfile.Profile(time.process_time)
    for schema in schemas:
        profiler.enable()
        compile_once(schema, max_seconds)
        profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda item: -item[1][2])[:count]
    return [(f"{Path(f).parent.name}/{Path(f).name}:{line} {name}", own, cum)
            for (f, line, name), (_cc, _nc, own, cum, _callers) in rows]


def shares(rows: list[dict[str, float]]) -> dict[str, float]:
    """Each stage's share of the summed profiled time of these rows."""
    total: dict[str, float] = defaultdict(float)
    for row in rows:
        for stage, seconds in row.items():
            total[stage] += seconds
    whole = sum(total.values()) or 1.0
    return {stage: round(seconds / whole, 3) for stage, seconds in sorted(total.items(), key=lambda kv: -kv[1])}


def main(argv: list[str] | None = None) -> int:
    """Time, then profile, every k-th file; write the stage table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?",
                        default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--max-seconds", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=25, help="functions listed for the median band and the tail")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_profile"))
    args = parser.parse_args(argv)
    command = "python benchmarks/compile_profile.py " + " ".join(argv if argv is not None else sys.argv[1:])
    files = sorted(Path(args.folder).glob("*.json"))[::args.every]
    schemas = {f.name: json.loads(f.read_text())["schema"] for f in files}
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    outcome: dict[str, str] = {}
    for name, schema in schemas.items():
        began, began_cpu = time.perf_counter(), time.process_time()
        outcome[name] = compile_once(schema, args.max_seconds)
        wall[name] = time.perf_counter() - began
        cpu[name] = time.process_time() - began_cpu
    by_cpu = sorted(cpu.values())
    ordered = sorted(cpu, key=cpu.__getitem__)
    by_wall = sorted(wall.values())
    n = len(ordered)
    median_band = ordered[int(0.4 * n):int(0.6 * n)]
    tail = ordered[int(0.98 * n):]
    profiled = {name: profile_one(schemas[name], args.max_seconds) for name in ordered}

    def pct(q: float) -> float:
        return round(by_wall[min(n - 1, int(q * n))], 4)

    result = {
        "command": command, "files": n, "wall_p50": pct(0.5), "wall_p90": pct(0.9), "wall_p95": pct(0.95),
        "wall_p99": pct(0.99), "wall_max": round(by_wall[-1], 4),
        **{f"cpu_p{q}": round(by_cpu[min(n - 1, int(q / 100 * n))], 4) for q in (50, 90, 95, 99)},
        "cpu_max": round(by_cpu[-1], 4),
        "refused": sum(o != "ok" for o in outcome.values()),
        "shares_all": shares(list(profiled.values())),
        "shares_median_band": shares([profiled[x] for x in median_band]),
        "shares_tail": shares([profiled[x] for x in tail]),
        "tail_files": {x: [round(wall[x], 3), outcome[x]] for x in tail},
        "top_median_band": top_functions([schemas[x] for x in median_band], args.max_seconds, args.top),
        "top_tail": top_functions([schemas[x] for x in tail], args.max_seconds, args.top),
    }
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    Path(args.out).with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


def markdown(result: dict) -> str:
    """The stage shares and the heaviest functions, as a results page."""
    lines = ["# Where a JSON Schema compile spends its time\n", f"Command: `{result['command']}`\n",
             f"{result['files']} schemas, compiled in one process with every `stdsl.caches` entry cleared before each "
             f"(kept pushdown body DFAs stay), no "
             f"profiler: p50 {result['wall_p50']} s, p90 {result['wall_p90']} s, p95 {result['wall_p95']} s, "
             f"p99 {result['wall_p99']} s, max {result['wall_max']} s ({result['refused']} refused); process CPU "
             f"time: p50 {result['cpu_p50']} s, p90 {result['cpu_p90']} s, p95 {result['cpu_p95']} s, p99 "
             f"{result['cpu_p99']} s, max {result['cpu_max']} s.\n",
             "Share of profiled own time per stage (the file a function is defined in):\n",
             "| stage | all | median band (p40-p60 by CPU time) | tail (slowest 2%) |", "|---|---:|---:|---:|"]
    stages = list(result["shares_all"])
    for stage in stages:
        lines.append(f"| {stage} | {result['shares_all'].get(stage, 0)} | "
                     f"{result['shares_median_band'].get(stage, 0)} | {result['shares_tail'].get(stage, 0)} |")
    for key, title in (("top_median_band", "median band"), ("top_tail", "tail")):
        lines += ["", f"Heaviest functions, {title} (own / cumulative profiled seconds):\n",
                  "| function | own | cumulative |", "|---|---:|---:|"]
        lines += [f"| `{f}` | {own:.3f} | {cum:.3f} |" for f, own, cum in result[key]]
    lines += ["", "Tail files (wall s, outcome): " + ", ".join(f"`{k}` {v[0]} {v[1]}"
                                                         for k, v in result["tail_files"].items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
