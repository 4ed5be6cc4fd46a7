"""Where a small schema's compile goes, per stage, in the settings issue 36 measures (process CPU time).

MaskBench: the p40-p60 band of every k-th file by the CPU time of its first compile in a child forked from a
process that imported the compiler and compiled nothing (as `jsonschema_coverage.py` times it, `strict=False`),
then per stage for that band: cold (each file the child's first compile), primed (the child first compiled a
small unrelated schema and emptied every cache, so the difference is what a process pays once: first imports,
per-process memos, first touches of the parent's memory after the fork) and warm (in this long-lived process,
after compiling every file outside the band, each band file once with every cache emptied first:
`compile_settings.py`'s warm setting).  Tools: the argument schema of each of `--tools` random tools
(`random_tools.py`) compiled for embedding in one warm process, every cache emptied first, as
`tool_compile_stages.py`'s "schema compile" stage.  A stage's time includes the stages it calls (they are charged
to the outermost): "long chains" is the scan of an automaton's expression for long counted chains and, where it
finds some, their layout (the skeleton's NFA and subset construction included); "minimize" includes the trim that
stands for it on a pushdown body with calls.

    python benchmarks/compile_stages.py --every 10 --out benchmarks/results/compile_stages
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stdsl.caches
import stdsl.compiler.automata.build as build_module
import stdsl.compiler.automata.determinize as determinize_module
import stdsl.compiler.constraint as constraint_module
import stdsl.compiler.json_schema.any_value as any_value_module
import stdsl.compiler.json_schema.recursive as recursive_module
import stdsl.compiler.pushdown.grammar as grammar_module
from stdsl.errors import StdslError

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from random_tools import random_tools  # noqa: E402

PRIMER = {"type": "object", "properties": {"zz": {"type": "integer"}, "yy": {"type": "string", "maxLength": 3},
                                           "q": {"type": "array", "items": {"type": "number"}}}}
SECONDS: defaultdict[str, float] = defaultdict(float)
_DEPTH = [0]


def _timed(stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` charging its process CPU time to `stage` (unless called inside another timed stage)."""
    def timed(*args: Any, **kwargs: Any) -> Any:
        if _DEPTH[0]:
            return function(*args, **kwargs)
        _DEPTH[0] += 1
        began = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SECONDS[stage] += time.process_time() - began
            _DEPTH[0] -= 1
    return timed


def _instrument() -> None:
    """Wrap each stage where its callers look it up (a pushdown body is `build.determinized`, whose chain scan, NFA and
    subset construction are the stages below; the NFA and subset construction are looked up by
    `determinize.determinize_expression`)."""
    determinize_module.build_nfa = _timed("NFA", determinize_module.build_nfa)  # type: ignore[attr-defined]
    determinize_module.determinize = _timed("subset DFA", determinize_module.determinize)
    build_module.chained_dfa = _timed("long chains", build_module.chained_dfa)
    build_module.shrink = _timed("minimize", build_module.shrink)
    grammar_module.trim_in_bfs_order = _timed("minimize", grammar_module.trim_in_bfs_order)
    constraint_module.schema_to_ir = _timed("schema to IR", constraint_module.schema_to_ir)
    recursive_module.recursive_schema_to_ir = _timed("schema to IR", recursive_module.recursive_schema_to_ir)
    any_value_module.canonical_dfa = _timed("free-form DFA", any_value_module.canonical_dfa)
    grammar_module.PushdownGrammar.__init__ = _timed("pushdown tables",  # type: ignore[method-assign]
                                                     grammar_module.PushdownGrammar.__init__)


def _compile(schema: Any, strict: bool) -> None:
    try:
        constraint_module.compile(schema, max_states=100_000, max_seconds=60, strict=strict)
    except StdslError:
        pass


def _forked(schema: Any, primed: bool) -> dict[str, float]:
    """Stage seconds of one compile in a child forked for it (after a primer compile and emptied caches)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        if primed:
            _compile(PRIMER, False)
            stdsl.caches.clear()
        SECONDS.clear()
        began = time.process_time()
        _compile(schema, False)
        SECONDS["total"] = time.process_time() - began
        os.write(write, json.dumps(SECONDS).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        found = json.loads(pipe.read())
    os.waitpid(child, 0)
    return dict(found)


def _with_rest(row: dict[str, float]) -> dict[str, float]:
    """The row with "rest": the total less the timed stages (argument checks, caches, the automaton's tables)."""
    return {**row, "rest": row["total"] - sum(seconds for stage, seconds in row.items() if stage != "total")}


def _median_ms(rows: list[dict[str, float]]) -> dict[str, float]:
    """Each stage's median over the rows, in milliseconds, the heaviest first."""
    rows = [_with_rest(row) for row in rows]
    stages = sorted({stage for row in rows for stage in row}, key=lambda s: -sum(r.get(s, 0.0) for r in rows))
    return {stage: round(1e3 * statistics.median(row.get(stage, 0.0) for row in rows), 3) for stage in stages}


def main(argv: list[str] | None = None) -> int:
    """Profile the MaskBench median band (forked, cold and primed) and the tools' schemas; write the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--tools", type=int, default=128)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_stages"))
    args = parser.parse_args(argv)
    _instrument()
    files = sorted(Path(args.folder).glob("*.json"))[::args.every]
    schemas = {path.name: json.loads(path.read_text())["schema"] for path in files}
    first = {name: _forked(schema, False) for name, schema in schemas.items()}
    ranked = sorted(first, key=lambda name: first[name]["total"])
    band = ranked[int(0.4 * len(ranked)):int(0.6 * len(ranked))]
    cold = [_forked(schemas[name], False) for name in band]
    primed = [_forked(schemas[name], True) for name in band]
    for name, schema in schemas.items():
        if name not in band:
            _compile(schema, False)
    warm = []
    for name in band:
        stdsl.caches.clear()
        SECONDS.clear()
        began = time.process_time()
        _compile(schemas[name], False)
        SECONDS["total"] = time.process_time() - began
        warm.append(dict(SECONDS))
    tool_schemas = [tool["function"]["parameters"] for tool in random_tools(args.tools, seed=args.tools)]
    tool_rows = []
    for _ in range(5):
        stdsl.caches.clear()
        SECONDS.clear()
        began = time.process_time()
        for schema in tool_schemas:
            constraint_module.compile_embeddable(schema, max_seconds=60)
        SECONDS["total"] = time.process_time() - began
        tool_rows.append({stage: seconds / len(tool_schemas) for stage, seconds in SECONDS.items()})
    command = "python benchmarks/compile_stages.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result: dict[str, Any] = {
        "command": command, "load_average": os.getloadavg(), "files": len(files), "band": band,
        "first_compile_ms": {f"p{q}": round(1e3 * first[ranked[int(q / 100 * len(ranked))]]["total"], 2)
                             for q in (50, 90)},
        "band_cold_ms": _median_ms(cold), "band_primed_ms": _median_ms(primed),
        "band_warm_ms": _median_ms(warm), "tool_ms": _median_ms(tool_rows)}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    stages = list(dict.fromkeys([*result["band_cold_ms"], *result["tool_ms"]]))
    lines = ["# Compile stages of a small schema (process CPU ms, median per schema)\n",
             f"Command: `{result['command']}`; load average {', '.join(f'{v:.2f}' for v in result['load_average'])} "
             f"at the end.\n",
             f"MaskBench: every {args.every}th file ({len(files)}), first compile in a forked child, strict=False: "
             f"p50 {result['first_compile_ms']['p50']} ms, p90 {result['first_compile_ms']['p90']} ms; the p40-p60 "
             f"band ({len(band)} files) per stage below, cold, primed and warm.  Tools: {args.tools} random tools' "
             "argument schemas, warm process, caches emptied, median of 5 passes.\n",
             "| stage | MaskBench band, cold | MaskBench band, primed | MaskBench band, warm | tool schema |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {stage} | {result['band_cold_ms'].get(stage, 0.0)} | {result['band_primed_ms'].get(stage, 0.0)} | "
              f"{result['band_warm_ms'].get(stage, 0.0)} | {result['tool_ms'].get(stage, 0.0)} |" for stage in stages]
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
