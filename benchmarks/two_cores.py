"""Two CPU cores for stdsl's constrained batch on Gemma 3 270M: its prefill in two groups beside each other and its
vocabulary projection split over two streams (`stdsl/runtime/platform/side_stream.py`), against the same engine with
both off (main's one-core path) and mlx-lm's BatchGenerator + llguidance, interleaved in one process.

Per engine and round: output tokens, wall and process CPU per output token, and how much of the time the process
had work for two cores: a sampler thread reads every thread's state in /proc every 3 ms; "two or more" is the share
of samples, among those with any of the process's threads runnable, with two or more runnable. On a loaded machine
wall time mostly measures the load; process CPU and that share carry over to a quiet one, where a run's wall time is
about its busy time, CPU / (1 + share) (one core busy, or two).

    python benchmarks/two_cores.py --repeats 3

Writes benchmarks/results/two_cores_gemma.{json,md} (or `--out` NAME.{json,md}).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

from batch import extraction_jobs, run_mlx_lm, run_stdsl  # noqa: E402

from stdsl.runtime.batch import forward, prefill  # noqa: E402
from stdsl.runtime.batch.requests import prompt_tokens  # noqa: E402
from stdsl.runtime.model.loading import GEMMA3_NAME, load  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
ON = (prefill.BESIDE_TOKENS, forward.SPLIT_HEAD_BYTES)
OFF = (1 << 62, 1 << 62)


def runnable_threads() -> int:
    """How many of this process's threads are running or waiting for a core, the caller's own excluded."""
    own, count = threading.get_native_id(), 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == own:
            continue
        try:
            state = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        count += state == "R"
    return count


def sampled(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`run()`'s result with its process CPU seconds and the share of its busy samples with two threads or more
    runnable."""
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(runnable_threads())
            time.sleep(0.003)

    sampler = threading.Thread(target=sample)
    sampler.start()
    began = time.process_time()
    out = run()
    out["cpu_seconds"] = time.process_time() - began
    stop.set()
    sampler.join()
    busy = [s for s in samples if s]
    out["two_or_more"] = sum(s >= 2 for s in busy) / max(len(busy), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="two_cores_gemma")
    args = parser.parse_args()
    model = load(GEMMA3_NAME)
    jobs = extraction_jobs()
    chosen = [jobs[i % len(jobs)] for i in range(args.streams)]
    prompts = [prompt_tokens(model, p) for _, p, _ in chosen]
    schemas = [s for _, _, s in chosen]

    def stdsl(knobs: tuple[int, int]) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            prefill.BESIDE_TOKENS, forward.SPLIT_HEAD_BYTES = knobs
            try:
                return run_stdsl(model, prompts, args.max_tokens, args.streams, schemas)
            finally:
                prefill.BESIDE_TOKENS, forward.SPLIT_HEAD_BYTES = ON
        return run

    engines = {"stdsl, two cores": stdsl(ON), "stdsl, one core (main)": stdsl(OFF),
               "mlx-lm + llguidance": lambda: run_mlx_lm(model, prompts, args.max_tokens, args.streams, schemas)}
    report: dict[str, Any] = {"command": "python benchmarks/two_cores.py " + " ".join(sys.argv[1:]),
                              "load_average": os.getloadavg()[0], "rounds": {name: [] for name in engines}}
    for run in engines.values():
        run()  # cold: compiles, first calls
    for round_ in range(args.repeats):
        names = list(engines) if round_ % 2 == 0 else list(engines)[::-1]
        for name in names:
            out = sampled(engines[name])
            row = {key: out[key] for key in ("tokens", "seconds", "cpu_seconds", "two_or_more")}
            row["load_average"] = os.getloadavg()[0]
            report["rounds"][name].append(row)
            print(name, json.dumps(row), flush=True)
    report["load_average_end"] = os.getloadavg()[0]
    write(report, args.out)


def write(report: dict[str, Any], out: str) -> None:
    lines = ["# Two CPU cores for stdsl's constrained batch (Gemma 3 270M, 8 streams, CPU, same process)", "",
             f"Command: `{report['command']}`", "",
             f"Load average {report['load_average']:.1f} at the start, {report['load_average_end']:.1f} at the end "
             "(2 cores shared with other work). Medians of the warm rounds (their range in brackets). Busy-time "
             "estimate: CPU / (1 + two-or-more share), the wall time a quiet 2-core machine would take if every "
             "runnable thread had a core (memory bandwidth shared by the two cores not counted).", "",
             "| engine | output tokens | wall ms/token | CPU ms/token | two threads or more runnable | "
             "busy-time ms/token (quiet estimate) |", "|---|---|---|---|---|---|"]
    summary: dict[str, dict[str, float]] = {}
    for name, rounds in report["rounds"].items():
        wall = [r["seconds"] / r["tokens"] * 1e3 for r in rounds]
        cpu = [r["cpu_seconds"] / r["tokens"] * 1e3 for r in rounds]
        share = [r["two_or_more"] for r in rounds]
        busy = [c / (1 + s) for c, s in zip(cpu, share)]
        summary[name] = {"wall_ms": statistics.median(wall), "cpu_ms": statistics.median(cpu),
                         "two_or_more": statistics.median(share), "busy_ms": statistics.median(busy)}
        lines.append(f"| {name} | {rounds[-1]['tokens']} | {statistics.median(wall):.1f} [{min(wall):.1f}-"
                     f"{max(wall):.1f}] | {statistics.median(cpu):.1f} [{min(cpu):.1f}-{max(cpu):.1f}] | "
                     f"{statistics.median(share):.2f} | {statistics.median(busy):.1f} |")
    report["summary"] = summary
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{out}.json").write_text(json.dumps(report, indent=1))
    (RESULTS / f"{out}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
