"""The five recursive tasks (issue 5): stdsl's pushdown engine against llguidance and XGrammar.

One process, one model (the embedded SmolLM2-135M-Instruct), the same chat-templated prompt ids
for every engine, greedy sampling. The peers (llguidance masks only and fast-forward, XGrammar masks only
and jump-forward) run in the shared decode loop of `decode.py`;
stdsl runs its own loop (`stdsl.runtime.decode.generate`, which picks the pushdown controller).
Reports passes per token, decode seconds, validity against the schema, equality with the gold
tree, and the memory of the constraint. Writes benchmarks/results/recursive.{json,md}.

    /tmp/peers/venv/bin/python benchmarks/recursive.py                 # stdsl + llguidance + XGrammar
    python benchmarks/recursive.py --engines stdsl                       # stdsl only (our venv)
    /tmp/peers/venv/bin/python benchmarks/recursive.py --engines xgrammar --merge  # replace those rows only
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import stdsl  # noqa: E402,I001
from stdsl.runtime.platform.blas import bind_blas  # noqa: E402
from decode import Run, Task, ForwardTimer, make_drivers, run_loop, token_text  # noqa: E402
from peers import fill_times, malloc_in_use, version_of  # noqa: E402
from stdsl.runtime import decode  # noqa: E402
from stdsl.runtime.decode import prompt_tokens  # noqa: E402
from stdsl.control.tables import Tables  # noqa: E402
from stdsl.control.special_vocabulary import vocabulary_of  # noqa: E402
from xgrammar_driver import XGrammarDriver  # noqa: E402

bind_blas()  # MKL for MLX's CPU matmuls before anything is timed (stdsl.load binds it too)

SHARED = BENCH_DIR.parent.parent / "shared"
ENGINES = ("stdsl", "llg_mask", "llg_ff", "xgrammar", "xgrammar_ff")
XGRAMMAR_ENGINES = ("xgrammar", "xgrammar_ff")


def load_tasks(names: Sequence[str] | None) -> list[Task]:
    """The recursive tasks with the prompt's {schema} (and {source}, if any) filled."""
    tasks = []
    for path in sorted((SHARED / "tasks" / "recursive").glob("*.json")):
        data = json.loads(path.read_text())
        if names and data["name"] not in names:
            continue
        prompt = data["prompt"].replace("{schema}", json.dumps(data["schema"])).replace("{source}", data["source"])
        tasks.append(Task(data["name"], data["schema"], prompt, data["gold"], []))
    return tasks


def run_stdsl(model: Any, task: Task, max_tokens: int, run: Run) -> int:
    """Compile (timed), decode with stdsl.generate; returns the constraint's memory in bytes after the run."""
    tick = time.perf_counter()
    constraint = stdsl.compile(task.schema)
    run.compile_s = time.perf_counter() - tick
    tick = time.perf_counter()
    result = decode.generate(model, task.prompt, constraint, max_tokens=max_tokens)
    run.seconds = time.perf_counter() - tick
    stats = result.stats
    run.text, run.tokens, run.finish = result.text, list(result.tokens), result.finish_reason
    run.passes, run.sampled_tokens, run.forced_tokens = stats.passes, stats.sampled_tokens, stats.forced_tokens
    run.output_tokens = stats.emitted_tokens
    rows = Tables.of(constraint.machine, vocabulary_of(model.tokenizer)).rows
    return constraint.nbytes + rows.nbytes


def grade(task: Task, run: Run, validator: Any) -> bool:
    """Mark validity against the schema; return whether the output equals the gold tree."""
    try:
        value = json.loads(run.text)
    except ValueError:
        return False
    run.valid = not run.error and not list(validator(task.schema).iter_errors(value))
    return value == task.gold


def table(columns: Sequence[str], rows: list[list[Any]]) -> list[str]:
    """A markdown table."""
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return out + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def render(report: dict[str, Any]) -> str:
    """The markdown report."""
    lines = [f"# Recursive tasks (issue 5): {report['model']}", "", f"Generated {report['generated']} on "
             f"{report['machine']} (greedy, max_tokens={report['max_tokens']}).", ""]
    rows = []
    for run in report["runs"]:
        ppt = run["passes"] / run["output_tokens"] if run["output_tokens"] else 0.0
        tps = run["output_tokens"] / run["seconds"] if run["seconds"] else 0.0
        memory = run.get("constraint_bytes")
        own = run.get("xgrammar_grammar_bytes")
        rows.append([run["task"], run["engine"], run["output_tokens"], run["passes"], f"{ppt:.2f}",
                     f"{run['seconds']:.2f}", f"{tps:.1f}", run["valid"], run.get("gold_equal", False),
                     (f"{memory / 1e6:.2f} MB" if memory else "n/a") + (f" (own {own / 1e3:.0f} KB)" if own else ""),
                     run["error"] or ""])
    lines += table(["task", "engine", "tokens", "passes", "passes/token", "decode s", "tok/s", "valid", "= gold",
                    "constraint memory", "error"], rows)
    lines += ["", "## Totals", ""]
    total_rows = []
    for engine, summary in report["summary"].items():
        forward_ms = 1000 * summary["forward_s"] / summary["passes"] if summary["passes"] else 0.0
        total_rows.append([engine, summary["tokens"], summary["passes"], f"{summary['passes_per_token']:.2f}",
                           f"{summary['seconds']:.2f}", f"{summary['tokens_per_second']:.1f}", f"{forward_ms:.1f}",
                           f"{summary['seconds'] - summary['forward_s']:.2f}",
                           f"{summary['valid']}/{summary['runs']}", f"{summary['gold_equal']}/{summary['runs']}"])
    lines += table(["engine", "tokens", "passes", "passes/token", "decode s", "tok/s", "forward ms/pass",
                    "decode s outside the forward", "valid", "= gold"], total_rows)
    lines += ["", "Constraint memory: stdsl counts the grammar tables, the interned configurations, memoized steps "
              "and byte rows, and the cached vocabulary rows after the run; llguidance and XGrammar are the "
              "malloc delta of compiling the grammar (XGrammar's own count of its compiled grammar, "
              "`CompiledGrammar.memory_size_bytes`, in parentheses).", ""]
    lines += [f"Command: `{command}`" for command in report.get("commands", [])]
    lines += [""] if report.get("commands") else []
    lines += [f"Note: {note}" for note in report.get("notes", [])] + ([""] if report.get("notes") else [])
    if report.get("qwen_masks"):
        lines += [render_masks(report["qwen_masks"])]
    return "\n".join(lines)


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per-engine totals."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        s = out.setdefault(run["engine"], {"runs": 0, "tokens": 0, "passes": 0, "seconds": 0.0, "forward_s": 0.0,
                                           "valid": 0, "gold_equal": 0})
        s["runs"] += 1
        s["tokens"] += run["output_tokens"]
        s["passes"] += run["passes"]
        s["seconds"] += run["seconds"]
        s["forward_s"] += run["forward_s"]
        s["valid"] += int(run["valid"])
        s["gold_equal"] += int(run.get("gold_equal", False))
    for s in out.values():
        s["passes_per_token"] = s["passes"] / s["tokens"] if s["tokens"] else 0.0
        s["tokens_per_second"] = s["tokens"] / s["seconds"] if s["seconds"] else 0.0
    return out


def qwen_mask_costs(tasks: list[Task], with_llguidance: bool) -> list[dict[str, Any]]:
    """Per-step full-vocabulary mask time and constraint memory on Qwen3.5's vocabulary along each gold answer."""
    import numpy as np
    from peers import load_qwen_vocab, make_peer

    from stdsl.kernels.pushdown.rows import PushdownRows
    from stdsl.kernels.vocab_sources import qwen_vocabulary

    qwen = load_qwen_vocab()
    vocab = qwen_vocabulary()
    peer = None
    if with_llguidance:
        peer = make_peer("llguidance", qwen.token_bytes, qwen.eos_id, qwen.encoding)
        peer.build_tokenizer()
    out = []
    for task in tasks:
        ids = qwen.encode(json.dumps(task.gold, separators=(",", ":"), ensure_ascii=False))
        constraint = stdsl.compile(task.schema)
        rows = PushdownRows(constraint.machine, vocab)
        config = constraint.machine.start
        times = []
        for token in ids:
            tick = time.perf_counter()
            allowed = rows.mask(config)
            times.append(time.perf_counter() - tick)
            assert allowed[token], (task.name, token)
            config = int(rows.next_states(config)[token])
        record: dict[str, Any] = {
            "task": task.name, "steps": len(ids), "stdsl_mask_ms_mean": 1000 * float(np.mean(times)),
            "stdsl_mask_ms_max": 1000 * float(np.max(times)), "stdsl_grammar_bytes": constraint.grammar.nbytes,
            "stdsl_constraint_bytes": constraint.nbytes + rows.nbytes,
            "stdsl_configurations": constraint.machine.num_configurations,
        }
        if peer is not None:
            before = malloc_in_use()
            matcher = peer.compile(task.schema)
            record["llguidance_compile_bytes"] = malloc_in_use() - before
            times = fill_times(peer, matcher, ids)
            record["llguidance_mask_ms_mean"] = 1000 * float(np.mean(times))
            record["llguidance_mask_ms_max"] = 1000 * float(np.max(times))
        out.append(record)
        print(record, flush=True)
    return out


def render_masks(records: list[dict[str, Any]]) -> str:
    """The markdown table of the Qwen3.5 mask measurements."""
    lines = ["## Masks on Qwen3.5's vocabulary (248,077 ids) along each gold answer", ""]
    rows = [[r["task"], r["steps"], f"{r['stdsl_mask_ms_mean']:.1f}", f"{r['stdsl_mask_ms_max']:.1f}",
             f"{r['stdsl_grammar_bytes'] / 1e3:.0f} KB", f"{r['stdsl_constraint_bytes'] / 1e6:.1f} MB",
             r["stdsl_configurations"], f"{r.get('llguidance_mask_ms_mean', float('nan')):.2f}",
             f"{r.get('llguidance_compile_bytes', 0) / 1e3:.0f} KB"] for r in records]
    lines += table(["task", "steps", "stdsl mask ms (mean)", "stdsl mask ms (max)", "grammar tables",
                    "stdsl constraint memory (after the walk)", "configurations", "llguidance mask ms (mean)",
                    "llguidance compile malloc"], rows)
    lines += ["", "stdsl composes each configuration's row from the free row of its state and, for the tokens that "
              "pop what they did not push, the context row of its top two return states (Theorem 22; "
              "`benchmarks/pushdown_masks.py` times that step alone); its memory is the grammar tables plus the "
              "interned configurations, memoized steps, the cached symbolic rows and the LRU of 4 composed rows.",
              ""]
    return "\n".join(lines)


def xgrammar_drivers(model: Any, engines: Sequence[str], import_errors: dict[str, str]) -> dict[str, Any]:
    """The XGrammar drivers for the requested engines; a missing xgrammar is recorded in `import_errors`."""
    drivers: dict[str, Any] = {}
    for name in engines:
        try:
            drivers[name] = XGrammarDriver(model, fast_forward=name == "xgrammar_ff")
        except ImportError as error:
            import_errors[name] = repr(error)
    return drivers


def merged(old: dict[str, Any], new: dict[str, Any], engines: Sequence[str]) -> dict[str, Any]:
    """The old report with the (task, engine) rows of the new run replaced, sorted by task then ENGINES order."""
    if old.get("max_tokens") != new["max_tokens"]:
        raise SystemExit(f"--merge: max_tokens {new['max_tokens']} differs from the report's {old.get('max_tokens')}")
    fresh = {(r["task"], r["engine"]) for r in new["runs"]}
    runs = [r for r in old["runs"] if (r["task"], r["engine"]) not in fresh] + new["runs"]
    rank = {name: i for i, name in enumerate(ENGINES)}
    runs.sort(key=lambda r: (r["task"], rank.get(r["engine"], len(rank))))
    versions = {k: v for k, v in (old.get("versions", {}) | new["versions"]).items() if v != "missing"}
    return old | {"runs": runs, "versions": versions, "generated": f"{old['generated']}; {', '.join(engines)} "
                  f"{new['generated']}", "commands": old.get("commands", []) + new["commands"],
                  "import_errors": old.get("import_errors", {}) | new["import_errors"]}


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and write the JSON and markdown results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--max-tokens", type=int, default=600)
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "recursive"))
    parser.add_argument("--masks-only", action="store_true", help="add the Qwen3.5 mask table to an existing report")
    parser.add_argument("--merge", action="store_true",
                        help="replace only the rows of the engines run in the existing report, keep the rest")
    args = parser.parse_args(argv)
    tasks = load_tasks([t for t in args.tasks.split(",") if t])
    engines = [e for e in args.engines.split(",") if e]
    out = Path(args.out)
    if args.masks_only:
        report = json.loads(out.with_suffix(".json").read_text())
        report["qwen_masks"] = qwen_mask_costs(tasks, "llg_mask" in engines)
        out.with_suffix(".json").write_text(json.dumps(report, indent=1))
        out.with_suffix(".md").write_text(render(report))
        print(render(report))
        return
    from jsonschema import Draft202012Validator

    model = stdsl.load()
    timer = ForwardTimer(model)
    drivers, import_errors = make_drivers(model, [e for e in engines if e not in ("stdsl", *XGRAMMAR_ENGINES)])
    drivers |= xgrammar_drivers(model, [e for e in engines if e in XGRAMMAR_ENGINES], import_errors)
    runs: list[dict[str, Any]] = []
    warm = Run("warm-up", "stdsl")
    run_stdsl(model, tasks[0], 60, warm)
    timer.calls = []
    for task in tasks:
        ids = prompt_tokens(model, task.prompt)
        for engine in engines:
            if engine in import_errors:
                continue
            run = Run(task.name, engine, prompt_tokens=len(ids))
            memory = None
            extra: dict[str, Any] = {}
            try:
                if engine == "stdsl":
                    memory = run_stdsl(model, task, args.max_tokens, run)
                else:
                    driver = drivers[engine]
                    before = malloc_in_use()
                    tick = time.perf_counter()
                    driver.compile(task.schema)
                    run.compile_s = time.perf_counter() - tick
                    memory = malloc_in_use() - before
                    if isinstance(driver, XGrammarDriver):
                        extra["xgrammar_grammar_bytes"] = driver.grammar_bytes()
                    run.tokens = run_loop(model, ids, driver, args.max_tokens, run)
                    run.text = token_text(model, run.tokens)
            except Exception as error:  # noqa: BLE001  (a failing engine is reported, the others still run)
                run.error = f"{type(error).__name__}: {error}"
            timer.take(run)
            gold_equal = grade(task, run, Draft202012Validator)
            record = asdict(run) | {"constraint_bytes": memory, "gold_equal": gold_equal} | extra
            runs.append(record)
            print(f"{task.name:11s} {engine:9s} {run.seconds:7.2f}s out {run.output_tokens:4d} passes {run.passes:4d} "
                  f"valid {run.valid} gold {gold_equal} mem {memory} {run.error or ''}", flush=True)
    report = {
        "model": getattr(model, "name", "SmolLM2-135M-Instruct"),
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "max_tokens": args.max_tokens,
        "versions": {name: version_of(name) for name in ("llguidance", "xgrammar")},
        "import_errors": import_errors,
        "runs": runs,
        "commands": [shlex.join([sys.executable, "benchmarks/recursive.py", *(argv or sys.argv[1:])])],
    }
    if args.merge and out.with_suffix(".json").exists():
        report = merged(json.loads(out.with_suffix(".json").read_text()), report, engines)
    report["summary"] = summarize(report["runs"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    out.with_suffix(".md").write_text(render(report))
    print(render(report))


if __name__ == "__main__":
    main()
