"""Programs of steps against the same work as separate `generate` calls (issue 33's benchmark).

The four example programs of `examples/steps/` run on the embedded SmolLM2 (greedy) three ways, in one process:

- program: `prog.run(model, ...)`: every step continues the token sequence the engine decoded for the one before, so
  the prompt cache serves all but the new text; a fork's branches decode as rows of one batch;
- separate calls: the same program function driven by a stand-in state that, for every step, re-sends the whole
  conversation so far as one prompt (`stdsl.generate(model, text, constraint, chat=False)`, the text tokenized
  whole, the way a client re-sends its messages) and runs a fork's branches one after another (what users write
  today); the engine's prompt cache is on, so it serves whatever prefix the re-tokenized text shares;
- separate calls, no cache: the same on an engine without a prompt cache (a stateless API: every call prefills
  its whole prompt).

The prompt cache is emptied before every run, so each run starts as a new request would. Reported per program and
variant: model passes, prompt tokens sent, prompt tokens prefilled (sent minus served by the cache), wall seconds
(median over `--repeats`), and whether every step's value came back valid and typed. Writes
benchmarks/results/programs.{json,md}.

    python benchmarks/programs.py                  # 3 repeats (about 10 min on 2 shared cores)
    python benchmarks/programs.py --repeats 1 --no-write
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import stdsl as stcon  # noqa: E402
from stdsl.runtime.decode import engine_for, generate  # noqa: E402
from stdsl.runtime.engine import Engine  # noqa: E402
from stdsl.runtime.program_steps.actions import Gen  # noqa: E402
from stdsl.runtime.program_steps.transcript import Transcript  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
EXAMPLES = ROOT / "examples" / "steps"
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("classify_then_branch", "triage", {"ticket": "The app crashes every time I press the save button."}),
    ("classify_then_branch", "triage", {"ticket": "How do I change the colour of my profile page?"}),
    ("plan_then_expand", "plan_and_expand", {"goal": "bake bread at home"}),
    ("plan_then_expand", "plan_and_expand", {"goal": "learn to swim"}),
    ("tool_loop", "solve", {"question": "What is 12 times 7, plus 5?"}),
    ("draft_critique_revise", "write", {"topic": "tides"}),
]
VARIANTS = ("program", "separate calls", "separate calls, no cache")
TARGETS = {"prefill": 1.5, "wall": 1.3}


class SeparateCalls:
    """A stand-in for the program state: each step is its own `generate` call on the whole conversation so far
    (re-sent as text), forks run one after another. It keeps the same transcript text as the program's."""

    def __init__(self, model: Any, transcript: Transcript, values: dict[str, Any], steps: list[dict[str, Any]]):
        self.model, self.transcript, self.values, self.steps = model, transcript, values, steps

    def __iadd__(self, item: Any) -> SeparateCalls:
        if isinstance(item, str):
            self.transcript.append(item)
        elif isinstance(item, Gen):
            self._generate(item)
        else:
            for part in item:
                self += part
        return self

    def _message(self, role: str, content: Any) -> Any:
        state = self

        class Block:
            def __enter__(self) -> SeparateCalls:
                state.transcript.open(role)
                return state

            def __exit__(self, *exc: object) -> None:
                state.transcript.close()

        if content is not None:
            with Block():
                self += content
        return Block()

    def system(self, content: Any = None) -> Any:
        return self._message("system", content)

    def user(self, content: Any = None) -> Any:
        return self._message("user", content)

    def assistant(self, content: Any = None) -> Any:
        return self._message("assistant", content)

    def _generate(self, step: Gen) -> None:
        if self.transcript.role is None and self.transcript.messages:
            self.transcript.open("assistant")
        generation = generate(self.model, self.transcript.text, step.constraint, chat=False, **step.options)
        self.values[step.name] = step.read(generation)
        self.transcript.append(generation.text)
        self.steps.append({"name": step.name, "stats": generation.stats})

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def call(self, name: str, function: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.values[name] = function(*args, **kwargs)
        return self.values[name]

    def fork(self, branches: Any) -> Any:
        texts = [None] * branches if isinstance(branches, int) else list(branches)
        forks = Branches(SeparateCalls(self.model, self.transcript.copy(), dict(self.values), self.steps)
                         for _ in texts)
        for state, text in zip(forks, texts):
            if text is not None:
                state += text
        return forks


class Branches(list[SeparateCalls]):
    """Forks of the stand-in: decoded one after another."""

    def __iadd__(self, item: Any) -> Branches:  # type: ignore[override,misc]
        for state in self:
            state += item
        return self

    def values(self, name: str) -> list[Any]:
        return [state[name] for state in self]


def example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"steps_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_once(model: Any, program: Any, args: dict[str, Any], variant: str) -> dict[str, Any]:
    """One run of a program in one variant: passes, tokens, seconds, step values."""
    engine_for(model).prompt_cache.clear()
    began = time.perf_counter()
    if variant == "program":
        run = program.run(model, **args)
        seconds = time.perf_counter() - began
        stats = [step.stats for step in run.steps if step.stats is not None]
        values = [step.value for step in run.steps if step.stats is not None]
        valid = not run.errors
    else:
        steps: list[dict[str, Any]] = []
        state = SeparateCalls(model, Transcript(model.tokenizer), {}, steps)
        program.function(state, **args)
        seconds = time.perf_counter() - began
        stats = [step["stats"] for step in steps]
        values = list(state.values.values())
        valid = True
    return {"seconds": seconds, "passes": sum(s.passes for s in stats), "steps": len(stats),
            "prompt_tokens": sum(s.prompt_tokens for s in stats),
            "prefilled_tokens": sum(s.prompt_tokens - s.cached_tokens for s in stats),
            "output_tokens": sum(s.emitted_tokens for s in stats), "valid": valid,
            "values": [repr(v) for v in values]}


def measure(model: Any, repeats: int) -> list[dict[str, Any]]:
    rows = []
    uncached = Engine(model, prompt_cache_bytes=0)
    shared = engine_for(model)
    for module_name, program_name, args in CASES:
        program = getattr(example(module_name), program_name)
        results: dict[str, list[dict[str, Any]]] = {variant: [] for variant in VARIANTS}
        for variant in VARIANTS:  # warm: compile every constraint once
            model._stdsl_engine = uncached if variant.endswith("no cache") else shared
            run_once(model, program, args, variant)
        for _ in range(repeats):
            for variant in VARIANTS:
                model._stdsl_engine = uncached if variant.endswith("no cache") else shared
                results[variant].append(run_once(model, program, args, variant))
        model._stdsl_engine = shared
        row = {"example": module_name, "args": args}
        for variant, runs in results.items():
            last = runs[-1]
            row[variant] = {**{k: last[k] for k in ("passes", "steps", "prompt_tokens", "prefilled_tokens",
                                                   "output_tokens", "values")},
                            "seconds": statistics.median(r["seconds"] for r in runs),
                            "valid": all(r["valid"] for r in runs)}
        rows.append(row)
        brief = {variant: {k: v for k, v in row[variant].items() if k != "values"} for variant in VARIANTS}
        print(json.dumps({"example": module_name, **brief}), flush=True)
    uncached.close()
    return rows


def ratios(rows: list[dict[str, Any]], baseline: str) -> dict[str, float]:
    """Totals over every case: the baseline's prefilled tokens and seconds over the program's."""
    def total(variant: str, key: str) -> float:
        return sum(row[variant][key] for row in rows)

    return {"prefill": total(baseline, "prefilled_tokens") / max(total("program", "prefilled_tokens"), 1),
            "wall": total(baseline, "seconds") / total("program", "seconds"),
            "passes": total(baseline, "passes") / total("program", "passes")}


def markdown(rows: list[dict[str, Any]], repeats: int, command: str) -> str:
    lines = ["# Programs of steps against separate `generate` calls (issue 33)", "",
             f"Command: `{command}` ({repeats} repeats, wall time the median; {platform.machine()}, "
             f"{platform.python_version()}). SmolLM2-135M-Instruct, greedy, the prompt cache emptied before every run.",
             "", "| program | input | variant | steps | passes | prompt tokens sent | prefilled | seconds | valid |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        label = next(iter(row["args"].values()))[:32]
        for variant in VARIANTS:
            r = row[variant]
            lines.append(f"| {row['example']} | {label} | {variant} | {r['steps']} | {r['passes']} | "
                         f"{r['prompt_tokens']} | {r['prefilled_tokens']} | {r['seconds']:.2f} | "
                         f"{'yes' if r['valid'] else 'no'} |")
    lines += ["", "Totals over every case (baseline / program; targets: prefill ≥ "
              f"{TARGETS['prefill']}×, wall ≥ {TARGETS['wall']}×):", "",
              "| baseline | prefilled tokens | wall time | model passes |", "|---|---|---|---|"]
    for baseline in VARIANTS[1:]:
        r = ratios(rows, baseline)
        lines.append(f"| {baseline} | {r['prefill']:.2f}× | {r['wall']:.2f}× | {r['passes']:.2f}× |")
    lines += ["", "Separate calls re-send the whole conversation as text each step and run a fork's branches one "
              "after another; with the engine's prompt cache on, the cache still serves the prefix that the "
              "re-tokenized text shares with what was decoded before. The program continues the decoded token "
              "sequence, so each step prefills only its new text, and decodes a fork's branches as rows of one batch.",
              ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    options = parser.parse_args()
    command = "python benchmarks/programs.py" + (f" --repeats {options.repeats}" if options.repeats != 3 else "")
    model = stcon.load()
    rows = measure(model, options.repeats)
    report = markdown(rows, options.repeats, command)
    print(report)
    if not options.no_write:
        summary = {baseline: ratios(rows, baseline) for baseline in VARIANTS[1:]}
        (RESULTS / "programs.json").write_text(json.dumps({"command": command, "repeats": options.repeats,
                                                           "targets": TARGETS, "ratios": summary, "cases": rows},
                                                          indent=2) + "\n")
        (RESULTS / "programs.md").write_text(report)


if __name__ == "__main__":
    main()
