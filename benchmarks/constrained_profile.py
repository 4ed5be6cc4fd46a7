"""Where a constrained batch's time goes: stdsl against mlx-lm's BatchGenerator + llguidance, one model, same process.

The extraction prompts and schemas at `--streams` streams (as `models.py` runs them), a cold run of each engine, then
`--repeats` warm rounds interleaved. Per engine and round: wall and process CPU per output token, model passes per
output token, the model's work per output token (body positions: rows x width of every body call, padding
included; head rows: rows the vocabulary projection runs on, counted in stdsl's forward, and mlx-lm's decode rows, its
prefill logits being lazy and never computed),
and the host's phases (stdsl's engine phases; the time in llguidance's mask processor for mlx-lm), with the calls to
the tokenizer's own split (`encode_ordinary`, the canonical split's oracle).

    python benchmarks/constrained_profile.py                    # Gemma 3 270M, 8 streams
    python benchmarks/constrained_profile.py --family sliding   # a tiny family of models.py

Writes benchmarks/results/constrained_profile_{family}.{json,md} (or `--out` NAME.{json,md}).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

import models  # noqa: E402
from batch import extraction_jobs, run_mlx_lm, run_stdsl  # noqa: E402
from peers import LLGuidanceMask  # noqa: E402

from stdsl.model_files.tokenizer import Tokenizer  # noqa: E402
from stdsl.runtime.batch import forward  # noqa: E402
from stdsl.runtime.batch.requests import prompt_tokens  # noqa: E402
from stdsl.runtime.model.loading import GEMMA3_NAME, load  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TALLY: dict[str, float] = {}


def _tallied(owner: Any, name: str) -> None:
    """Wrap `owner.name` so each call adds its CPU seconds on the calling thread (not the time it waits for the model's
    threads) and a call to TALLY under `name`."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            TALLY[f"{name}_s"] = TALLY.get(f"{name}_s", 0.0) + time.thread_time() - began
            TALLY[f"{name}_calls"] = TALLY.get(f"{name}_calls", 0) + 1

    setattr(owner, name, wrapper)


def instrument(net: Any, shapes: list[tuple[int, int]]) -> None:
    """Record the (rows, width) of every call of `net`'s body in `shapes`; time llguidance's masks and the
    tokenizer's splits."""
    split = forward._split(net)
    assert split is not None, "the profile reads the body of a model whose head can be split"
    body = type(split[0])
    original = body.__call__

    def recording(self: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        shapes.append((int(inputs.shape[0]), int(inputs.shape[1])))
        return original(self, inputs, *args, **kwargs)

    body.__call__ = recording
    split_off = forward._split

    def counted_split(net: Any) -> Any:
        body, head = split_off(net)

        def counting(hidden: Any) -> Any:
            TALLY["head_rows"] = TALLY.get("head_rows", 0) + int(hidden.shape[0])
            return head(hidden)

        return body, counting

    forward._split = counted_split
    _tallied(LLGuidanceMask, "__call__")
    _tallied(Tokenizer, "encode_ordinary")


def head_rows(engine: str, calls: list[tuple[int, int]]) -> int:
    """Rows the head ran on: as stdsl's forward counted them; mlx-lm's decode steps (its prefill logits are lazy)."""
    return int(TALLY.get("head_rows", 0)) if engine == "stdsl" else sum(rows for rows, width in calls if width == 1)


def profile(model: Any, streams: int, max_tokens: int, repeats: int) -> list[dict[str, Any]]:
    """One row per engine and round (round 0 cold), the engines interleaved."""
    jobs = extraction_jobs()
    chosen = [jobs[i % len(jobs)] for i in range(streams)]
    prompts = [prompt_tokens(model, p) for _, p, _ in chosen]
    schemas = [s for _, _, s in chosen]
    shapes: list[tuple[int, int]] = []
    instrument(model.net, shapes)
    rows = []
    for round_ in range(repeats + 1):
        for engine in ("mlx_lm", "stdsl") if round_ % 2 == 0 else ("stdsl", "mlx_lm"):
            TALLY.clear()
            shapes.clear()
            passes = models.MODEL_PASSES[0]
            cpu = time.process_time()
            run = run_mlx_lm if engine == "mlx_lm" else run_stdsl
            got = run(model, prompts, max_tokens, streams, schemas)
            cpu = time.process_time() - cpu
            tokens = got["tokens"]
            row = {"engine": engine, "round": round_, "tokens": tokens, "wall_s": got["seconds"], "cpu_s": cpu,
                   "cpu_ms_per_token": 1e3 * cpu / tokens, "wall_ms_per_token": 1e3 * got["seconds"] / tokens,
                   "model_passes_per_token": (models.MODEL_PASSES[0] - passes) / tokens if engine == "stdsl"
                   else len(shapes) / tokens,
                   "body_positions_per_token": sum(r * w for r, w in shapes) / tokens,
                   "head_rows_per_token": head_rows(engine, shapes) / tokens,
                   "llguidance_mask_s": TALLY.get("__call___s", 0.0) if engine == "mlx_lm" else 0.0,
                   "split_calls": TALLY.get("encode_ordinary_calls", 0), "split_s": TALLY.get("encode_ordinary_s", 0.0),
                   "phases": got.get("phases", {})}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]], engine: str, key: str) -> float:
    return statistics.median(r[key] for r in rows if r["engine"] == engine and r["round"] > 0)


def write(report: dict[str, Any], out: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{out}.json").write_text(json.dumps(report, indent=1))
    rows = report["rows"]
    keys = [("wall ms per output token", "wall_ms_per_token"), ("process CPU ms per output token", "cpu_ms_per_token"),
            ("model passes per output token", "model_passes_per_token"),
            ("body positions per output token (rows x width, padding included)", "body_positions_per_token"),
            ("head rows per output token", "head_rows_per_token"),
            ("llguidance mask CPU seconds (its thread)", "llguidance_mask_s"),
            ("tokenizer split calls (canonical split)", "split_calls"),
            ("tokenizer split CPU seconds (calling thread)", "split_s")]
    lines = [f"# Constrained profile: {report['family']} at {report['streams']} streams, mlx-lm + llguidance vs stdsl",
             "", f"Command: `{report['command']}`", "",
             f"Medians of {report['repeats']} warm rounds (cold round dropped), engines interleaved in one process; "
             f"load average {report['load_average']:.1f} at the start (2 cores shared with other work).", "",
             "| measure | mlx-lm + llguidance | stdsl | mlx-lm / stdsl |", "|---|---|---|---|"]
    for label, key in keys:
        peer, ours = summary(rows, "mlx_lm", key), summary(rows, "stdsl", key)
        ratio = f"{peer / ours:.2f}x" if ours else "-"
        lines.append(f"| {label} | {peer:.3g} | {ours:.3g} | {ratio} |")
    phases = [r["phases"] for r in rows if r["engine"] == "stdsl" and r["round"] > 0]
    lines += ["", "stdsl's engine phases (seconds, median of the warm rounds; `prefill`, `pass` and `wait` hold the "
              "model's compute, `control` the constraint's advance and canonical split, `mask` the masks not filled "
              "during a pass, `sample` the masked draw):", "",
              "| phase | seconds |", "|---|---|"]
    for phase in phases[0] if phases else {}:
        lines.append(f"| {phase} | {statistics.median(p[phase] for p in phases):.2f} |")
    lines += ["", *report.get("notes", [])]
    (RESULTS / f"{out}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default=GEMMA3_NAME, choices=[GEMMA3_NAME, *models.FAMILIES])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None, help="results name under benchmarks/results (default: "
                        "constrained_profile_FAMILY)")
    args = parser.parse_args()
    model = load(GEMMA3_NAME) if args.family == GEMMA3_NAME else models.family_model(args.family, load().tokenizer)
    report = {"command": "python benchmarks/constrained_profile.py " + " ".join(sys.argv[1:]), "family": args.family,
              "streams": args.streams, "repeats": args.repeats, "load_average": os.getloadavg()[0],
              "rows": profile(model, args.streams, args.max_tokens, args.repeats)}
    write(report, args.out or f"constrained_profile_{args.family.replace('-', '_')}")


if __name__ == "__main__":
    main()
