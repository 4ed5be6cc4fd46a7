"""Whether a cold tool list pays to be compiled across the compile pool's worker processes: issue 36's parallel
compile, measured before it is built.  For random tools (`random_tools.py`) in each format it times, in process CPU
and wall seconds:
- serial: one process builds the reply cold (`build_constraint`, every cache emptied), as a pool worker does now;
- split: `--workers` spawned processes (warm: imports done and one small list built, as the pool's are) each build
  the call DFAs of their share of the tools (`reply_automaton._calls`, the per-tool schema compiles and guarded
  calls or layouts), pickle them (`ForkingPickler`, as the pool's pipes do) and send them back; the assembling
  process puts them in its calls cache and builds the reply from them (skeleton, substitution), which is what a
  pool would have to do.  Reported: each share's CPU, the pickled bytes, dumps and loads CPU, the assembly CPU and
  the wall clock of the whole split build (the shares run at once on the machine's cores).
Then the server's path (`--pool-repeats`): `ConstraintCache.get` of a new list (a fresh random list each time, so no
worker has met its tools) with the default pool, split across its two general workers (`SPARE_CORES` set to 2, as on
a machine of three cores or more) and whole
(`SPLIT_MIN_TOOLS` raised past the list), alternately: the wall time a request waits.
The split's wall clock can beat the serial one only where a core is free: on this shared 2-core machine read the
load average written beside it.  Writes benchmarks/results/tool_compile_parallel.{md,json}.

    python benchmarks/tool_compile_parallel.py --tools 128 --formats hermes qwen_xml harmony
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from random_tools import random_tools  # noqa: E402
from tool_compile import _spec  # noqa: E402


def _call_keys(spec: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The tools of a tools spec as `ToolSpec`s and their call-cache keys, as `build_constraint` computes them."""
    from stdsl.compiler.constraint_spec import ARGUMENTS_LOWERING, _Deadline, _tool_spec
    from stdsl.compiler.tools.formats import format_named
    from stdsl.compiler.tools.reply_automaton import _call_key, format_shape

    tool_format = format_named(spec["format"]).with_tokens(())
    tools = [_tool_spec(entry, _Deadline(600)) for entry in spec["tools"]]
    lowering = (ARGUMENTS_LOWERING, ())
    return tools, [_call_key(tool, format_shape(tool_format), lowering) for tool in tools]


def _share_calls(spec: dict[str, Any]) -> tuple[list[tuple[Any, Any]], float]:
    """The call DFAs of a tools spec's tools, built cold as `build_constraint` builds them: ((key, DFA) pairs, CPU)."""
    import stdsl
    from stdsl.compiler.constraint_spec import ARGUMENTS_LOWERING, _arguments_ir, _Deadline
    from stdsl.compiler.deadline import compile_deadline
    from stdsl.compiler.tools.formats import format_named
    from stdsl.compiler.tools.reply_automaton import _calls

    stdsl.caches.clear()
    began = time.process_time()
    tools, keys = _call_keys(spec)
    with compile_deadline(600):
        calls = _calls(tools, format_named(spec["format"]).with_tokens(()), _arguments_ir(_Deadline(600), []),
                       (ARGUMENTS_LOWERING, ()))
    return list(zip(keys, calls)), time.process_time() - began


def _worker(conn: Connection, warm: dict[str, Any]) -> None:
    """A warm worker: imports done and a small list built, then each spec's call DFAs sent back pickled."""
    from stdsl.compiler.constraint_spec import build_constraint

    build_constraint(warm, 600)
    conn.send("ready")
    while True:
        try:
            spec = conn.recv()
        except EOFError:
            return
        pairs, cpu = _share_calls(spec)
        dumped = time.process_time()
        payload = ForkingPickler.dumps((pairs, cpu))
        conn.send_bytes(payload)
        conn.send((time.process_time() - dumped, len(payload)))


def _serial(spec: dict[str, Any]) -> dict[str, float]:
    import stdsl
    from stdsl.compiler.constraint_spec import build_constraint

    stdsl.caches.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    build_constraint(spec, 600)
    return {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}


def _split(spec: dict[str, Any], conns: list[Connection]) -> dict[str, Any]:
    import pickle

    import stdsl
    from stdsl.compiler.constraint_spec import build_constraint
    from stdsl.compiler.tools.reply_automaton import _CALLS

    stdsl.caches.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    shares = [dict(spec, tools=spec["tools"][index::len(conns)]) for index in range(len(conns))]
    for conn, share in zip(conns, shares):
        conn.send(share)
    payloads = [conn.recv_bytes() for conn in conns]
    wall_sent = time.perf_counter()
    loads_began = time.process_time()
    answers = [pickle.loads(payload) for payload in payloads]
    loads = time.process_time() - loads_began
    for pairs, _ in answers:
        for key, automaton in pairs:
            _CALLS.put((), automaton, key)
    assembly_began = time.process_time()
    build_constraint(spec, 600)
    assembly = time.process_time() - assembly_began
    dumps = [conn.recv() for conn in conns]
    return {"wall_s": time.perf_counter() - wall, "parent_cpu_s": time.process_time() - cpu,
            "share_cpu_s": [cpu_s for _, cpu_s in answers], "dumps_cpu_s": [d for d, _ in dumps],
            "bytes": [n for _, n in dumps], "loads_cpu_s": loads, "assembly_cpu_s": assembly,
            "wait_wall_s": wall_sent - wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, nargs="+", default=[128])
    parser.add_argument("--formats", nargs="+", default=["hermes", "qwen_xml", "harmony"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pool-repeats", type=int, default=3)
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "tool_compile_parallel"))
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    conns, processes = [], []
    for _ in range(args.workers):
        ours, theirs = context.Pipe()
        process = context.Process(target=_worker, args=(theirs, _spec(random_tools(4, seed=99), "hermes")),
                                  daemon=True)
        process.start()
        conns.append(ours)
        processes.append(process)
    from stdsl.compiler.constraint_spec import build_constraint

    build_constraint(_spec(random_tools(4, seed=99), "hermes"), 600)
    assert all(conn.recv() == "ready" for conn in conns)
    rows: list[dict[str, Any]] = []
    for size in args.tools:
        tools = random_tools(size, seed=size)
        for tool_format in args.formats:
            spec = _spec(tools, tool_format)
            for repeat in range(args.repeats):
                load = os.getloadavg()[0]
                row = {"tools": size, "format": tool_format, "repeat": repeat, "load": load,
                       "serial": _serial(spec), "split": _split(spec, conns)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    for conn in conns:
        conn.close()
    for process in processes:
        process.join(5.0)
    pool_rows = asyncio.run(_through_cache(args.tools, args.formats, args.pool_repeats))
    command = "python benchmarks/tool_compile_parallel.py " + " ".join(sys.argv[1:])
    result = {"command": command.strip(), "machine": platform.platform(), "cpus": os.cpu_count(), "rows": rows,
              "pool_rows": pool_rows}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    Path(args.out + ".md").write_text(_markdown(result))


async def _through_cache(sizes: list[int], formats: list[str], repeats: int) -> list[dict[str, Any]]:
    """Wall seconds of `ConstraintCache.get` for new lists, split and whole alternately, on one warm pool."""
    from stdsl.server.constraints import constraint_cache

    cache = constraint_cache.ConstraintCache(compile_seconds=600)
    rows: list[dict[str, Any]] = []
    split_at, spare = constraint_cache.SPLIT_MIN_TOOLS, constraint_cache.SPARE_CORES
    constraint_cache.SPARE_CORES = 2
    try:
        await cache.get(_spec(random_tools(4, seed=99), "hermes"))
        seed = 1000
        for size in sizes:
            for tool_format in formats:
                for repeat in range(repeats):
                    row: dict[str, Any] = {"tools": size, "format": tool_format, "load": os.getloadavg()[0]}
                    for mode in ("split", "whole") if repeat % 2 == 0 else ("whole", "split"):
                        constraint_cache.SPLIT_MIN_TOOLS = split_at if mode == "split" else 1 << 30
                        seed += 1
                        splits = cache.stats.split
                        began = time.perf_counter()
                        await cache.get(_spec(random_tools(size, seed=seed), tool_format))
                        row[mode] = time.perf_counter() - began
                        row[f"{mode}_was_split"] = cache.stats.split > splits
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        constraint_cache.SPLIT_MIN_TOOLS, constraint_cache.SPARE_CORES = split_at, spare
        cache.close()
    return rows


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _free_cores(row: dict[str, Any]) -> float:
    """The split build's time where each process has a core to itself: the slowest share and its pickling, then
    the unpickling and the assembly (process CPU, which a free core turns into wall time)."""
    split = row["split"]
    return (max(share + dumps for share, dumps in zip(split["share_cpu_s"], split["dumps_cpu_s"]))
            + split["loads_cpu_s"] + split["assembly_cpu_s"])


def _markdown(result: dict[str, Any]) -> str:
    lines = ["# A cold tool list compiled across worker processes, against one process (seconds)", "",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']}, {result['cpus']} CPUs (shared)", "",
             "Medians of the repeats (range in brackets). serial: one process builds the reply cold. split: each "
             "worker builds its share's call DFAs (share CPU), pickles them (dumps, bytes), the assembler unpickles "
             "(loads) and builds the reply from them (assembly); wall is the whole split build, shares at once. Free "
             "cores: the split's time were each process on a core of its own (slowest share + its dumps + loads + "
             "assembly, CPU seconds) over the serial CPU seconds.", "",
             "| tools | format | load | serial wall | serial CPU | split wall | shares' CPU | dumps CPU | KiB sent "
             "| loads CPU | assembly CPU | split wall / serial wall | free cores: split / serial |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(row["tools"], row["format"]) for row in result["rows"]},
                  key=lambda key: (key[0], ["hermes", "qwen_xml", "harmony"].index(key[1])))
    for size, tool_format in keys:
        runs = [row for row in result["rows"] if (row["tools"], row["format"]) == (size, tool_format)]

        def cell(values: list[float]) -> str:
            return f"{_median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"

        serial_wall = [row["serial"]["wall_s"] for row in runs]
        split_wall = [row["split"]["wall_s"] for row in runs]
        shares = " + ".join(f"{_median([row['split']['share_cpu_s'][i] for row in runs]):.3f}"
                            for i in range(len(runs[0]["split"]["share_cpu_s"])))
        lines.append(
            f"| {size} | {tool_format} | {cell([row['load'] for row in runs])} | {cell(serial_wall)} | "
            f"{cell([row['serial']['cpu_s'] for row in runs])} | {cell(split_wall)} | "
            f"{shares} | "
            f"{_median([sum(row['split']['dumps_cpu_s']) for row in runs]):.4f} | "
            f"{_median([sum(row['split']['bytes']) for row in runs]) / 1024:.0f} | "
            f"{_median([row['split']['loads_cpu_s'] for row in runs]):.4f} | "
            f"{cell([row['split']['assembly_cpu_s'] for row in runs])} | "
            f"{_median([b / a for a, b in zip(serial_wall, split_wall)]):.2f} | "
            f"{_median([_free_cores(row) / row['serial']['cpu_s'] for row in runs]):.2f} |")
    lines += ["", "Through the server's cache (`ConstraintCache.get`, default pool: 2 general workers and 1 reserved), "
              "a new random list each time, split and whole alternately (wall seconds a request waits; medians "
              "[range]):", "", "| tools | format | load | split | whole | split / whole |", "|---|---|---|---|---|---|"]
    for size, tool_format in keys:
        runs = [row for row in result["pool_rows"] if (row["tools"], row["format"]) == (size, tool_format)]
        if not runs:
            continue
        split, whole = [row["split"] for row in runs], [row["whole"] for row in runs]
        lines.append(f"| {size} | {tool_format} | {_median([row['load'] for row in runs]):.1f} | "
                     f"{_median(split):.3f} [{min(split):.3f}-{max(split):.3f}] | "
                     f"{_median(whole):.3f} [{min(whole):.3f}-{max(whole):.3f}] | "
                     f"{_median([a / b for a, b in zip(split, whole)]):.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
