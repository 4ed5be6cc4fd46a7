"""What a new grammar costs before its first token, beside a cached one and beside llguidance (issue 13, item 3).

On the embedded SmolLM2, for each of the six extraction schemas, in one process with the model
loaded and the tokenizer's own tables warm (one unrelated schema decoded first, as a server does at
start), two measurements:

- engine: the first sampled token through the batch engine (`prepare_request` + `submit_request`,
  `max_tokens=256`, the task's prompt), for the schema seen for the first time and then again (the
  median of three tries), timed until the output holds a byte past what was decided at the start
  (the forced prefix and any held-back forced bytes). The prompt's KV state is cached beforehand and
  no measured request stores its own, so all prefill the same tokens: the difference is what the new
  grammar costs (compile included);
- split: compile, planner, need table and first mask (`ConstraintState.start()` + `mask()`) of the
  new grammar, the same first mask once cached, and llguidance's compile (grammar + `LLMatcher`)
  plus its first mask fill on the same tokenizer and schema.

Each measurement runs in its own fresh process (so every grammar is really new), `--repeats` times;
the tables give the median. The garbage collector runs before each timed stretch (as `timeit` keeps
it out): a full collection lands on whichever step allocates when the interpreter decides, not on
the grammar that happens to be decoded then. Writes benchmarks/results/first_token.{json,md}.

    python benchmarks/first_token.py                 # 3 repeats (about 2 min on 2 cores)
    python benchmarks/first_token.py --repeats 1 --no-write
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from peers import version_of  # noqa: E402

SHARED = BENCH_DIR.parent.parent / "shared"
TASKS = ("person", "tool_call", "product", "event", "classification", "contact_card")
WARM_SCHEMA = {"type": "object", "properties": {"note": {"type": "string"}, "count": {"type": "integer"}},
               "required": ["note", "count"], "additionalProperties": False}
MAX_TOKENS = 256
TARGET_MS = 50.0
CACHED_TRIES = 3


def load_task(name: str) -> tuple[dict, str]:
    """(schema, prompt) of an extraction task: prompts[0] with its {source} and {schema} filled."""
    data = json.loads((SHARED / "tasks" / "extraction" / f"{name}.json").read_text())
    return data["schema"], data["prompts"][0].format(source=data["source"], schema=json.dumps(data["schema"]))


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 2)


def engine_phase(model: Any) -> dict[str, dict[str, float]]:
    """Per task: first sampled token through the engine for the new grammar and for it cached (ms)."""
    from stdsl.runtime.batch.requests import prepare_request
    from stdsl.runtime.decode import engine_for
    from stdsl.runtime.options import DecodeOptions

    engine = engine_for(model)
    options = DecodeOptions.of(max_tokens=MAX_TOKENS)

    def first_token(prompt: str, schema: dict, remember: bool = False) -> float:
        gc.collect()
        start = time.perf_counter()
        request = prepare_request(model, prompt, schema, options)
        request.remember = remember
        decided = len(request.control.decided)
        handle = engine.submit_request(request)
        seen = 0
        for event in handle:
            seen += len(event.text.encode("utf-8"))
            if seen > decided:
                break
        elapsed = time.perf_counter() - start
        handle.cancel()
        try:
            for _ in handle:
                pass
        except Exception:  # noqa: BLE001 - a cancelled row ends with its Cancelled error
            pass
        return elapsed

    out: dict[str, dict[str, float]] = {}
    for name in TASKS:
        schema, prompt = load_task(name)
        first_token(prompt, WARM_SCHEMA, remember=True)
        new = first_token(prompt, schema)
        cached = statistics.median(first_token(prompt, schema) for _ in range(CACHED_TRIES))
        out[name] = {"new_ms": ms(new), "cached_ms": ms(cached), "extra_ms": ms(new - cached)}
    engine.close()
    return out


def split_phase(model: Any) -> dict[str, dict[str, float]]:
    """Per task: compile, planner, need table and first mask of the new grammar, the cached first mask,
    and llguidance's compile and first mask on the same tokenizer (ms)."""
    import llguidance
    import llguidance.numpy

    import stdsl
    from stdsl.control.constraint_state import ConstraintState, shared_tables, vocabulary_of

    tokenizer = model.tokenizer
    vocab = vocabulary_of(tokenizer)
    llg_tokenizer = llguidance.LLTokenizer(tokenizer.hf.to_str(), n_vocab=model.vocab_size,
                                           eos_token=list(tokenizer.eos_ids))
    bits = np.full((1, (model.vocab_size + 31) // 32), -1, dtype=np.int32)
    overrides = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}

    def first_mask(automaton: Any) -> None:
        control = ConstraintState(automaton, tokenizer, vocab, max_tokens=MAX_TOKENS)
        control.start()
        control.mask()

    def llg_first_mask(schema: dict) -> tuple[float, float]:
        start = time.perf_counter()
        grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=overrides)
        matcher = llguidance.LLMatcher(llg_tokenizer, grammar, log_level=1)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error())
        compiled = time.perf_counter()
        llguidance.numpy.fill_next_token_bitmask(matcher, bits, 0)
        return compiled - start, time.perf_counter() - compiled

    first_mask(stdsl.compile(WARM_SCHEMA).automaton)
    llg_first_mask(WARM_SCHEMA)
    out: dict[str, dict[str, float]] = {}
    for name in TASKS:
        schema, _ = load_task(name)
        gc.collect()
        marks = [time.perf_counter()]
        automaton = stdsl.compile(schema).automaton
        marks.append(time.perf_counter())
        shared = shared_tables(automaton, vocab)
        planner = shared.planner(tokenizer, True)
        marks.append(time.perf_counter())
        shared.budget(planner)
        marks.append(time.perf_counter())
        first_mask(automaton)
        marks.append(time.perf_counter())
        gc.collect()
        marks.append(time.perf_counter())
        first_mask(stdsl.compile(schema).automaton)
        marks.append(time.perf_counter())
        gc.collect()
        llg_compile, llg_mask = llg_first_mask(schema)
        compile_s, planner_s, need_s, mask_s, _, cached_s = np.diff(marks).tolist()
        out[name] = {"states": automaton.num_states, "compile_ms": ms(compile_s), "planner_ms": ms(planner_s),
                     "need_ms": ms(need_s), "first_mask_ms": ms(mask_s),
                     "new_ms": ms(compile_s + planner_s + need_s + mask_s), "cached_ms": ms(cached_s),
                     "llguidance_compile_ms": ms(llg_compile), "llguidance_first_mask_ms": ms(llg_mask)}
    return out


def run_phase(phase: str) -> dict[str, dict[str, float]]:
    import stdsl

    model = stdsl.load()
    return engine_phase(model) if phase == "engine" else split_phase(model)


def median_table(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per task and column: the median over repeats."""
    return {name: {key: round(statistics.median(run[name][key] for run in runs), 2) for key in runs[0][name]}
            for name in runs[0]}


def render(report: dict) -> str:
    engine, split = report["engine"], report["split"]
    lines = [
        "# First token of a new grammar (issue 13, item 3)",
        "",
        f"Command: `{report['command']}`",
        "",
        f"{report['date']}, {report['machine']}, Python {report['python']}; model {report['model']}; "
        f"max_tokens={MAX_TOKENS}; median of {report['repeats']} fresh processes per measurement; "
        f"versions {report['versions']}; stdsl at commit {report['code']} (plus uncommitted work in its tree).",
        "",
        "Engine: the first sampled token through the batch engine (prompt render, compile, constraint state "
        "and start, prefill of the forced prefix after the cached prompt, first mask, sampling) for the schema "
        "seen for the first time, then again with everything cached (median of three tries); extra = new - "
        "cached in the same process (the median over processes, like every column). Split: the new grammar's "
        "compile, planner, need table and first mask (`start()` + `mask()`, which walks the rows it needs and "
        "computes the boundary covers), the same first mask once cached, and llguidance's compile (grammar + "
        "`LLMatcher`) and first mask on the same SmolLM2 tokenizer. Before each measurement the process "
        "decoded one unrelated schema (tokenizer-level tables warm, as in a server); the garbage collector ran "
        "before each timed stretch.",
        "",
        "| schema | states | engine new ms | engine cached ms | extra ms | compile ms | planner ms | need ms | "
        "first mask ms | new total ms | cached ms | extra without compile ms | llguidance compile ms | "
        "llguidance first mask ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in TASKS:
        e, s = engine[name], split[name]
        lines.append(
            f"| {name} | {s['states']:.0f} | {e['new_ms']:.1f} | {e['cached_ms']:.1f} | "
            f"{e['extra_ms']:.1f} | {s['compile_ms']:.1f} | {s['planner_ms']:.1f} | "
            f"{s['need_ms']:.1f} | {s['first_mask_ms']:.1f} | {s['new_ms']:.1f} | {s['cached_ms']:.2f} | "
            f"{s['new_ms'] - s['compile_ms'] - s['cached_ms']:.1f} | {s['llguidance_compile_ms']:.1f} | "
            f"{s['llguidance_first_mask_ms']:.1f} |")
    before = report.get("before")
    if before:
        lines += ["", f"## Before → after (before: the same script on stdsl at commit {before.get('code', '?')}, "
                  f"{before['date']}, median of {before['repeats']})", "",
                  "| schema | engine extra ms | need ms | planner ms | first mask ms | new total ms |",
                  "|---|---|---|---|---|---|"]
        for name in TASKS:
            e0, s0, e, s = before["engine"][name], before["split"][name], engine[name], split[name]
            lines.append(f"| {name} | {e0['extra_ms']:.1f} → {e['extra_ms']:.1f} | {s0['need_ms']:.1f} → "
                         f"{s['need_ms']:.1f} | {s0['planner_ms']:.1f} → {s['planner_ms']:.1f} | "
                         f"{s0['first_mask_ms']:.1f} → {s['first_mask_ms']:.1f} | "
                         f"{s0['new_ms']:.1f} → {s['new_ms']:.1f} |")
    lines += ["", "## Target", ""]
    for line in report["target"]:
        lines.append(f"- {line}")
    return "\n".join(lines) + "\n"


def targets(engine: dict, split: dict) -> list[str]:
    extra = [engine[name]["extra_ms"] for name in TASKS]
    constraint = [split[name]["new_ms"] - split[name]["compile_ms"] - split[name]["cached_ms"] for name in TASKS]
    worst = max(extra)
    return [
        f"a new extraction schema's first token costs at most {TARGET_MS:.0f} ms more than a cached one's: "
        f"engine extra max {worst:.1f} ms, median {statistics.median(extra):.1f} ms → "
        f"{'met' if worst <= TARGET_MS else 'NOT met'}",
        f"of which compile (issue 13 item 1) max {max(split[n]['compile_ms'] for n in TASKS):.1f} ms; "
        f"the rest (planner, need table, first mask) max {max(constraint):.1f} ms, median "
        f"{statistics.median(constraint):.1f} ms",
    ]


def code_commit() -> str:
    """The git commit of the stdsl this run imports (its checkout may be another worktree)."""
    import stdsl

    folder = Path(stdsl.__file__).resolve().parent
    done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--phase", choices=("engine", "split"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true", help="print the table, write no result files")
    parser.add_argument("--results", default=str(BENCH_DIR / "results"), help="folder for first_token.{json,md}")
    parser.add_argument("--before", help="a first_token.json of an earlier run (e.g. the code before a change) "
                                         "to show beside this one")
    args = parser.parse_args()
    if args.phase:
        Path(args.out).write_text(json.dumps(run_phase(args.phase)))
        return
    runs: dict[str, list] = {"engine": [], "split": []}
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            for phase in runs:
                out = Path(folder) / f"{phase}{repeat}.json"
                subprocess.run([sys.executable, __file__, "--phase", phase, "--out", str(out)], check=True)
                runs[phase].append(json.loads(out.read_text()))
    engine, split = median_table(runs["engine"]), median_table(runs["split"])
    versions = {name: version_of(name) for name in ("stdsl", "llguidance", "mlx")}
    report = {
        "command": "python benchmarks/first_token.py" + "".join(f" {a}" for a in sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "python": platform.python_version(),
        "model": "smollm2 (embedded)",
        "repeats": args.repeats,
        "versions": versions,
        "code": code_commit(),
        "engine": engine,
        "split": split,
        "runs": runs,
        "target": targets(engine, split),
        "before": json.loads(Path(args.before).read_text()) if args.before else None,
    }
    text = render(report)
    print(text)
    if not args.no_write:
        results = Path(args.results)
        (results / "first_token.json").write_text(json.dumps(report, indent=2) + "\n")
        (results / "first_token.md").write_text(text)


if __name__ == "__main__":
    main()
