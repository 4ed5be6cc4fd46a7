"""Where a decode step's time goes, on SmolLM2-135M (fp32, CPU), at 1, 4 and 8 rows, with and without overlap.

Two constraints: the person extraction schema (an object schema) and free text (no constraint, the language of
all UTF-8 text under the same budget and eos rules).

The batch core is stepped here directly (it owns no thread). Per step: queueing the model pass (`pass`),
waiting for its logits before the draw (`wait`: the part of the pass that host work did not hide), masks,
draws, constraint advance and text (`control`), and the rest. "overlap" is the core as it is: the masks of
step t+1 are computed while pass t runs (`mx.async_eval`); "serial" makes that pass synchronous (the
benchmark swaps the core's `mx.async_eval` for `mx.eval`), so the masks wait for it, as before.
Prefill steps are left out (each row's prompt is prefilled once, before the measured steps).

    python benchmarks/step_profile.py                  # rows 1 4 8, 96 tokens, both modes (~2 min quiet)
    python benchmarks/step_profile.py --rows 1 4 --tokens 24 --constraints free

Writes benchmarks/results/step_profile.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mlx.core as mx

import stdsl
import stdsl.runtime.batch.core as core_module
from stdsl.runtime.batch.core import BatchCore
from stdsl.runtime.batch.requests import prepare_request
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.options import DecodeOptions

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / ".." / "shared" / "tasks" / "extraction" / "person.json"
RESULT = ROOT / "benchmarks" / "results" / "step_profile.md"
PHASES = ("pass", "wait", "mask", "sample", "control")


CONSTRAINTS = ("schema", "free")


def _request(model: Any, index: int, tokens: int, constraint: str) -> Any:
    """One extraction request (the person task) under its schema, or free text, its prompt made distinct per row so
    no prompt cache hit joins rows."""
    task = json.loads(TASK.read_text())
    prompt = task["prompts"][0].format(schema=json.dumps(task["schema"]), source=task["source"]) + f" (row {index})"
    schema = task["schema"] if constraint == "schema" else None
    return prepare_request(model, prompt, schema, DecodeOptions.of(max_tokens=tokens))


def profile(model: Any, rows: int, tokens: int, serial: bool, constraint: str = "schema") -> dict[str, float]:
    """Milliseconds per decode step by phase (and steps, tokens drawn) for `rows` rows decoded together."""
    core_module.mx = SimpleNamespace(**{**{k: getattr(mx, k) for k in dir(mx) if not k.startswith("__")},
                                        "async_eval": mx.eval}) if serial else mx  # type: ignore[assignment]
    core = BatchCore(model, max_rows=rows, prompt_cache_bytes=0)
    handles = [RowHandle(lambda: None) for _ in range(rows)]
    for k, handle in enumerate(handles):
        core.insert(_request(model, k, tokens, constraint), handle)
    core.step()  # the prefill of every row and the first pass
    start = dict(core.seconds)
    drawn = core.counters["sampled_tokens"]
    steps = 0
    began = time.perf_counter()
    while core.busy:
        core.step()
        steps += 1
    wall = time.perf_counter() - began
    core_module.mx = mx
    spent = {phase: core.seconds[phase] - start[phase] for phase in (*PHASES, "prefill", "step")}
    out = {phase: 1000 * spent[phase] / max(steps, 1) for phase in PHASES}
    out["rest"] = 1000 * (spent["step"] - sum(spent[p] for p in (*PHASES, "prefill"))) / max(steps, 1)
    out["step"] = 1000 * wall / max(steps, 1)
    out["steps"] = steps
    out["tokens"] = core.counters["sampled_tokens"] - drawn
    assert all(h.done for h in handles)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--constraints", nargs="+", choices=CONSTRAINTS, default=list(CONSTRAINTS))
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    model = stdsl.load()
    for constraint in args.constraints:
        profile(model, 1, 64, serial=False, constraint=constraint)  # warm-up: compiles, first masks
    lines = ["# Decode step profile (SmolLM2-135M fp32, CPU, person extraction schema and free text)", "",
             f"`python benchmarks/step_profile.py --rows {' '.join(map(str, args.rows))} --tokens {args.tokens} "
             f"--constraints {' '.join(args.constraints)}`; ms per decode step (prefill excluded); load average "
             f"{os.getloadavg()[0]:.1f} at the start.", "",
             "| constraint | rows | mode | step | pass | wait | mask | sample | control | rest | steps | tokens |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for constraint in args.constraints:
        for rows in args.rows:
            for serial in (True, False):
                got = profile(model, rows, args.tokens, serial, constraint)
                mode = "serial" if serial else "overlap"
                cells = " | ".join(f"{got[p]:.2f}" for p in ("step", *PHASES, "rest"))
                lines.append(f"| {constraint} | {rows} | {mode} | {cells} | {got['steps']:.0f} | {got['tokens']:.0f} |")
                print(lines[-1], flush=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
