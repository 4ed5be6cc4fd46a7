"""What a new grammar costs over its first 30 tokens, beside a cached one and beside llguidance (issue 36, item 4).

On the embedded SmolLM2, in one process with the model loaded and the tokenizer's own tables warm (one
unrelated schema decoded first, as a server does at start), per constraint:

- engine: the first 30 tokens of an output (`max_tokens=256`, greedy, the task's prompt; fewer where the output
  ends first) through the batch engine (`prepare_request` + `submit_request`), for the constraint seen for the
  first time and then again cached (the faster of two tries); extra = new - cached. The prompt's KV state is
  cached beforehand and no measured request stores its own, so all prefill the same tokens and decode the same
  tokens (checked): the difference is what the new grammar costs (compile, constraint state, first visits of
  its states). Constraints: the six extraction schemas as they are (closed objects: DFAs), the same with every
  object opened (`additionalProperties: false` dropped) compiled with `strict=False` (pushdowns), and a Lark
  grammar (the official Lark JSON grammar). Each repeat runs the engine in two processes, with its lookahead
  forced on (`AHEAD_FRACTION = GPU_AHEAD_FRACTION`: new grammars' tables warmed while passes run,
  `stdsl.control.lookahead`; the default on the CPU backend is none) and without it (`AHEAD_FRACTION = 0`):
  the same engine in the same run as its own baseline;
- split: compile, planner, need table and first mask (`Controller.started()` + `row_mask()`) of each new
  extraction schema, the same first mask once cached, and llguidance's compile (grammar + `LLMatcher`) plus its
  first mask fill on the same tokenizer and schema.

Each measurement runs in its own fresh process (so every grammar is really new), `--repeats` times;
the tables give the median. The garbage collector runs before each timed stretch (as `timeit` keeps
it out). The machine's load average is recorded beside the results: on a shared machine the wall-clock
columns carry its noise. Writes benchmarks/results/first_token.{json,md}.

    python benchmarks/first_token.py                 # 3 repeats (about 6 min on 2 quiet cores)
    python benchmarks/first_token.py --repeats 1 --no-write
"""

from __future__ import annotations

import argparse
import gc
import json
import os
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
GRAMMAR = ("lark_json", SHARED / "grammars" / "lark_json_official.lark",
           "Describe the city of Oslo as a JSON object with a few fields.")
WARM_SCHEMA = {"type": "object", "properties": {"note": {"type": "string"}, "count": {"type": "integer"}},
               "required": ["note", "count"], "additionalProperties": False}
TOKENS = 30
MAX_TOKENS = 256
TARGET_MS = 50.0
CACHED_TRIES = 2


def load_task(name: str) -> tuple[dict, str]:
    """(schema, prompt) of an extraction task: prompts[0] with its {source} and {schema} filled."""
    data = json.loads((SHARED / "tasks" / "extraction" / f"{name}.json").read_text())
    return data["schema"], data["prompts"][0].format(source=data["source"], schema=json.dumps(data["schema"]))


def opened(schema: Any) -> Any:
    """The schema with every `additionalProperties: false` dropped: its objects open to undeclared members."""
    if isinstance(schema, dict):
        return {key: opened(value) for key, value in schema.items()
                if not (key == "additionalProperties" and value is False)}
    if isinstance(schema, list):
        return [opened(item) for item in schema]
    return schema


def cases() -> list[tuple[str, Any, bool | None, str]]:
    """(name, constraint, strict, prompt) of every measured constraint: closed schemas, opened ones, a grammar."""
    import stdsl

    out: list[tuple[str, Any, bool | None, str]] = []
    for name in TASKS:
        schema, prompt = load_task(name)
        out.append((name, schema, None, prompt))
    for name in TASKS:
        schema, prompt = load_task(name)
        out.append((f"{name} (open)", opened(schema), False, prompt))
    name, path, prompt = GRAMMAR
    out.append((name, stdsl.Grammar(path.read_text()), None, prompt))
    return out


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 2)


def engine_phase(model: Any, ahead: bool) -> dict[str, dict[str, float]]:
    """Per constraint: the first `TOKENS` tokens of an output through the engine, new and cached (ms)."""
    import stdsl.runtime.batch.pass_clock as pass_clock
    from stdsl.runtime.batch.requests import prepare_request
    from stdsl.runtime.decode import engine_for
    from stdsl.runtime.options import DecodeOptions

    pass_clock.AHEAD_FRACTION = pass_clock.GPU_AHEAD_FRACTION if ahead else 0.0
    engine = engine_for(model)

    def decode(prompt: str, constraint: Any, strict: bool | None, remember: bool = False
               ) -> tuple[float, list[int], float, float]:
        """Seconds until the output holds `TOKENS` tokens (or ended), those tokens, the lookahead's seconds, and the
        process's CPU seconds meanwhile."""
        gc.collect()
        ahead_before = engine.metrics()["seconds"].get("ahead", 0.0)
        cpu = time.process_time()
        start = time.perf_counter()
        request = prepare_request(model, prompt, constraint, DecodeOptions.of(max_tokens=MAX_TOKENS, strict=strict))
        request.remember = remember
        request.until = lambda log: len(log.tokens) >= TOKENS  # the row ends once its log holds them
        handle = engine.submit_request(request)
        for _ in handle:
            pass
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
        tokens = list(handle.log.tokens[:TOKENS]) if handle.log is not None else []
        return elapsed, tokens, engine.metrics()["seconds"].get("ahead", 0.0) - ahead_before, cpu

    out: dict[str, dict[str, float]] = {}
    for name, constraint, strict, prompt in cases():
        decode(prompt, WARM_SCHEMA, None, remember=True)
        new, tokens, ahead_s, new_cpu = decode(prompt, constraint, strict)
        tries = [decode(prompt, constraint, strict) for _ in range(CACHED_TRIES)]
        cached = min(t for t, _, _, _ in tries)
        cached_cpu = min(c for _, _, _, c in tries)
        same = all(t == tokens for _, t, _, _ in tries)
        out[name] = {"new_ms": ms(new), "cached_ms": ms(cached), "extra_ms": ms(new - cached),
                     "extra_cpu_ms": ms(new_cpu - cached_cpu), "tokens": len(tokens), "ahead_ms": ms(ahead_s),
                     "same_tokens": float(same)}
    engine.close()
    return out


def split_phase(model: Any) -> dict[str, dict[str, float]]:
    """Per task: compile, planner, need table and first mask of the new grammar, the cached first mask,
    and llguidance's compile and first mask on the same tokenizer (ms)."""
    import llguidance
    import llguidance.numpy

    import stdsl
    from stdsl.control.special_vocabulary import vocabulary_of
    from stdsl.control.tables import Tables

    tokenizer = model.tokenizer
    vocab = vocabulary_of(tokenizer)
    llg_tokenizer = llguidance.LLTokenizer(tokenizer.hf.to_str(), n_vocab=model.vocab_size,
                                           eos_token=list(tokenizer.eos_ids))
    bits = np.full((1, (model.vocab_size + 31) // 32), -1, dtype=np.int32)
    overrides = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}

    def first_mask(automaton: Any) -> None:
        controller = Tables.of(automaton, vocab).controller(tokenizer, max_tokens=MAX_TOKENS)
        controller.row_mask(controller.started())

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
        shared = Tables.of(automaton, vocab)
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


PHASES = ("engine", "engine_plain", "split")
"""Each repeat's fresh processes: the engine with its lookahead, the engine without it, the split."""


def run_phase(phase: str) -> dict[str, dict[str, float]]:
    import stdsl

    model = stdsl.load()
    if phase == "split":
        return split_phase(model)
    return engine_phase(model, ahead=phase == "engine")


def median_table(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per case and column: the median over repeats."""
    return {name: {key: round(statistics.median(run[name][key] for run in runs), 2) for key in runs[0][name]}
            for name in runs[0]}


def render(report: dict) -> str:
    engine, plain, split = report["engine"], report["engine_plain"], report["split"]
    lines = [
        "# The first 30 tokens of a new grammar (issue 36, item 4)",
        "",
        f"Command: `{report['command']}`",
        "",
        f"{report['date']}, {report['machine']}, Python {report['python']}; model {report['model']}; "
        f"max_tokens={MAX_TOKENS}; median of {report['repeats']} fresh processes per measurement; "
        f"versions {report['versions']}; stdsl at commit {report['code']}; load average during the run "
        f"{report['load']} on {report['cores']} cores.",
        "",
        "Engine: the first 30 tokens of an output (fewer where it ends first; greedy, the task's prompt, its KV "
        "state cached beforehand) through the batch engine for the constraint seen for the first time (compile, "
        "constraint state and start, every "
        "first visit of a state), then cached (the faster of two tries); extra = new - cached in the same process "
        "(the median over processes, like every column); tokens decoded are the same new and cached in every "
        "process. With lookahead: the engine as shipped (new grammars' tables warmed while passes run; `ahead ms` "
        "is the time it spent so, inside the new run); without: the same engine, lookahead off, in its own "
        "processes of the same run. Open: the schema with `additionalProperties: false` dropped, `strict=False`. "
        "Extra CPU: the process's CPU seconds (every thread) new minus cached: what the new grammar costs in work, "
        "which a loaded machine inflates less than wall time; the lookahead moves that work into the passes' "
        "waits rather than removing it.",
        "",
        "| constraint | tokens | new ms | cached ms | extra ms | ahead ms | extra without lookahead ms | "
        "extra CPU ms | extra CPU without lookahead ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in engine.items():
        lines.append(f"| {name} | {e['tokens']:.0f} | {e['new_ms']:.1f} | {e['cached_ms']:.1f} | "
                     f"{e['extra_ms']:.1f} | {e['ahead_ms']:.1f} | {plain[name]['extra_ms']:.1f} | "
                     f"{e['extra_cpu_ms']:.1f} | {plain[name]['extra_cpu_ms']:.1f} |")
    lines += [
        "",
        "Split (closed extraction schemas): the new grammar's compile, planner, need table and first mask "
        "(`start()` + `mask()`), the same first mask once cached, and llguidance's compile (grammar + `LLMatcher`) "
        "and first mask on the same SmolLM2 tokenizer.",
        "",
        "| schema | states | compile ms | planner ms | need ms | first mask ms | new total ms | cached ms | "
        "llguidance compile ms | llguidance first mask ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in TASKS:
        s = split[name]
        lines.append(
            f"| {name} | {s['states']:.0f} | {s['compile_ms']:.1f} | {s['planner_ms']:.1f} | {s['need_ms']:.1f} | "
            f"{s['first_mask_ms']:.1f} | {s['new_ms']:.1f} | {s['cached_ms']:.2f} | "
            f"{s['llguidance_compile_ms']:.1f} | {s['llguidance_first_mask_ms']:.1f} |")
    lines += ["", "## Target", ""]
    for line in report["target"]:
        lines.append(f"- {line}")
    return "\n".join(lines) + "\n"


def targets(engine: dict, plain: dict) -> list[str]:
    groups = {"closed schemas": [n for n in engine if n in TASKS],
              "open schemas": [n for n in engine if n.endswith("(open)")],
              "grammar": [GRAMMAR[0]]}
    out = []
    for label, names in groups.items():
        extra = [engine[n]["extra_ms"] for n in names]
        without = [plain[n]["extra_ms"] for n in names]
        worst = max(extra)
        out.append(f"{label}: a new constraint's first {TOKENS} tokens cost at most {TARGET_MS:.0f} ms more "
                   f"than a cached one's: extra max {worst:.1f} ms, median {statistics.median(extra):.1f} ms "
                   f"→ {'met' if worst <= TARGET_MS else 'NOT met'} (without lookahead: max {max(without):.1f} ms, "
                   f"median {statistics.median(without):.1f} ms)")
    changed = [n for n in engine if engine[n]["same_tokens"] < 1 or plain[n]["same_tokens"] < 1]
    out.append("tokens decoded new = cached in every process" if not changed
               else f"tokens differed between new and cached in: {', '.join(changed)}")
    return out


def code_commit() -> str:
    """The git commit of the stdsl this run imports (its checkout may be another worktree)."""
    import stdsl

    folder = Path(stdsl.__file__).resolve().parent
    done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true", help="print the table, write no result files")
    parser.add_argument("--results", default=str(BENCH_DIR / "results"), help="folder for first_token.{json,md}")
    args = parser.parse_args()
    if args.phase:
        Path(args.out).write_text(json.dumps(run_phase(args.phase)))
        return
    runs: dict[str, list] = {phase: [] for phase in PHASES}
    loads = []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            for phase in PHASES:
                out = Path(folder) / f"{phase}{repeat}.json"
                subprocess.run([sys.executable, __file__, "--phase", phase, "--out", str(out)], check=True)
                runs[phase].append(json.loads(out.read_text()))
                loads.append(os.getloadavg()[0])
    tables = {phase: median_table(runs[phase]) for phase in PHASES}
    versions = {name: version_of(name) for name in ("stdsl", "llguidance", "mlx")}
    report = {
        "command": "python benchmarks/first_token.py" + "".join(f" {a}" for a in sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "cores": os.cpu_count(),
        "load": f"{min(loads):.1f}-{max(loads):.1f}",
        "python": platform.python_version(),
        "model": "smollm2 (embedded)",
        "repeats": args.repeats,
        "versions": versions,
        "code": code_commit(),
        **tables,
        "runs": runs,
        "target": targets(tables["engine"], tables["engine_plain"]),
    }
    text = render(report)
    print(text)
    if not args.no_write:
        results = Path(args.results)
        (results / "first_token.json").write_text(json.dumps(report, indent=2) + "\n")
        (results / "first_token.md").write_text(text)


if __name__ == "__main__":
    main()
