"""The batch engine against mlx-lm's own `BatchGenerator` in the same process, on SmolLM2-135M (fp32, CPU).

1. Pass cost: one pass over B rows x T tokens, relative to one row x one token (the drip rule's TOKEN_COST);
   masks for many rows: rows on demand per row against one walk over the combined table (D.2).
2. Throughput (output tokens/s) at 1, 2, 4, 8 and 16 streams: free text, and constrained by the extraction
   schemas (mlx-lm with llguidance masks as logits processors); peak memory above the model.
3. 18 extraction jobs (6 schemas x 3 prompts) with 4 and 8 slots: wall time, valid outputs.

    python benchmarks/batch.py                       # everything (~20 min on 2 busy cores)
    python benchmarks/batch.py --sections jobs --slots 8

Writes benchmarks/results/batch.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import mlx.core as mx
import numpy as np
from mlx_lm.generate import BatchGenerator
from peers import LLGuidanceMask

from stdsl.runtime.batch.forward import forward_rows, make_row_caches
from stdsl.runtime.batch.prefill import TOKEN_COST
from stdsl.runtime.batch.requests import prompt_tokens
from stdsl.runtime.engine import Engine
from stdsl.runtime.model.loading import load
from stdsl.runtime.platform.blas import bind_blas

bind_blas()  # MKL for MLX's CPU matmuls before anything is timed (stdsl.load binds it too)

ROOT = Path(__file__).resolve().parents[1]
EXTRACTION = ROOT / ".." / "shared" / "tasks" / "extraction"
TASKS = ("person", "event", "product", "classification", "contact_card", "tool_call")
RESULTS = ROOT / "benchmarks" / "results"


def extraction_jobs() -> list[tuple[str, str, dict]]:
    jobs = []
    for name in TASKS:
        task = json.loads((EXTRACTION / f"{name}.json").read_text())
        for prompt in task["prompts"]:
            jobs.append((name, prompt.format(schema=json.dumps(task["schema"]), source=task["source"]), task["schema"]))
    return jobs


def llguidance_mask(tokenizer: Any, schema: dict, vocab_size: int) -> LLGuidanceMask:
    """mlx-lm's logits processor applying llguidance's mask for one request (the peer's constrained path)."""
    import llguidance

    overrides = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=overrides)
    return LLGuidanceMask(llguidance.LLMatcher(tokenizer, grammar, log_level=1), vocab_size)


def llg_tokenizer(model: Any) -> Any:
    import llguidance

    return llguidance.LLTokenizer(model.tokenizer.hf.to_str(), n_vocab=model.vocab_size,
                                  eos_token=list(model.tokenizer.eos_ids))


def run_mlx_lm(model: Any, prompts: list[list[int]], max_tokens: int, slots: int,
               schemas: list[dict] | None) -> dict[str, Any]:
    """mlx-lm's BatchGenerator (optionally with llguidance processors): wall time, tokens, texts."""
    tokenizer = llg_tokenizer(model) if schemas else None
    processors = [[llguidance_mask(tokenizer, s, model.vocab_size)] for s in schemas] if schemas else None
    mx.reset_peak_memory()
    began = time.perf_counter()
    generator = BatchGenerator(model.net, max_tokens=max_tokens, stop_tokens=[list(model.tokenizer.eos_ids)],
                               completion_batch_size=slots, prefill_batch_size=slots)
    uids = generator.insert(prompts, max_tokens=[max_tokens] * len(prompts), logits_processors=processors)
    out: dict[int, list[int]] = {uid: [] for uid in uids}
    while True:
        responses = generator.next_generated()
        if not responses:
            break
        for response in responses:
            if response.token not in model.tokenizer.eos_ids:
                out[response.uid].append(int(response.token))
    seconds = time.perf_counter() - began
    texts = [model.tokenizer.decode(out[uid]) for uid in uids]
    return {"seconds": seconds, "tokens": sum(len(t) for t in out.values()), "texts": texts,
            "peak_bytes": int(mx.get_peak_memory())}


def run_stdsl(model: Any, prompts: list[list[int]], max_tokens: int, slots: int,
              schemas: list[dict] | None, **options: Any) -> dict[str, Any]:
    """The batch engine with `slots` rows: wall time, output tokens, texts, passes, seconds per engine phase."""
    engine = Engine(model, max_rows=slots, prompt_cache_bytes=0)
    mx.reset_peak_memory()
    began = time.perf_counter()
    handles = [engine.submit(p, schemas[i] if schemas else None, max_tokens=max_tokens, **options)
               for i, p in enumerate(prompts)]
    results = [h.result() for h in handles]
    seconds = time.perf_counter() - began
    metrics = engine.metrics()
    engine.close()
    return {"seconds": seconds, "tokens": sum(len(r.tokens) for r in results), "texts": [r.text for r in results],
            "passes": metrics["passes"], "peak_bytes": int(mx.get_peak_memory()), "phases": metrics["seconds"]}


def pass_cost(model: Any, repeats: int) -> dict[str, Any]:
    """Median seconds of one pass over B rows x T new tokens on a 256-token context, relative to B=1, T=1."""
    context = list(range(1000, 1256))
    table: dict[str, float] = {}
    for rows in (1, 4, 8, 16):
        prefilled = make_row_caches(model.net, rows)
        mx.eval(forward_rows(model.net, prefilled, [context] * rows))
        for width in (1, 2, 4, 8, 16):
            times = []
            for _ in range(repeats):
                caches = prefilled.copy()  # a pass rebinds a cache's arrays and lengths
                began = time.perf_counter()
                mx.eval(forward_rows(model.net, caches, [list(range(2000, 2000 + width))] * rows))
                times.append(time.perf_counter() - began)
            table[f"{rows}x{width}"] = statistics.median(times)
    base = table["1x1"]
    relative = {k: v / base for k, v in table.items()}
    fit = [(int(k.split("x")[0]) * int(k.split("x")[1]) - 1, r - 1) for k, r in relative.items() if k != "1x1"]
    slope = sum(x * y for x, y in fit) / sum(x * x for x, _ in fit)
    return {"seconds": table, "relative": relative, "token_cost_fit": slope, "token_cost_used": TOKEN_COST}


def mask_paths(model: Any, steps: int) -> dict[str, Any]:
    """Masks for 6 rows (the extraction schemas, each driven along its gold answer): rows on demand per row
    against one walk over the combined table of all rows' automata (D.2), median per engine step."""
    from stdsl.compiler.constraint import compile as compile_constraint
    from stdsl.control.special_vocabulary import vocabulary_of
    from stdsl.control.tables import controller_of
    from stdsl.kernels.combined import CombinedTable
    from stdsl.kernels.walk import walk_next_states

    tokenizer = model.tokenizer
    vocab = vocabulary_of(tokenizer)
    controllers, logs, golds, automata = [], [], [], []
    for name in TASKS:
        task = json.loads((EXTRACTION / f"{name}.json").read_text())
        compiled = compile_constraint(task["schema"])
        controller = controller_of(compiled, tokenizer, max_tokens=None)
        controllers.append(controller)
        logs.append(controller.started())
        golds.append(tokenizer.encode(json.dumps(task["gold"], separators=(",", ":"), ensure_ascii=False)))
        automata.append(compiled.automaton)
    combined = CombinedTable.from_automata(automata)
    on_demand, walked = [], []
    for _ in range(steps):
        live = [i for i, log in enumerate(logs) if not log.configuration.finished]
        if not live:
            break
        began = time.perf_counter()
        masks = [controllers[i].row_mask(logs[i]) for i in live]
        on_demand.append(time.perf_counter() - began)
        states = [combined.offset(i) + logs[i].configuration.state for i in live]
        began = time.perf_counter()
        mx.eval(walk_next_states(combined, states, vocab))
        walked.append(time.perf_counter() - began)
        for i, mask in zip(live, masks):
            k = len(logs[i].tokens)
            want = golds[i][k] if k < len(golds[i]) else -1
            token = want if 0 <= want < len(mask) and mask[want] else int(np.flatnonzero(mask)[0])
            logs[i] = logs[i].apply(controllers[i].taken(logs[i], token))
    return {"steps": len(on_demand), "rows_on_demand_ms": 1e3 * statistics.median(on_demand),
            "combined_walk_ms": 1e3 * statistics.median(walked), "combined_states": combined.num_states}


def throughput(model: Any, streams: list[int], max_tokens: int) -> list[dict[str, Any]]:
    jobs = extraction_jobs()
    rows = []
    base = int(mx.get_active_memory())
    for count in streams:
        chosen = [jobs[i % len(jobs)] for i in range(count)]
        prompts = [prompt_tokens(model, p) for _, p, _ in chosen]
        schemas = [s for _, _, s in chosen]
        for mode in ("free", "constrained"):
            wanted = schemas if mode == "constrained" else None
            peer = run_mlx_lm(model, prompts, max_tokens, count, wanted)
            ours = run_stdsl(model, prompts, max_tokens, count, wanted)
            row = {"streams": count, "mode": mode,
                   "mlx_lm_tok_s": peer["tokens"] / peer["seconds"], "stdsl_tok_s": ours["tokens"] / ours["seconds"],
                   "mlx_lm_tokens": peer["tokens"], "stdsl_tokens": ours["tokens"], "stdsl_passes": ours["passes"],
                   "mlx_lm_peak_above_model_mb": (peer["peak_bytes"] - base) / 1e6,
                   "stdsl_peak_above_model_mb": (ours["peak_bytes"] - base) / 1e6}
            row["ratio"] = row["stdsl_tok_s"] / row["mlx_lm_tok_s"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def extraction_slots(model: Any, slots: list[int], max_tokens: int) -> list[dict[str, Any]]:
    jobs = extraction_jobs()
    prompts = [prompt_tokens(model, p) for _, p, _ in jobs]
    schemas = [s for _, _, s in jobs]
    rows = []
    for count in slots:
        peer = run_mlx_lm(model, prompts, max_tokens, count, schemas)
        ours = run_stdsl(model, prompts, max_tokens, count, schemas)
        valid = {name: sum(_valid(t, s) for t, s in zip(run["texts"], schemas))
                 for name, run in (("mlx_lm", peer), ("stdsl", ours))}
        row = {"slots": count, "jobs": len(jobs), "mlx_lm_seconds": peer["seconds"], "stdsl_seconds": ours["seconds"],
               "speedup": peer["seconds"] / ours["seconds"], "mlx_lm_valid": valid["mlx_lm"],
               "stdsl_valid": valid["stdsl"], "mlx_lm_tokens": peer["tokens"], "stdsl_tokens": ours["tokens"],
               "stdsl_passes": ours["passes"]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def _valid(text: str, schema: dict) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
        return True
    except (json.JSONDecodeError, jsonschema.ValidationError):
        return False


def write(report: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "batch.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# Batch engine vs mlx-lm BatchGenerator (SmolLM2-135M fp32, CPU, same process)", "",
             f"Command: `{report['command']}`", ""]
    cost = report.get("pass_cost")
    if cost:
        lines += ["## Pass cost (relative to one row x one token)", "", "| rows \\ tokens | 1 | 2 | 4 | 8 | 16 |",
                  "|---|---|---|---|---|---|"]
        for rows in (1, 4, 8, 16):
            cells = [f"{cost['relative'][f'{rows}x{w}']:.2f}" for w in (1, 2, 4, 8, 16)]
            lines.append(f"| {rows} | " + " | ".join(cells) + " |")
        lines += ["", f"Least-squares cost per extra position: {cost['token_cost_fit']:.3f} of a one-token pass "
                  f"(the engine's drip rule uses {cost['token_cost_used']:.3f}).", ""]
    masks = report.get("masks")
    if masks:
        lines += ["## Masks for six rows under six schemas (median per step)", "",
                  f"Rows on demand, one per row: {masks['rows_on_demand_ms']:.3f} ms; one walk over the combined table "
                  f"({masks['combined_states']} states, next states only): {masks['combined_walk_ms']:.3f} ms, over "
                  f"{masks['steps']} steps. The engine uses the faster here.", ""]
    if report.get("throughput"):
        lines += ["## Throughput (output tokens/s)", "",
                  "| streams | mode | mlx-lm | stdsl | ratio | peak above model, mlx-lm / stdsl (MB) |",
                  "|---|---|---|---|---|---|"]
        for r in report["throughput"]:
            lines.append(f"| {r['streams']} | {r['mode']} | {r['mlx_lm_tok_s']:.1f} | {r['stdsl_tok_s']:.1f} | "
                         f"{r['ratio']:.2f}x | {r['mlx_lm_peak_above_model_mb']:.0f} / "
                         f"{r['stdsl_peak_above_model_mb']:.0f} |")
        lines.append("")
    if report.get("extraction"):
        lines += ["## 18 extraction jobs", "", "| slots | mlx-lm + llguidance (s) | stdsl (s) | speedup | valid "
                  "(mlx-lm / stdsl) |", "|---|---|---|---|---|"]
        for r in report["extraction"]:
            lines.append(f"| {r['slots']} | {r['mlx_lm_seconds']:.1f} | {r['stdsl_seconds']:.1f} | "
                         f"{r['speedup']:.2f}x | {r['mlx_lm_valid']} / {r['stdsl_valid']} of {r['jobs']} |")
        lines.append("")
    (RESULTS / "batch.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", default="cost,masks,throughput,jobs")
    parser.add_argument("--streams", default="1,2,4,8,16")
    parser.add_argument("--slots", default="4,8")
    parser.add_argument("--max-tokens", type=int, default=64, help="per stream in the throughput section")
    parser.add_argument("--job-tokens", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = load()
    from stdsl.control.tables import controller_of
    from stdsl.runtime.batch.requests import compiled_constraint

    for _, _, schema in extraction_jobs()[::3]:
        controller_of(compiled_constraint(schema), model.tokenizer, max_tokens=args.job_tokens).started()
    sections = args.sections.split(",")
    report: dict[str, Any] = {"command": "python benchmarks/batch.py " + " ".join(sys.argv[1:]),
                              "model": "SmolLM2-135M-Instruct fp32 (embedded GGUF)"}
    if "cost" in sections:
        report["pass_cost"] = pass_cost(model, args.repeats)
        print(json.dumps(report["pass_cost"]["relative"]), flush=True)
    if "masks" in sections:
        report["masks"] = mask_paths(model, 200)
        print(json.dumps(report["masks"]), flush=True)
    if "throughput" in sections:
        report["throughput"] = throughput(model, [int(s) for s in args.streams.split(",")], args.max_tokens)
    if "jobs" in sections:
        report["extraction"] = extraction_slots(model, [int(s) for s in args.slots.split(",")], args.job_tokens)
    write(report)


if __name__ == "__main__":
    main()
