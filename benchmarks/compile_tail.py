"""The MaskBench schemas whose compile takes more than a threshold of process CPU time, and where each one's goes.

Each schema (every k-th file) is compiled once in this process with every `stdsl.caches` entry cleared first and
timed in process CPU time (the machine is shared, so wall time says little); those above `--above` seconds are
compiled again under `cProfile` and listed with their outcome, the two stages with the most own time (stages as in
`compile_profile.py`) and the function with the most own time, and whether the schema has counted repetitions
(`minLength`/`maxLength` past `--counted-from`, `minItems`/`maxItems`, `{m,n}` in a pattern).

Usage: python benchmarks/compile_tail.py [FOLDER] --every 10 --above 0.3 --out benchmarks/results/compile_tail
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import re
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_profile import compile_once, stage_of  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
COUNTED_PATTERN = re.compile(r"\{\d+(,\d*)?\}")


def counted_keywords(schema: Any, counted_from: int) -> list[str]:
    """The counted repetitions the schema asks for: keyword names (with their bound) and `{m,n}` in patterns."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("minLength", "maxLength", "minItems", "maxItems") and isinstance(value, int) \
                        and value >= counted_from:
                    found.append(f"{key} {value}")
                elif key == "pattern" and isinstance(value, str) and COUNTED_PATTERN.search(value):
                    found.append("pattern {m,n}")
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return sorted(set(found))


def profile(schema: Any, max_seconds: float) -> tuple[dict[str, float], str]:
    """Own CPU seconds per stage of one compile, and the function with the most own time."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    compile_once(schema, max_seconds)
    profiler.disable()
    stages: dict[str, float] = defaultdict(float)
    heaviest, heaviest_own = "", -1.0
    for (filename, line, name), (_cc, _nc, own, _cum, _callers) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        stages[stage_of(filename)] += own
        if own > heaviest_own:
            heaviest, heaviest_own = f"{Path(filename).parent.name}/{Path(filename).name}:{line} {name}", own
    return dict(stages), heaviest


def main(argv: list[str] | None = None) -> int:
    """Time every k-th file, profile those above the threshold, write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?",
                        default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--offset", type=int, default=0, help="the files taken are files[offset::every]")
    parser.add_argument("--above", type=float, default=0.3, help="process CPU seconds")
    parser.add_argument("--max-seconds", type=float, default=10.0)
    parser.add_argument("--counted-from", type=int, default=8, help="smallest length or item bound listed")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_tail"))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    command = "python benchmarks/compile_tail.py " + " ".join(argv if argv is not None else sys.argv[1:])
    files = sorted(Path(args.folder).glob("*.json"))[args.offset::args.every]
    cpu: dict[str, float] = {}
    outcome: dict[str, str] = {}
    schemas: dict[str, Any] = {}
    for path in files:
        schemas[path.name] = json.loads(path.read_text())["schema"]
        began = time.process_time()
        outcome[path.name] = compile_once(schemas[path.name], args.max_seconds)
        cpu[path.name] = time.process_time() - began
    slow = sorted((name for name in cpu if cpu[name] > args.above), key=lambda name: -cpu[name])
    rows = []
    for name in slow:
        stages, heaviest = profile(schemas[name], args.max_seconds)
        total = sum(stages.values()) or 1.0
        top = sorted(stages.items(), key=lambda kv: -kv[1])[:2]
        rows.append({"file": name, "cpu_s": round(cpu[name], 3), "outcome": outcome[name],
                     "stages": [[stage, round(seconds / total, 2)] for stage, seconds in top], "heaviest": heaviest,
                     "counted": counted_keywords(schemas[name], args.counted_from)})
    ordered = sorted(cpu.values())
    n = len(ordered)
    result = {"command": command, "files": n, "above": args.above,
              **{f"cpu_p{q}": round(ordered[min(n - 1, int(q / 100 * n))], 4) for q in (50, 90, 95, 99)},
              "rows": rows}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    Path(args.out).with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


def markdown(result: dict) -> str:
    """The slow schemas as a results page."""
    lines = [f"# MaskBench schemas above {result['above']} s of compile CPU time\n",
             f"Command: `{result['command']}`\n",
             f"{result['files']} schemas, each compiled in one process with every `stdsl.caches` entry cleared first; "
             f"process CPU time p50 {result['cpu_p50']} s, p90 {result['cpu_p90']} s, p95 {result['cpu_p95']} s, "
             f"p99 {result['cpu_p99']} s; {len(result['rows'])} above {result['above']} s.\n",
             "| schema | CPU s | outcome | top stages (share of profiled own time) | heaviest function | counted |",
             "|---|---:|---|---|---|---|"]
    for row in result["rows"]:
        stages = ", ".join(f"{stage} {share}" for stage, share in row["stages"])
        lines.append(f"| `{row['file']}` | {row['cpu_s']} | {row['outcome']} | {stages} | `{row['heaviest']}` | "
                     f"{', '.join(row['counted']) or '–'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
