"""Mask and control work per decode step, two trees interleaved: SmolLM2-135M (fp32, CPU) at 1, 4 and 8 rows.

Two constraints: the person extraction schema (an object schema) and free text (no constraint, the language of
all UTF-8 text under the same budget and eos rules). Each measurement runs in a fresh process on one tree's
`stdsl` (PYTHONPATH), and the trees alternate (A B, then B A, ...) so a change in the machine's load falls on
both columns alike. The batch core is stepped directly (it owns no thread), after a warm-up run of every
constraint (compiles and first masks) and each row's prefill. Per step, in the stepping thread's CPU time
(`time.thread_time`: what the other sessions on a shared machine do not inflate): the row masks written into
the bitmask (`BatchCore._fill`, during the pass or at the draw), the constraint advances and text
(`BatchCore._advance`), and the whole step; the process's CPU time per step beside it.

    python benchmarks/step_profile.py --trees /tmp/main-tree . --labels main branch --repeats 3
    python benchmarks/step_profile.py --trees . --rows 1 4 --tokens 24 --constraints free

Writes benchmarks/results/step_profile.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / ".." / "shared" / "tasks" / "extraction" / "person.json"
RESULT = ROOT / "benchmarks" / "results" / "step_profile.md"
CONSTRAINTS = ("schema", "free")
PARTS = ("mask", "control", "step", "process")


def _request(model: Any, index: int, tokens: int, constraint: str) -> Any:
    """One extraction request (the person task) under its schema, or free text, its prompt made distinct per row so
    no prompt cache hit joins rows."""
    from stdsl.runtime.batch.requests import prepare_request
    from stdsl.runtime.options import DecodeOptions

    task = json.loads(TASK.read_text())
    prompt = task["prompts"][0].format(schema=json.dumps(task["schema"]), source=task["source"]) + f" (row {index})"
    schema = task["schema"] if constraint == "schema" else None
    return prepare_request(model, prompt, schema, DecodeOptions.of(max_tokens=tokens))


def _timed(spent: dict[str, float], part: str, method: Any) -> Any:
    """`method` adding its thread CPU seconds to `spent[part]`."""
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            spent[part] += time.thread_time() - began
    return timed


def profile(model: Any, rows: int, tokens: int, constraint: str) -> dict[str, float]:
    """CPU milliseconds per decode step (mask, control, the step, the process) for `rows` rows decoded together."""
    from stdsl.runtime.batch.core import BatchCore
    from stdsl.runtime.batch.row import RowHandle

    spent = dict.fromkeys(PARTS, 0.0)
    core = BatchCore(model, max_rows=rows, prompt_cache_bytes=0)
    core._fill = _timed(spent, "mask", core._fill)  # type: ignore[method-assign]
    core._advance = _timed(spent, "control", core._advance)  # type: ignore[method-assign]
    handles = [RowHandle(lambda: None) for _ in range(rows)]
    for k, handle in enumerate(handles):
        core.insert(_request(model, k, tokens, constraint), handle)
    core.step()  # the prefill of every row and the first pass
    spent.update(mask=0.0, control=0.0)
    drawn, steps = core.counters["sampled_tokens"], 0
    process = time.process_time()
    while core.busy:
        began = time.thread_time()
        core.step()
        spent["step"] += time.thread_time() - began
        steps += 1
    spent["process"] = time.process_time() - process
    assert all(h.done for h in handles)
    out = {part: 1000 * spent[part] / max(steps, 1) for part in PARTS}
    out.update(steps=steps, tokens=core.counters["sampled_tokens"] - drawn)
    return out


def worker(rows: list[int], tokens: int, constraints: list[str]) -> None:
    """Run every (constraint, rows) profile on the `stdsl` this process imports; print one JSON line each."""
    import stdsl

    model = stdsl.load()
    for constraint in constraints:
        profile(model, 1, 32, constraint)  # warm-up: compiles, first masks, kernels
    for constraint in constraints:
        for count in rows:
            print(json.dumps({"constraint": constraint, "rows": count, **profile(model, count, tokens, constraint)}),
                  flush=True)


def run_tree(tree: Path, rows: list[int], tokens: int, constraints: list[str]) -> list[dict[str, Any]]:
    """One worker process on `tree`'s stdsl."""
    command = [sys.executable, __file__, "--worker", "--rows", *map(str, rows), "--tokens", str(tokens),
               "--constraints", *constraints]
    done = subprocess.run(command, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True,
                          text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT])
    parser.add_argument("--labels", nargs="+")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--constraints", nargs="+", choices=CONSTRAINTS, default=list(CONSTRAINTS))
    parser.add_argument("--out", type=Path, default=RESULT)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.rows, args.tokens, args.constraints)
        return 0
    labels = args.labels or [tree.name for tree in args.trees]
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    load = os.getloadavg()[0]
    for repeat in range(args.repeats):
        order = list(zip(labels, args.trees))
        for label, tree in order if repeat % 2 == 0 else order[::-1]:
            runs[label] += run_tree(tree.resolve(), args.rows, args.tokens, args.constraints)
            print(f"repeat {repeat + 1}: {label} done", flush=True)
    header = " | ".join(f"{label} {part}" for label in labels for part in ("mask + control", "step", "process"))
    lines = ["# Mask and control per decode step, interleaved (SmolLM2-135M fp32, CPU, person schema and free text)",
             "", f"`python benchmarks/step_profile.py {' '.join(sys.argv[1:])}`; trees: "
             + ", ".join(f"{label} = {tree}" for label, tree in zip(labels, args.trees))
             + f"; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.", "",
             "CPU ms per decode step of the stepping thread (median over the repeats; the mask + control cell also "
             "lists each repeat's value), and of the whole process (`process`: MLX's threads too).", "",
             f"| constraint | rows | {header} |", "|---|---:|" + "---:|" * (3 * len(labels))]
    for constraint in args.constraints:
        for rows in args.rows:
            cells = []
            for label in labels:
                mine = [r for r in runs[label] if r["constraint"] == constraint and r["rows"] == rows]
                work = [r["mask"] + r["control"] for r in mine]
                cells += [f"{statistics.median(work):.2f} ({', '.join(f'{w:.2f}' for w in work)})",
                          f"{statistics.median(r['step'] for r in mine):.2f}",
                          f"{statistics.median(r['process'] for r in mine):.2f}"]
            lines.append(f"| {constraint} | {rows} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
