"""What the MaskBench compile p50 includes: one schema's compile in four settings, for stdsl and llguidance.

`jsonschema_coverage.py` times each schema as the first compile of a child forked from a parent that imported
every engine and compiled nothing.  For stdsl that first compile also pays what a process pays once: copy-on-write
faults on the parent's Python objects (every object a compile touches has its reference count written), lazily
built per-process leaves and memos.  This script times every k-th file, the two engines alternating, as:

- `forked`: the coverage script's setting (process CPU, its user/sys split and minor page faults, and wall);
- `primed`: in the same kind of child after one unrelated compile with every cache emptied (what a second new
  schema costs a fresh process);
- `warm`: in this long-lived process after every child above (which it forked before compiling anything), once
  per file in a pass that compiled the files before it (its per-process memos filled), every cache emptied
  first: what a server that has compiled other schemas pays for a new one.  Each schema is
  compiled once here (a second compile of the same schema would find its leaves in per-process memos);
- `forked warm`: the first compile of a child forked from this process after the warm pass, every cache emptied
  (its memos warm, its pages the parent's): what copy-on-write alone adds to a compile.

llguidance is timed the same way (grammar_from_json_schema and LLMatcher on the Qwen3.5 vocabulary, as
`peers.py` compiles it; it keeps nothing between grammars).  Percentiles are over the schemas both compiled.

    python benchmarks/compile_settings.py --every 10 --out benchmarks/results/compile_settings
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stdsl.caches
from stdsl.compiler.constraint import compile as compile_constraint

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from peers import load_qwen_vocab, make_peer  # noqa: E402

SETTINGS = ("forked", "primed", "warm", "forked warm")
PRIMER = {"type": "object", "properties": {"zz": {"type": "integer"}, "yy": {"type": "string", "maxLength": 3},
                                           "q": {"type": "array", "items": {"type": "number"}}}}


def _measured(compile_one: Callable[[], Any]) -> dict[str, float] | None:
    """CPU, user, sys (ms), minor faults and wall (ms) of one call; None when it raised."""
    before, cpu, wall = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
    try:
        compile_one()
    except Exception:  # noqa: BLE001 - a refusal of either engine leaves the schema out of the comparison
        return None
    wall, cpu, after = time.perf_counter() - wall, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": 1e3 * cpu, "user": 1e3 * (after.ru_utime - before.ru_utime),
            "sys": 1e3 * (after.ru_stime - before.ru_stime), "faults": after.ru_minflt - before.ru_minflt,
            "wall": 1e3 * wall}


def _in_child(compile_one: Callable[[], Any], primer: Callable[[], Any] | None) -> dict[str, float] | None:
    """`_measured` in a child forked for it, after `primer` (and emptied caches) when given."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        if primer is not None:
            _measured(primer)
            stdsl.caches.clear()
        os.write(write, json.dumps(_measured(compile_one)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        found = json.loads(pipe.read() or "null")
    os.waitpid(child, 0)
    return found


def _warm(compile_one: Callable[[], Any]) -> dict[str, float] | None:
    """One compile in this process, every cache emptied first."""
    stdsl.caches.clear()
    return _measured(compile_one)


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {f"p{q}": round(ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))], 2) for q in (50, 90, 99)}


def main(argv: list[str] | None = None) -> int:
    """Time every k-th MaskBench schema in the four settings for both engines; write the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_settings"))
    args = parser.parse_args(argv)
    qwen = load_qwen_vocab()
    llguidance = make_peer("llguidance", qwen.token_bytes, qwen.eos_id, qwen.encoding)
    llguidance.build_tokenizer()
    engines: dict[str, Callable[[Any], Callable[[], Any]]] = {
        "stdsl": lambda schema: lambda: compile_constraint(schema, max_states=100_000, max_seconds=9.5, strict=False),
        "llguidance": lambda schema: lambda: llguidance.compile(schema)}
    primers = {"stdsl": engines["stdsl"](PRIMER), "llguidance": engines["llguidance"](PRIMER)}
    files = sorted(Path(args.folder).glob("*.json"))[::args.every]
    schemas = {path.name: json.loads(path.read_text())["schema"] for path in files}
    rows: dict[str, dict[str, dict[str, Any]]] = {name: {engine: {} for engine in engines} for name in schemas}
    began = time.time()
    for name, schema in schemas.items():
        for engine, make in engines.items():
            rows[name][engine]["forked"] = _in_child(make(schema), None)
            rows[name][engine]["primed"] = _in_child(make(schema), primers[engine])
    for primer in primers.values():
        primer()
    for name, schema in schemas.items():
        for engine, make in engines.items():
            rows[name][engine]["warm"] = _warm(make(schema))
    for name, schema in schemas.items():
        for engine, make in engines.items():
            rows[name][engine]["forked warm"] = _in_child(make(schema), stdsl.caches.clear)
    both = [name for name, row in rows.items()
            if all(row[e][s] is not None for e in engines for s in SETTINGS)]
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for engine in engines:
        for setting in SETTINGS:
            measured = [rows[name][engine][setting] for name in both]
            table.setdefault(engine, {})[setting] = {
                key: _percentiles([m[key] for m in measured]) for key in ("cpu", "wall", "user", "sys", "faults")}
    command = "python benchmarks/compile_settings.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {"command": command, "stdsl": str(Path(stdsl.__file__).parent), "load_average": os.getloadavg(),
              "files": len(files), "compared": len(both),
              "wall_s": round(time.time() - began, 1), "table": table, "rows": rows}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    lines = ["# One schema's compile in four settings, stdsl beside llguidance (ms; minor faults)\n",
             f"Command: `{command}`; load average {', '.join(f'{v:.2f}' for v in result['load_average'])} at the "
             f"end; {result['wall_s']} s; stdsl imported from `{result['stdsl']}`.\n",
             f"Every {args.every}th MaskBench file ({len(files)}); percentiles over the {len(both)} schemas both "
             "engines compiled.  forked: the first compile of a child forked from a parent that compiled nothing "
             "(as jsonschema_coverage.py times it); primed: the same after one unrelated compile, caches emptied; "
             "warm: once in a long-lived process that compiled the files before it, caches emptied first; forked "
             "warm: the first compile of a child forked from that process after its warm pass, caches emptied.\n",
             "| engine | setting | CPU p50 | CPU p90 | CPU p99 | wall p50 | user p50 | sys p50 | faults p50 |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for engine, settings in table.items():
        for setting, stats in settings.items():
            lines.append(f"| {engine} | {setting} | {stats['cpu']['p50']} | {stats['cpu']['p90']} | "
                         f"{stats['cpu']['p99']} | {stats['wall']['p50']} | {stats['user']['p50']} | "
                         f"{stats['sys']['p50']} | {stats['faults']['p50']:.0f} |")
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
