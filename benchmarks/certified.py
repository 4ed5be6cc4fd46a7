"""Certified block-parallel decoding against sequential greedy decoding, on SmolLM2-135M (fp32, CPU).

The 18 extraction outputs (6 schemas x 3 prompts of ../shared/tasks/extraction): model passes (waves +
certification passes), rounds, identical outputs (a difference must start at a near-tie), decode wall
time, for `parallel_fields=True` and `parallel_fields="auto"` (drafts only where this machine's measured
pass cost forecasts them cheaper). All runs use the same engine and warm constraint tables; each output is
decoded sequentially, then certified, then with auto, interleaved, after an untimed one-token run has put
the prompt in the prompt cache (so no mode pays its prefill alone). The pass cost is measured in the
warm-up (its time and points are reported, not counted in the rows).

    python benchmarks/certified.py                 # all 18 outputs (~20 min on 2 busy cores)
    python benchmarks/certified.py --tasks person --max-tokens 200

Writes benchmarks/results/certified.{json,md}.
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

from stdsl.runtime.certified.forecast import acceptance_for  # noqa: E402
from stdsl.runtime.decode import engine_for, generate  # noqa: E402
from stdsl.runtime.model.loading import load  # noqa: E402
from stdsl.runtime.pass_cost import pass_cost  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXTRACTION = ROOT / ".." / "shared" / "tasks" / "extraction"
TASKS = ("person", "tool_call", "product", "event", "classification", "contact_card")
RESULTS = ROOT / "benchmarks" / "results"


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
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--max-tokens", type=int, default=300)
    args = parser.parse_args()
    model = load()
    began = time.perf_counter()
    cost = pass_cost(model, engine_for(model).call)
    measured = {"seconds": time.perf_counter() - began, "tokens": cost.tokens, "pass_seconds": cost.seconds}
    rows = []
    for name in args.tasks.split(","):
        task = json.loads((EXTRACTION / f"{name}.json").read_text())
        generate(model, "warm up", task["schema"], max_tokens=args.max_tokens)
        for variant, template in enumerate(task["prompts"]):
            prompt = template.format(schema=json.dumps(task["schema"]), source=task["source"])
            generate(model, prompt, None, max_tokens=1)  # the prompt's KV state in the prompt cache for every mode
            began = time.perf_counter()
            sequential = generate(model, prompt, task["schema"], max_tokens=args.max_tokens)
            middle = time.perf_counter()
            certified = generate(model, prompt, task["schema"], max_tokens=args.max_tokens, parallel_fields=True)
            ended = time.perf_counter()
            auto = generate(model, prompt, task["schema"], max_tokens=args.max_tokens, parallel_fields="auto")
            after = time.perf_counter()
            identical = certified.tokens == sequential.tokens
            margin = None if identical else first_difference_margin(model, prompt, task["schema"], args.max_tokens,
                                                                    certified.tokens)
            row = {"task": name, "prompt": variant, "identical": identical, "near_tie_margin": margin,
                   "auto_identical": auto.tokens == sequential.tokens,
                   "sequential_passes": sequential.stats.passes, "certified_passes": certified.stats.passes,
                   "auto_passes": auto.stats.passes, "rounds": certified.stats.rounds,
                   "auto_rounds": auto.stats.rounds, "output_tokens": len(certified.tokens),
                   "sequential_seconds": middle - began, "certified_seconds": ended - middle,
                   "auto_seconds": after - ended, "acceptance": acceptance_for(model).rate}
            print(json.dumps(row), flush=True)
            rows.append(row)
    seq = sum(r["sequential_passes"] for r in rows)
    cert = sum(r["certified_passes"] for r in rows)
    summary = {"outputs": len(rows), "identical": sum(r["identical"] for r in rows),
               "sequential_passes": seq, "certified_passes": cert, "pass_ratio": seq / cert,
               "rounds_max": max(r["rounds"] for r in rows),
               "rounds_median": statistics.median(r["rounds"] for r in rows),
               "sequential_seconds": sum(r["sequential_seconds"] for r in rows),
               "certified_seconds": sum(r["certified_seconds"] for r in rows),
               "auto_identical": sum(r["auto_identical"] for r in rows),
               "auto_passes": sum(r["auto_passes"] for r in rows),
               "auto_drafted": sum(r["auto_rounds"] > 0 for r in rows),
               "auto_seconds": sum(r["auto_seconds"] for r in rows),
               "acceptance": rows[-1]["acceptance"]}
    report = {"command": "python benchmarks/certified.py " + " ".join(sys.argv[1:]),
              "model": "SmolLM2-135M-Instruct fp32 (embedded GGUF)", "pass_cost": measured, "summary": summary,
              "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "certified.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# Certified block-parallel decoding vs sequential greedy (SmolLM2-135M fp32, CPU)", "",
             f"Command: `{report['command']}`", "",
             f"Pass cost measured in {measured['seconds']:.2f} s (tokens fed: seconds): "
             + ", ".join(f"{n:g}: {t * 1000:.0f} ms" for n, t in zip(cost.tokens, cost.seconds)), "",
             "| task | prompt | identical cert / auto | passes seq / cert / auto | rounds cert / auto "
             "| seconds seq / cert / auto |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        same = "yes" if r["identical"] else f"no (near-tie margin {r['near_tie_margin']:.2e})"
        lines.append(f"| {r['task']} | {r['prompt']} | {same} / {'yes' if r['auto_identical'] else 'no'} | "
                     f"{r['sequential_passes']} / {r['certified_passes']} / {r['auto_passes']} | "
                     f"{r['rounds']} / {r['auto_rounds']} | {r['sequential_seconds']:.1f} / "
                     f"{r['certified_seconds']:.1f} / {r['auto_seconds']:.1f} |")
    s = summary
    lines += ["", f"All {s['outputs']} outputs: {s['identical']} identical certified, {s['auto_identical']} identical "
              f"auto; passes {s['sequential_passes']} -> {s['certified_passes']} certified ({s['pass_ratio']:.2f}x "
              f"fewer), {s['auto_passes']} auto; rounds max {s['rounds_max']}, median {s['rounds_median']}; auto "
              f"drafted {s['auto_drafted']} of {s['outputs']}; draft acceptance learned {s['acceptance']:.2f}; "
              f"decode wall time {s['sequential_seconds']:.1f} s sequential, {s['certified_seconds']:.1f} s "
              f"certified, {s['auto_seconds']:.1f} s auto.",
              ""]
    (RESULTS / "certified.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
