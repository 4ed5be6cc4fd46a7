"""What a new grammar costs over its first 30 tokens, beside a cached one and beside llguidance (issue 36, item 4).

On the embedded SmolLM2, each measurement in a fresh process (so every grammar is really new) with the model
loaded, per constraint:

- engine: the first 30 tokens of an output (`max_tokens=256`, greedy, the task's prompt; fewer where the output
  ends first) through the batch engine as shipped (`prepare_request` + `submit_request`), for the constraint seen
  for the first time and then again cached (the faster of two tries); extra = new - cached, in wall time and in
  the process's CPU time. Before each constraint one unrelated closed schema, open schema and Lark grammar are
  decoded, as a server that has served others has them: imports and the tokenizer's tables are warm. The
  prompt's KV state is cached beforehand and no measured request stores its own, so all prefill the same tokens
  and decode the same tokens (checked): the difference is what the new grammar costs (compile, constraint
  state, first visits of its states). Constraints: the six extraction schemas as they are (closed objects:
  DFAs), the same with every object opened (`additionalProperties: false` dropped) compiled with `strict=False`
  (pushdowns), and a Lark grammar (the official Lark JSON grammar);
- control: the row state alone, no model pass: the request prepared and the engine's tokens taken (the sampled
  ones; the forced ones come as planned), new and cached, in process CPU time, the new run split by part
  (compile, tables, token rows, boundary covers, budget masks; `COMPONENTS`), which a loaded machine barely
  moves; with `--baseline DIR` the same phase also runs on the stdsl checkout in DIR (an earlier commit), in its
  own processes of the same repeats on the same tokens;
- split: compile, planner, need table and first mask (`Controller.started()` + `row_mask()`) of each new
  extraction schema, the same first mask once cached, and llguidance's compile (grammar + `LLMatcher`) plus its
  first mask fill on the same tokenizer and schema.

Each phase runs `--repeats` times in its own fresh processes; the tables give the median. The garbage collector
runs before each timed stretch (as `timeit` keeps it out). The machine's load average is recorded beside the
results: on a shared machine the wall-clock columns carry its noise. Writes
benchmarks/results/first_token.{json,md}.

    python benchmarks/first_token.py                 # 3 repeats (about 6 min on 2 quiet cores)
    python benchmarks/first_token.py --repeats 1 --no-write
    python benchmarks/first_token.py --baseline ../main   # the row state's work beside another checkout's
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
WARM_OPEN_SCHEMA = {"type": "object", "properties": {"tag": {"type": "string"}, "ok": {"type": "boolean"}},
                    "required": ["tag"]}
WARM_GRAMMAR = 'start: "{" PAIR "}"\nPAIR: "\\"k\\": " ("1" | "2")\n'

TOKENS = 30
WARM_TOKENS = 4
"""Tokens each warm-up decode takes (its grammar's first states; the prompt's KV state is stored by the first)."""
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


def decoded_tokens(log: Any) -> list[int]:
    """The first `TOKENS` tokens a row's log holds."""
    return list(log.tokens[:TOKENS]) if log is not None else []


def warm_up(decode: Any, prompt: str) -> None:
    """Decode one unrelated constraint of each kind first (closed and open schema, a grammar), as a server that has
    served others: the imports and the tokenizer's tables are warm, and only what is new to a constraint is left."""
    import stdsl

    decode(prompt, WARM_SCHEMA, None, True, WARM_TOKENS)
    decode(prompt, WARM_OPEN_SCHEMA, False, True, WARM_TOKENS)
    decode(prompt, stdsl.Grammar(WARM_GRAMMAR), None, True, WARM_TOKENS)


def engine_phase(model: Any) -> dict[str, dict[str, float]]:
    """Per constraint: the first `TOKENS` tokens of an output through the engine as shipped, new and cached (ms), and
    the tokens decoded (for the control phase)."""
    from stdsl.runtime.batch.pass_clock import ahead_fraction
    from stdsl.runtime.batch.requests import prepare_request
    from stdsl.runtime.decode import engine_for
    from stdsl.runtime.options import DecodeOptions

    engine = engine_for(model)

    def decode(prompt: str, constraint: Any, strict: bool | None, remember: bool = False, count: int = TOKENS
               ) -> tuple[float, list[int], float, float]:
        """Seconds until the output holds `count` tokens (or ended), those tokens, the lookahead's seconds, and the
        process's CPU seconds meanwhile."""
        gc.collect()
        ahead_before = engine.metrics()["seconds"].get("ahead", 0.0)
        cpu = time.process_time()
        start = time.perf_counter()
        request = prepare_request(model, prompt, constraint, DecodeOptions.of(max_tokens=MAX_TOKENS, strict=strict))
        request.remember = remember
        request.until = lambda log: len(log.tokens) >= count  # the row ends once its log holds them
        handle = engine.submit_request(request)
        for _ in handle:
            pass
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
        tokens = decoded_tokens(handle.log)
        return elapsed, tokens, engine.metrics()["seconds"].get("ahead", 0.0) - ahead_before, cpu

    out: dict[str, dict[str, Any]] = {}
    for name, constraint, strict, prompt in cases():
        warm_up(decode, prompt)
        new, tokens, ahead_s, new_cpu = decode(prompt, constraint, strict)
        tries = [decode(prompt, constraint, strict) for _ in range(CACHED_TRIES)]
        cached = min(t for t, _, _, _ in tries)
        cached_cpu = min(c for _, _, _, c in tries)
        same = all(t == tokens for _, t, _, _ in tries)
        out[name] = {"new_ms": ms(new), "cached_ms": ms(cached), "extra_ms": ms(new - cached),
                     "extra_cpu_ms": ms(new_cpu - cached_cpu), "tokens": len(tokens), "ahead_ms": ms(ahead_s),
                     "ahead_fraction": ahead_fraction(), "same_tokens": float(same), "token_ids": tokens}
    engine.close()
    return out


COMPONENTS = {
    "compile": [("stdsl.compiler.constraint", None, "compile")],
    "tables": [("stdsl.control.tables", "Tables", "of"), ("stdsl.control.tables", "Tables", "controller")],
    "token rows": [("stdsl.kernels.rows", "RowCache", "_compute"),
                   ("stdsl.kernels.pushdown.context_rows", "ContextRows", "_build_free"),
                   ("stdsl.kernels.pushdown.context_rows", "ContextRows", "_build_context")],
    "covers": [("stdsl.control.split.boundary_cover", "BoundaryCovers", "_compute_cover"),
               ("stdsl.control.split.boundary_cover", "BoundaryCovers", "_chained_cover"),
               ("stdsl.control.split.boundary_cover", "BoundaryCovers", "lookaheads"),
               ("stdsl.control.split.boundary_cover", "BoundaryCovers", "_next_steps")],
    "budget masks": [("stdsl.control.controller", "Controller", "_budget_mask")],
}
"""Where a new constraint's control work goes: each part's functions, timed exclusive of the other parts'."""


class PartClock:
    """Process CPU seconds per part of `COMPONENTS`, each exclusive of the parts it calls (wraps their functions)."""

    def __init__(self) -> None:
        import importlib

        self.seconds: dict[str, float] = dict.fromkeys(COMPONENTS, 0.0)
        self._inner: list[float] = []
        for part, functions in COMPONENTS.items():
            for module_name, owner_name, name in functions:
                module = importlib.import_module(module_name)
                owner = module if owner_name is None else getattr(module, owner_name)
                setattr(owner, name, self._timed(part, getattr(owner, name), owner_name is not None
                                                 and isinstance(owner.__dict__.get(name), staticmethod)))

    def _timed(self, part: str, function: Any, static: bool) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.process_time()
            self._inner.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.process_time() - began
                self.seconds[part] += spent - self._inner.pop()
                if self._inner:
                    self._inner[-1] += spent

        return staticmethod(timed) if static else timed


def control_phase(model: Any, decoded: dict[str, list[int]]) -> dict[str, dict[str, float]]:
    """Per constraint: the row state alone (no model pass) taking the tokens the engine decoded, new and cached
    (process CPU ms), and the new one's CPU per part (`COMPONENTS`)."""
    from stdsl.runtime.batch.requests import prepare_request
    from stdsl.runtime.options import DecodeOptions

    clock = PartClock()
    words = np.zeros((model.vocab_size + 31) // 32, dtype=np.int32)

    def replay(prompt: str, constraint: Any, strict: bool | None, tokens: list[int]) -> float:
        """CPU seconds to prepare the request and take `tokens` (the sampled ones; forced ones come as planned)."""
        gc.collect()
        began = time.process_time()
        request = prepare_request(model, prompt, constraint, DecodeOptions.of(max_tokens=MAX_TOKENS, strict=strict))
        controller, log = request.controller, request.log
        while len(log.tokens) < len(tokens) and not log.configuration.finished:
            controller.fill_row(log, words)
            log = log.apply(controller.taken(log, tokens[len(log.tokens)]))
        spent = time.process_time() - began
        if tokens and decoded_tokens(log) != tokens[:TOKENS]:
            raise RuntimeError("the row state did not take the tokens the engine decoded")
        return spent

    out: dict[str, dict[str, float]] = {}
    for name, constraint, strict, prompt in cases():
        warm_up(lambda prompt, constraint, strict, *_: replay(prompt, constraint, strict, []), prompt)
        clock.seconds = dict.fromkeys(COMPONENTS, 0.0)
        new = replay(prompt, constraint, strict, decoded[name])
        parts = dict(clock.seconds)
        cached = min(replay(prompt, constraint, strict, decoded[name]) for _ in range(CACHED_TRIES))
        row = {"new_cpu_ms": ms(new), "cached_cpu_ms": ms(cached), "extra_cpu_ms": ms(new - cached)}
        row.update({f"{part}_ms": ms(seconds) for part, seconds in parts.items()})
        out[name] = row
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


PHASES = ("engine", "control", "split")
"""Each repeat's fresh processes: the engine as shipped, the row state alone on the engine's tokens, the split."""


def run_phase(phase: str, decoded: dict[str, list[int]] | None) -> dict[str, dict[str, Any]]:
    import stdsl

    model = stdsl.load()
    if phase == "split":
        return split_phase(model)
    if phase == "control":
        assert decoded is not None
        return control_phase(model, decoded)
    return engine_phase(model)


def median_table(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per case and numeric column: the median over repeats."""
    return {name: {key: round(statistics.median(run[name][key] for run in runs), 2) for key in runs[0][name]
                   if isinstance(runs[0][name][key], (int, float))}
            for name in runs[0]}


def render(report: dict) -> str:
    engine, control, split = report["engine"], report["control"], report["split"]
    baseline = report.get("control_baseline")
    fraction = max(e["ahead_fraction"] for e in engine.values())
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
        "state cached beforehand) through the batch engine as shipped, for the constraint seen for the first time "
        "(compile, constraint state and start, every first visit of a state), then cached (the faster of two "
        "tries); extra = new - cached in the same process (the median over processes, like every column); tokens "
        "decoded are the same new and cached in every process. Before each constraint the process decodes one "
        "unrelated closed schema, open schema and grammar (imports and the tokenizer's tables warm, as in a server "
        "that has served others). Open: the schema with `additionalProperties: false` dropped, `strict=False`. "
        f"The lookahead (`stdsl.control.lookahead`) as shipped on this backend: {fraction:.1f} of each pass "
        f"(none on MLX's CPU backend), {sum(e['ahead_ms'] for e in engine.values()):.1f} ms in all. Extra CPU: the "
        "process's CPU seconds (every thread, the model's included) new minus cached: a loaded machine inflates "
        "it less than wall time.",
        "",
        "| constraint | tokens | new ms | cached ms | extra ms | extra CPU ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in engine.items():
        lines.append(f"| {name} | {e['tokens']:.0f} | {e['new_ms']:.1f} | {e['cached_ms']:.1f} | "
                     f"{e['extra_ms']:.1f} | {e['extra_cpu_ms']:.1f} |")
    parts = list(COMPONENTS)
    lines += [
        "",
        "Control: the row state alone (no model pass) preparing the request and taking the tokens the engine "
        "decoded in the same repeat, new then cached (the faster of two), in process CPU ms; the new run's CPU "
        "per part, each exclusive of the others: compile (`stdsl.compile`), tables (`Tables.of` and "
        "`.controller`: planner, budget table), token rows (DFA rows, pushdown free and context rows), covers "
        "(the canonical split's boundary covers and their lookaheads), budget masks; other = extra minus the "
        "parts (plans, masks' assembly; negative where the cached runs did more of it)."
        + (f" Baseline: the same phase on stdsl at commit {report['baseline']} (`--baseline`), in its own processes "
           "of the same repeats, on the same tokens." if baseline else ""),
        "",
        "| constraint | new CPU ms | cached CPU ms | extra CPU ms | " + " | ".join(f"{p} ms" for p in parts)
        + " | other ms |" + (" baseline extra CPU ms | baseline token rows ms |" if baseline else ""),
        "|---|---|---|---|" + "---|" * (len(parts) + 1) + ("---|---|" if baseline else ""),
    ]
    for name, c in control.items():
        other = c["extra_cpu_ms"] - sum(c[f"{p}_ms"] for p in parts)
        lines.append(f"| {name} | {c['new_cpu_ms']:.1f} | {c['cached_cpu_ms']:.1f} | {c['extra_cpu_ms']:.1f} | "
                     + " | ".join(f"{c[f'{p}_ms']:.1f}" for p in parts) + f" | {other:.1f} |"
                     + (f" {baseline[name]['extra_cpu_ms']:.1f} | {baseline[name]['token rows_ms']:.1f} |"
                        if baseline else ""))
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


QUIET_LOAD = 2.5
"""The highest load average (on 2 cores) at which the wall-clock extra is judged against the target."""


def targets(engine: dict, control: dict, runs: list[dict], load: float) -> list[str]:
    """The target per group of constraints: on the row state's own extra CPU (what a new constraint costs in work),
    and on the engine's wall-clock extra where the machine was quiet enough for it to mean anything."""
    groups = {"closed schemas": [n for n in engine if n in TASKS],
              "open schemas": [n for n in engine if n.endswith("(open)")],
              "grammar": [GRAMMAR[0]]}
    out = []
    for label, names in groups.items():
        wall = [engine[n]["extra_ms"] for n in names]
        cpu = [engine[n]["extra_cpu_ms"] for n in names]
        work = [control[n]["extra_cpu_ms"] for n in names]
        judged = (f"→ {'met' if max(wall) <= TARGET_MS else 'NOT met'}" if load <= QUIET_LOAD
                  else f"not judged: noise at load {load:.1f}")
        out.append(f"{label}: a new constraint's first {TOKENS} tokens cost at most {TARGET_MS:.0f} ms more than a "
                   f"cached one's. Row state's own extra CPU max {max(work):.1f} ms, median "
                   f"{statistics.median(work):.1f} ms → {'met' if max(work) <= TARGET_MS else 'NOT met'}; engine "
                   f"extra CPU (the model's threads included) max {max(cpu):.1f} ms, median "
                   f"{statistics.median(cpu):.1f} ms; engine wall extra max {max(wall):.1f} ms, median "
                   f"{statistics.median(wall):.1f} ms ({judged})")
    changed = sorted({n for run in runs for n in run if run[n]["same_tokens"] < 1})
    out.append("tokens decoded new = cached in every process" if not changed
               else f"tokens differed between new and cached in: {', '.join(changed)}")
    return out


def code_commit(checkout: str | None = None) -> str:
    """The git commit of a checkout of stdsl, by default the one this run imports (it may be another worktree)."""
    import stdsl

    folder = Path(checkout) if checkout else Path(stdsl.__file__).resolve().parent
    done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--decoded", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", help="a checkout of stdsl (a folder holding its `stdsl` package) whose row "
                                           "state the control phase also runs, in processes of the same repeats")
    parser.add_argument("--no-write", action="store_true", help="print the table, write no result files")
    parser.add_argument("--results", default=str(BENCH_DIR / "results"), help="folder for first_token.{json,md}")
    args = parser.parse_args()
    if args.phase:
        decoded = Path(args.decoded)
        Path(args.out).write_text(json.dumps(run_phase(args.phase, json.loads(decoded.read_text())
                                                       if decoded.exists() else None)))
        return
    runs: dict[str, list] = {phase: [] for phase in PHASES}
    loads = []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            decoded = Path(folder) / f"decoded{repeat}.json"
            for phase in PHASES:
                out = Path(folder) / f"{phase}{repeat}.json"
                subprocess.run([sys.executable, __file__, "--phase", phase, "--out", str(out), "--decoded",
                                str(decoded)], check=True)
                result = json.loads(out.read_text())
                if phase == "engine":
                    decoded.write_text(json.dumps({name: row.pop("token_ids") for name, row in result.items()}))
                runs[phase].append(result)
                loads.append(os.getloadavg()[0])
            if args.baseline:
                out = Path(folder) / f"baseline{repeat}.json"
                subprocess.run([sys.executable, __file__, "--phase", "control", "--out", str(out), "--decoded",
                                str(decoded)], check=True, env={**os.environ, "PYTHONPATH": args.baseline})
                runs.setdefault("control_baseline", []).append(json.loads(out.read_text()))
                loads.append(os.getloadavg()[0])
    tables = {phase: median_table(found) for phase, found in runs.items()}
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
        "baseline": code_commit(args.baseline) if args.baseline else None,
        **tables,
        "runs": runs,
        "target": targets(tables["engine"], tables["control"], runs["engine"], max(loads)),
    }
    text = render(report)
    print(text)
    if not args.no_write:
        results = Path(args.results)
        (results / "first_token.json").write_text(json.dumps(report, indent=2) + "\n")
        (results / "first_token.md").write_text(text)


if __name__ == "__main__":
    main()
