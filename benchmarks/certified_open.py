"""Certified block-parallel decoding on pushdown constraints against sequential greedy, SmolLM2-135M (fp32, CPU).

The extraction schemas of ../shared/tasks/extraction with every `additionalProperties` removed (open objects:
undeclared members may hold any JSON value, so they compile to the pushdown) and the recursive tasks of
../shared/tasks/recursive as written: blocks (between cut configurations), model passes (waves + certification
passes), rounds, identical outputs (a difference must start at a near-tie), decode wall time. Both runs use the
same engine and warm constraint tables; each output is decoded sequentially, then certified.

    python benchmarks/certified_open.py         # first prompt of 6 open schemas, org and expression (~15 min, busy)
    python benchmarks/certified_open.py --tasks person,fs --prompts 3 --max-tokens 200

Writes benchmarks/results/certified_open.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import stdsl.runtime.platform.mlx_lm_models  # noqa: F401  (engine_oracle's mlx-lm model code, without mlx_lm's start-up)
from stdsl.runtime.platform.blas import bind_blas

bind_blas()  # MKL for MLX's CPU matmuls before anything is timed (stdsl.load binds it too)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "runtime"))

from engine_oracle import sequential_greedy  # noqa: E402

from stdsl.compiler.constraint import compile as compile_constraint  # noqa: E402
from stdsl.compiler.pushdown.machine import PushdownMachine  # noqa: E402
from stdsl.control.tables import machine_of  # noqa: E402
from stdsl.runtime.certified.blocks import block_plan  # noqa: E402
from stdsl.runtime.decode import generate  # noqa: E402
from stdsl.runtime.model.loading import load  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / ".." / "shared" / "tasks"
EXTRACTION = ("person", "tool_call", "product", "event", "classification", "contact_card")
RECURSIVE = ("org", "fs", "expression", "solar", "thread")
RESULTS = ROOT / "benchmarks" / "results"


def opened(schema: Any) -> Any:
    """The schema with every `additionalProperties` removed."""
    if isinstance(schema, dict):
        return {k: opened(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [opened(v) for v in schema]
    return schema


def task_outputs(name: str, prompts: int) -> tuple[dict, list[str]]:
    """A task's schema (extraction: opened) and its first `prompts` prompts."""
    if name in EXTRACTION:
        task = json.loads((SHARED / "extraction" / f"{name}.json").read_text())
        schema, templates = opened(task["schema"]), task["prompts"][:prompts]
    elif name in RECURSIVE:
        task = json.loads((SHARED / "recursive" / f"{name}.json").read_text())
        schema, templates = task["schema"], [task["prompt"]]
    else:
        raise SystemExit(f"unknown task {name!r}: choose from {', '.join(EXTRACTION + RECURSIVE)}")
    return schema, [t.format(schema=json.dumps(schema), source=task["source"]) for t in templates]


def first_difference_margin(model: Any, prompt: str, schema: dict, max_tokens: int, tokens: list[int]) -> float | None:
    """Top-2 margin of the sequential run at the step where `tokens` first differ from it (None: identical)."""
    expected, margins, starts = sequential_greedy(model, prompt, schema, max_tokens)
    if tokens == expected:
        return None
    first = next((i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b), min(len(tokens), len(expected)))
    step = max(k for k, start in enumerate(starts) if start <= first)
    return margins[step]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default=",".join(EXTRACTION + ("org", "expression")))
    parser.add_argument("--prompts", type=int, default=1, help="prompts per extraction task (1-3)")
    parser.add_argument("--max-tokens", type=int, default=300)
    args = parser.parse_args()
    model = load()
    rows = []
    for name in args.tasks.split(","):
        schema, prompts = task_outputs(name, args.prompts)
        machine = machine_of(compile_constraint(schema, strict=False))
        if not isinstance(machine, PushdownMachine):
            raise SystemExit(f"{name}: the schema compiled to a DFA, not a pushdown")
        blocks = len(block_plan(machine))
        generate(model, "warm up", schema, max_tokens=args.max_tokens, strict=False)
        for variant, prompt in enumerate(prompts):
            began = time.perf_counter()
            sequential = generate(model, prompt, schema, max_tokens=args.max_tokens, strict=False)
            middle = time.perf_counter()
            certified = generate(model, prompt, schema, max_tokens=args.max_tokens, parallel_fields=True, strict=False)
            ended = time.perf_counter()
            identical = certified.tokens == sequential.tokens
            margin = None if identical else first_difference_margin(model, prompt, schema, args.max_tokens,
                                                                    certified.tokens)
            row = {"task": name, "prompt": variant, "blocks": blocks, "identical": identical,
                   "near_tie_margin": margin, "sequential_passes": sequential.stats.passes,
                   "certified_passes": certified.stats.passes, "rounds": certified.stats.rounds,
                   "output_tokens": len(certified.tokens), "sequential_seconds": middle - began,
                   "certified_seconds": ended - middle}
            print(json.dumps(row), flush=True)
            rows.append(row)
    write(rows)


def summary_of(rows: list[dict]) -> dict:
    seq = sum(r["sequential_passes"] for r in rows)
    cert = sum(r["certified_passes"] for r in rows)
    return {"outputs": len(rows), "identical": sum(r["identical"] for r in rows),
            "sequential_passes": seq, "certified_passes": cert, "pass_ratio": seq / cert,
            "rounds_max": max(r["rounds"] for r in rows),
            "rounds_median": statistics.median(r["rounds"] for r in rows),
            "sequential_seconds": sum(r["sequential_seconds"] for r in rows),
            "certified_seconds": sum(r["certified_seconds"] for r in rows)}


def write(rows: list[dict]) -> None:
    groups = {"open extraction": [r for r in rows if r["task"] in EXTRACTION],
              "recursive": [r for r in rows if r["task"] in RECURSIVE], "all": rows}
    summaries = {label: summary_of(group) for label, group in groups.items() if group}
    report = {"command": " ".join(["python benchmarks/certified_open.py", *sys.argv[1:]]),
              "model": "SmolLM2-135M-Instruct fp32 (embedded GGUF)", "summaries": summaries, "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "certified_open.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# Certified block-parallel decoding on pushdown constraints vs sequential greedy "
             "(SmolLM2-135M fp32, CPU)", "",
             f"Command: `{report['command']}`", "",
             "Open extraction schemas (every `additionalProperties` removed) and recursive tasks; blocks lie between "
             "cut configurations.", "",
             "| task | prompt | blocks | identical | passes seq / cert | rounds | tokens | seconds seq / cert |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        same = "yes" if r["identical"] else f"no (near-tie margin {r['near_tie_margin']:.2e})"
        lines.append(f"| {r['task']} | {r['prompt']} | {r['blocks']} | {same} | {r['sequential_passes']} / "
                     f"{r['certified_passes']} | {r['rounds']} | {r['output_tokens']} | "
                     f"{r['sequential_seconds']:.1f} / {r['certified_seconds']:.1f} |")
    lines.append("")
    for label, s in summaries.items():
        lines.append(f"- {label}: {s['outputs']} outputs, {s['identical']} identical; passes "
                     f"{s['sequential_passes']} -> {s['certified_passes']} ({s['pass_ratio']:.2f}x fewer); rounds max "
                     f"{s['rounds_max']}, median {s['rounds_median']}; decode wall time "
                     f"{s['sequential_seconds']:.1f} s -> {s['certified_seconds']:.1f} s.")
    lines.append("")
    (RESULTS / "certified_open.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
