"""How late a JSON Schema compile honours its time limit, and the longest stretches of work that never check it.

The stdsl measured is the one first on the path (`PYTHONPATH=CHECKOUT`; the results name its folder).  Each file is
compiled in a child forked for it from a process that has compiled nothing (cold, as a server's first request), with
`strict=False` (`jsonschema_coverage.py`'s setting) unless `--strict`, in one of two ways:

- under `--limit` seconds: when the compile is
  refused with CompileTimeError, how far past the limit it ended, on the wall clock and in the thread's CPU time
  (the overrun; a compile that ends before the limit has none);
- with `--gaps`: under a 60 s limit, with every `check_deadline` call timed in thread CPU time (cyclic garbage
  collection not counted, as in `tests/compiler/fuzz/time_limit.py`) and the thread's stack sampled every 5 ms
  from a second thread, the longest stretches between two checks and the innermost stdsl functions sampled in
  each (where a check is missing).

    python benchmarks/compile_deadline_gaps.py FILE... --limit 0.5 [--gaps] [--out benchmarks/results/NAME]
    python benchmarks/compile_deadline_gaps.py --folder DIR --every 10 --limit 0.5 --out ...
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import pkgutil
import sys
import threading
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import stdsl.caches
from stdsl.compiler import deadline
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.errors import CompileTimeError, StdslError

SAMPLE_SECONDS = 0.005


def import_compiler() -> None:
    """Import every stdsl.compiler module, so that every module calling `check_deadline` can be patched."""
    import stdsl.compiler as package
    for module in pkgutil.walk_packages(package.__path__, "stdsl.compiler."):
        importlib.import_module(module.name)


class _ThreadClock:
    """The `time` module as `stdsl.compiler.deadline` reads it, its `perf_counter` the thread's CPU time: with
    `--cpu-clock` the limit is CPU seconds, so that on a loaded machine it falls where it would on a quiet one."""

    perf_counter = staticmethod(time.thread_time)


def overrun(schema: Any, limit: float, strict: bool, cpu_clock: bool) -> dict[str, Any]:
    """Compile under `limit`: the outcome and the wall and thread CPU seconds it took."""
    if cpu_clock:
        deadline.time = _ThreadClock  # type: ignore[assignment]
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        compile_constraint(schema, max_states=100_000, max_seconds=limit, strict=strict)
        outcome, stage = "ok", ""
    except CompileTimeError as error:
        outcome, stage = "CompileTimeError", str(error).split("stopped in ")[-1].split(")")[0]
    except StdslError as error:
        outcome, stage = type(error).__name__, ""
    return {"outcome": outcome, "stage": stage, "wall": time.perf_counter() - wall, "cpu": time.thread_time() - cpu}


def _where(frame: Any) -> str:
    """The innermost stdsl frames of a stack, innermost first (module:function:line)."""
    found = []
    while frame is not None and len(found) < 3:
        filename = frame.f_code.co_filename
        if f"{os.sep}stdsl{os.sep}" in filename:
            found.append(f"{Path(filename).stem}.{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(found)


def gaps(schema: Any, strict: bool, count: int) -> dict[str, Any]:
    """Compile under a 60 s limit with every deadline check timed: the `count` longest stretches between checks."""
    compiling = threading.get_ident()
    collecting = [0.0, 0.0]
    checks: list[tuple[float, float, str]] = []
    samples: list[tuple[float, str]] = []
    done = threading.Event()
    original = deadline.check_deadline

    def collector_time(phase: str, info: dict[str, int]) -> None:
        if threading.get_ident() != compiling:
            return
        if phase == "start":
            collecting[1] = time.thread_time()
        else:
            collecting[0] += time.thread_time() - collecting[1]

    def timed_check(stage: str, releasing: float = 0.0) -> None:
        caller = sys._getframe(1)
        checks.append((time.thread_time() - collecting[0], time.perf_counter(),
                       f"{stage} ({Path(caller.f_code.co_filename).stem}:{caller.f_lineno})"))
        original(stage, releasing)

    def sample() -> None:
        while not done.wait(SAMPLE_SECONDS):
            frame = sys._current_frames().get(compiling)
            if frame is not None:
                samples.append((time.perf_counter(), _where(frame)))

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("stdsl.") and \
                getattr(module, "check_deadline", None) is original:
            setattr(module, "check_deadline", timed_check)
    gc.callbacks.append(collector_time)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    checks.append((time.thread_time(), time.perf_counter(), "start"))
    try:
        compile_constraint(schema, max_states=100_000, max_seconds=60, strict=strict)
        outcome = "ok"
    except StdslError as error:
        outcome = type(error).__name__
    checks.append((time.thread_time() - collecting[0], time.perf_counter(), "end"))
    done.set()
    sampler.join()
    gc.callbacks.remove(collector_time)
    stretches = sorted(zip(checks, checks[1:]), key=lambda pair: pair[0][0] - pair[1][0])[:count]
    longest = []
    for before, after in stretches:
        inside = Counter(where for at, where in samples if before[1] <= at <= after[1])
        longest.append({"cpu": round(after[0] - before[0], 3), "at": round(before[0] - checks[0][0], 3),
                        "after": before[2], "before": after[2],
                        "sampled": [f"{where} ({n})" for where, n in inside.most_common(3)]})
    return {"outcome": outcome, "cpu": round(checks[-1][0] - checks[0][0], 3), "checks": len(checks),
            "longest": longest}


def in_child(task: Any) -> dict[str, Any]:
    """Run `task()` in a child forked for it; its JSON result."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            found = task()
        except BaseException as error:  # noqa: BLE001 - reported, not raised, from the child
            found = {"outcome": f"crash {type(error).__name__}: {error}"}
        os.write(write, json.dumps(found).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(child, 0)
    return json.loads(text) if text else {"outcome": "child died"}


def main(argv: list[str] | None = None) -> int:
    """Measure each file's overrun (or its gaps) and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--folder", default=None)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--limit", default="0.5", help="max_seconds of the overrun compile (a comma list: each)")
    parser.add_argument("--cpu-clock", action="store_true", help="the limit counts the thread's CPU seconds")
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--gaps", action="store_true", help="time the stretches between deadline checks instead")
    parser.add_argument("--count", type=int, default=3, help="with --gaps, how many stretches per file")
    parser.add_argument("--above", type=float, default=0.1,
                        help="seconds: overruns (or stretches) above it are listed")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import_compiler()
    paths = [Path(name) for name in args.files]
    if args.folder:
        paths += sorted(Path(args.folder).glob("*.json"))[args.offset::args.every]
    rows: dict[str, Any] = {}
    limits = [float(limit) for limit in args.limit.split(",")]
    for path in paths:
        schema = json.loads(path.read_text())["schema"]
        stdsl.caches.clear()
        if args.gaps:
            row = in_child(lambda: gaps(schema, args.strict, args.count))  # noqa: B023 - called at once
            worst = row.get("longest", [{"cpu": 0}])[0]
            print(f"{path.name}: {row['outcome']} cpu {row.get('cpu')} longest {json.dumps(worst)}", flush=True)
            rows[path.name] = row
            continue
        for limit in limits:
            row = in_child(lambda: overrun(schema, limit, args.strict, args.cpu_clock))  # noqa: B023 - called at once
            if row["outcome"] == "CompileTimeError":
                row["over_wall"] = round(row["wall"] - limit, 3)
                row["over_cpu"] = round(row["cpu"] - limit, 3)
            print(f"{path.name} {limit}: {json.dumps(row)}", flush=True)
            rows[f"{path.name} {limit}"] = row
    result = {"command": "python benchmarks/compile_deadline_gaps.py " + " ".join(argv or sys.argv[1:]),
              "checkout": str(Path(stdsl.caches.__file__).resolve().parents[1]),
              "load": os.getloadavg(), "cpu_clock": args.cpu_clock, "strict": args.strict, "rows": rows}
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(result, indent=1) + "\n")
        lines = [f"# `{result['command']}`", "", f"stdsl from {result['checkout']}; load average {result['load']}", ""]
        if args.gaps:
            lines += ["| file | outcome | CPU s | longest stretches without a check (CPU s: where sampled) |",
                      "|---|---|---:|---|"]
            for name, row in rows.items():
                listed = "; ".join(f"{s['cpu']} at {s['at']}: {', '.join(s['sampled'][:2])} (after {s['after']})"
                                   for s in row.get("longest", []) if s["cpu"] > args.above)
                lines.append(f"| {name} | {row['outcome']} | {row.get('cpu')} | {listed} |")
        else:
            lines += ["| file, limit | outcome | stage | wall s | CPU s | wall past limit | CPU past limit |",
                      "|---|---|---|---:|---:|---:|---:|"]
            for name, row in rows.items():
                lines.append(f"| {name} | {row['outcome']} | {row.get('stage', '')} | {row.get('wall', 0):.3f} | "
                             f"{row.get('cpu', 0):.3f} | {row.get('over_wall', '')} | {row.get('over_cpu', '')} |")
        Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
