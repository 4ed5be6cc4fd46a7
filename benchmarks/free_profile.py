"""One stream of free text, stdsl's batch engine against mlx-lm's `BatchGenerator`, per output token: where the CPU
goes and how long the device waits on Python (random-weight tiny models of `models.py`'s families, CPU).

Each tree (`--trees`: e.g. a checkout of main and this one) runs in its own process, the trees alternating; in a
process the two engines alternate on the same model and prompt, after two warm-up runs each. Per run, divided by
the output tokens (`--tokens`, as `models.py` decodes them, prefill included):

- wall and process CPU;
- the CPU of the thread that drives the model (stdsl's runner thread; the caller's thread for mlx-lm) and of the
  other threads (MLX's stream thread computes the passes there), from /proc/self/task (Linux);
- how long the driving thread sat blocked in `mx.eval` / `mx.async_eval` (their wall time less their thread CPU:
  on the CPU backend `async_eval` returns only once at most ~10 tasks of its graph are left to run, so it blocks
  too), and the device's idle time, wall less the other threads' CPU;
- a timeline of one run: for each `mx.eval`, which graph it waited on (stdsl's pipelined step reads its draws with
  `mx.eval(tokens)`; MLX signals one event per `async_eval` call, so draws evaluated together with the next pass
  wait for the whole pass).

One more run of each engine under cProfile on its driving thread gives the Python functions with the most own
time per token (MLX's native calls are not seen by cProfile: their time lands in the caller).

    python benchmarks/free_profile.py                                   # this tree, every family
    python benchmarks/free_profile.py --trees /tmp/main-tree . --labels main branch --rounds 3

Writes benchmarks/results/free_profile.{md,json} (or `--out` NAME).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FAMILIES = ("plain", "sliding", "hybrid", "uniform")
TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[int, float]:
    """CPU seconds of every thread of this process, by native thread id (/proc/self/task, user + system)."""
    spent = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        spent[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK
    return spent


class MlxCalls:
    """`mx.eval` and `mx.async_eval` as the engines' modules call them, timed: each call's start, wall and thread
    CPU (the modules' `mx` is swapped for a namespace that forwards everything else)."""

    def __init__(self, modules: list[types.ModuleType]) -> None:
        import mlx.core as mx

        self.calls: list[tuple[str, float, float, float]] = []
        proxy = types.SimpleNamespace(**{name: getattr(mx, name) for name in dir(mx) if not name.startswith("__")})
        for name in ("eval", "async_eval"):
            proxy.__dict__[name] = self._timed(name, getattr(mx, name))
        for module in modules:
            module.mx = proxy  # type: ignore[attr-defined]

    def _timed(self, name: str, call: Any) -> Any:
        def timed(*args: Any) -> Any:
            began, cpu = time.perf_counter(), time.thread_time()
            try:
                return call(*args)
            finally:
                self.calls.append((name, began, time.perf_counter() - began, time.thread_time() - cpu))
        return timed


def one_run(engine: str, model: Any, prompts: list[list[int]], tokens: int, calls: MlxCalls,
            driver: int) -> dict[str, float]:
    """One run of `engine`: per output token, wall, process CPU, the driving thread's CPU (native id `driver`),
    the other threads' CPU, the driving thread's time blocked in MLX evals, and the device's idle time (ms)."""
    from batch import run_mlx_lm, run_stdsl

    run = run_mlx_lm if engine == "mlx_lm" else run_stdsl
    calls.calls.clear()
    threads, process = thread_cpu(), time.process_time()
    out = run(model, prompts, tokens, 1, None)
    process = time.process_time() - process
    after = thread_cpu()
    spent = {tid: after[tid] - threads.get(tid, 0.0) for tid in after}
    driving = spent.get(driver, 0.0)
    others = sum(spent.values()) - driving - (spent.get(threading.get_native_id(), 0.0) if engine == "stdsl" else 0)
    blocked = sum(wall - cpu for _, _, wall, cpu in calls.calls)
    count = max(out["tokens"], 1)
    per = {"wall": out["seconds"], "process_cpu": process, "driver_cpu": driving, "device_cpu": others,
           "blocked": blocked, "device_idle": max(out["seconds"] - others, 0.0),
           "eval_wait": sum(wall - cpu for name, _, wall, cpu in calls.calls if name == "eval"),
           "async_eval_wait": sum(wall - cpu for name, _, wall, cpu in calls.calls if name == "async_eval"),
           "mlx_call_cpu": sum(cpu for _, _, _, cpu in calls.calls)}
    return {"tokens": out["tokens"], **{key: 1e3 * value / count for key, value in per.items()}}


def profiled(engine: str, model: Any, prompts: list[list[int]], tokens: int, top: int) -> list[dict[str, Any]]:
    """The `top` Python functions by own time per output token (ms) in one run, profiled on the driving thread."""
    from batch import run_mlx_lm, run_stdsl

    from stdsl.runtime.runner import RUNNER

    profile = cProfile.Profile()
    if engine == "stdsl":
        RUNNER.call(profile.enable)
        out = run_stdsl(model, prompts, tokens, 1, None)
        RUNNER.call(profile.disable)
    else:
        profile.enable()
        out = run_mlx_lm(model, prompts, tokens, 1, None)
        profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    count = max(out["tokens"], 1)
    return [{"function": f"{Path(file).name}:{line}({name})", "calls_per_token": calls / count,
             "own_ms_per_token": 1e3 * own / count, "total_ms_per_token": 1e3 * total / count}
            for (file, line, name), (_, calls, own, total, _) in rows]


def worker(families: list[str], tokens: int, rounds: int, top: int) -> None:
    """Profile each family on the `stdsl` this process imports (its PYTHONPATH's, imported before the benchmark
    helpers put this tree on the path); print one JSON line per family."""
    import stdsl

    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]
    import models
    from batch import extraction_jobs, run_mlx_lm, run_stdsl

    import stdsl.runtime.batch.core as core
    from stdsl.runtime.batch.requests import prompt_tokens
    from stdsl.runtime.model.loading import load
    from stdsl.runtime.runner import RUNNER

    calls = MlxCalls([core, sys.modules["mlx_lm.generate"]])
    tokenizer = load().tokenizer
    for family in families:
        model = models.family_model(family, tokenizer)
        prompts = [prompt_tokens(model, extraction_jobs()[0][1])]
        for _ in range(2):
            run_mlx_lm(model, prompts, tokens, 1, None)
            run_stdsl(model, prompts, tokens, 1, None)
        drivers = {"mlx_lm": threading.get_native_id(), "stdsl": RUNNER.call(threading.get_native_id)}
        runs: dict[str, list[dict[str, float]]] = {"mlx_lm": [], "stdsl": []}
        for round_ in range(rounds):
            for engine in ("mlx_lm", "stdsl") if round_ % 2 == 0 else ("stdsl", "mlx_lm"):
                runs[engine].append(one_run(engine, model, prompts, tokens, calls, drivers[engine]))
        timeline = {}
        for engine in ("mlx_lm", "stdsl"):
            one_run(engine, model, prompts, tokens, calls, drivers[engine])
            timeline[engine] = [(name, round(1e3 * wall, 3), round(1e3 * cpu, 3))
                                for name, _, wall, cpu in calls.calls[8:20]]
        result = {"family": family, "stdsl": stdsl.__file__, "runs": runs, "timeline": timeline,
                  "profile": {engine: profiled(engine, model, prompts, tokens, top) for engine in ("mlx_lm", "stdsl")}}
        print(json.dumps(result), flush=True)


def run_tree(tree: Path, families: list[str], tokens: int, rounds: int, top: int) -> list[dict[str, Any]]:
    """One worker process on `tree`'s stdsl (this script's benchmarks/ helpers)."""
    command = [sys.executable, __file__, "--worker", "--families", *families, "--tokens", str(tokens),
               "--rounds", str(rounds), "--top", str(top)]
    done = subprocess.run(command, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True,
                          text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


COLUMNS = ("wall", "process_cpu", "driver_cpu", "device_cpu", "blocked", "eval_wait", "device_idle")


def write(report: dict[str, Any], out: str) -> None:
    """The report as NAME.json and a table per family (medians over every run of each tree and engine)."""
    (RESULTS / f"{out}.json").write_text(json.dumps(report, indent=1))
    lines = ["# One stream of free text per output token: stdsl vs mlx-lm BatchGenerator (tiny models, CPU)", "",
             f"Command: `{report['command']}`; trees: " + ", ".join(f"{k} = {v}" for k, v in report["trees"].items())
             + f"; load average {report['load_average']:.1f} at the start, {report['load_average_end']:.1f} at the "
             "end (2 cores shared with other sessions).", "",
             "ms per output token (48 tokens a run, prefill included), medians over the runs of each engine "
             "(engines alternating in a process, trees alternating by process): wall; process CPU; CPU of the "
             "thread driving the model (stdsl's runner, mlx-lm's caller); CPU of the other threads (MLX's stream "
             "thread runs the passes); time the driving thread sat blocked in `mx.eval`/`mx.async_eval`; of it, in "
             "`mx.eval`; device idle = wall less the other threads' CPU.", "",
             "| family | tree | engine | " + " | ".join(c.replace("_", " ") for c in COLUMNS) + " |",
             "|---|---|---|" + "---:|" * len(COLUMNS)]
    for family in report["families"]:
        for label, results in report["results"].items():
            mine = [r for r in results if r["family"] == family]
            for engine in ("mlx_lm", "stdsl"):
                runs = [run for r in mine for run in r["runs"][engine]]
                cells = [f"{statistics.median(run[c] for run in runs):.2f}" for c in COLUMNS]
                lines.append(f"| {family} | {label} | {engine} | " + " | ".join(cells) + " |")
    for label, results in report["results"].items():
        for r in [next(x for x in results if x["family"] == family) for family in report["families"]]:
            lines += ["", f"Timeline ({label}, {r['family']}): the driving thread's MLX calls in steady state, "
                      "(call, wall ms, thread CPU ms):", ""]
            for engine, events in r["timeline"].items():
                lines.append(f"- {engine}: " + ", ".join(f"{name} {wall:.2f}/{cpu:.2f}" for name, wall, cpu in events))
            for engine, top in r["profile"].items():
                lines += ["", f"cProfile ({label}, {r['family']}, {engine}), own ms per token:", "",
                          "| function | calls/token | own ms | total ms |", "|---|---:|---:|---:|"]
                lines += [f"| `{t['function']}` | {t['calls_per_token']:.1f} | {t['own_ms_per_token']:.3f} | "
                          f"{t['total_ms_per_token']:.3f} |" for t in top]
    lines += ["", *report.get("notes", [])]
    (RESULTS / f"{out}.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT])
    parser.add_argument("--labels", nargs="+")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=4, help="runs of each engine per process")
    parser.add_argument("--repeats", type=int, default=1, help="processes per tree, trees alternating")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--out", default="free_profile")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.families, args.tokens, args.rounds, args.top)
        return 0
    labels = args.labels or [tree.name for tree in args.trees]
    report: dict[str, Any] = {"command": "python benchmarks/free_profile.py " + " ".join(sys.argv[1:]),
                              "trees": {label: str(tree) for label, tree in zip(labels, args.trees)},
                              "families": args.families, "load_average": os.getloadavg()[0],
                              "results": {label: [] for label in labels}}
    order = list(zip(labels, args.trees))
    for repeat in range(args.repeats):
        for label, tree in order if repeat % 2 == 0 else order[::-1]:
            report["results"][label] += run_tree(tree.resolve(), args.families, args.tokens, args.rounds, args.top)
            print(f"repeat {repeat + 1}: {label} done", flush=True)
    report["load_average_end"] = os.getloadavg()[0]
    write(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
