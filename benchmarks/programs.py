"""Programs of steps against the same work as separate `generate` calls (issue 33's benchmark).

The four example programs of `examples/steps/` run on the embedded SmolLM2 (greedy) four ways, in one process:

- program: `prog.run(model, ...)`: every step continues the token sequence the engine decoded for the one before, so
  the prompt cache serves all but the new text; a fork's branches decode as rows of one batch;
- separate calls: the same program function driven by a stand-in state that, for every step, re-sends the whole
  conversation so far as one prompt (`stdsl.generate(model, text, constraint, chat=False)`, the text tokenized
  whole, the way a client re-sends its messages) and runs a fork's branches one after another (what users write
  today); the engine's prompt cache is on, so it serves whatever prefix the re-tokenized text shares;
- separate calls, no cache: the same on an engine without a prompt cache (a stateless API: every call prefills
  its whole prompt);
- mlx-lm + llguidance: the same separate calls made with mlx-lm's `generate_step` on the same weights, each step's
  constraint as an llguidance matcher applied as a logits processor (a Pydantic class or JSON Schema through
  llguidance's JSON compiler, compact separators, objects closed as stdsl's strict default reads them; a `Regex`
  through its regex compiler), the whole conversation re-sent and re-prefilled every call and a fork's branches
  one after another.

The prompt cache is emptied before every run, so each run starts as a new request would. Reported per program and
variant: model passes (forward passes of the whole run: a pass over a batch of fork rows counts once), prompt
tokens sent, prompt tokens prefilled (sent minus served by the cache), wall seconds
(median over `--repeats`), and whether every step's value came back valid and typed. Writes
benchmarks/results/programs.{json,md}.

    python benchmarks/programs.py                  # 3 repeats (about 15 min on 2 shared cores)
    python benchmarks/programs.py --repeats 1 --no-write
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

from peers import LLGuidanceMask  # noqa: E402

import stdsl as stcon  # noqa: E402
from stdsl.compiler.constraint import Regex  # noqa: E402
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
VARIANTS = ("program", "separate calls", "separate calls, no cache", "mlx-lm + llguidance")
TARGETS = {"prefill": 1.5, "wall": 1.3}


class SeparateCalls:
    """A stand-in for the program state: each step is its own `generate` call on the whole conversation so far
    (re-sent as text), forks run one after another. It keeps the same transcript text as the program's."""

    def __init__(self, model: Any, transcript: Transcript, values: dict[str, Any], steps: list[dict[str, Any]],
                 peer: MlxLmLLGuidance | None = None):
        self.model, self.transcript, self.values, self.steps, self.peer = model, transcript, values, steps, peer

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
        if self.peer is not None:
            generation = self.peer.generate(self.transcript.text, step)
        else:
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
        forks = Branches(SeparateCalls(self.model, self.transcript.copy(), dict(self.values), self.steps, self.peer)
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


class CountedNet:
    """The model's network with its forward calls counted (mlx-lm's passes: prefill chunks and one per token)."""

    def __init__(self, net: Any) -> None:
        self.net, self.calls = net, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.net(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.net, name)


class MlxLmLLGuidance:
    """One step as a separate mlx-lm call (greedy) on the whole conversation so far, under llguidance's matcher."""

    def __init__(self, model: Any) -> None:
        import llguidance

        self.llg, self.model = llguidance, model
        self.tokenizer = llguidance.LLTokenizer(model.tokenizer.hf.to_str(), n_vocab=model.vocab_size,
                                                eos_token=list(model.tokenizer.eos_ids))
        self.net: Any = CountedNet(model.net)
        self.eos = {int(t) for t in model.tokenizer.eos_ids}

    def grammar(self, constraint: Any) -> str | None:
        """llguidance's grammar for a step's constraint (None: free text)."""
        if constraint is None:
            return None
        if isinstance(constraint, Regex):
            return str(self.llg.LLMatcher.grammar_from_regex(constraint.pattern))
        schema = closed(constraint.model_json_schema() if hasattr(constraint, "model_json_schema") else constraint)
        overrides: Any = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
        return str(self.llg.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=overrides))

    def generate(self, text: str, step: Gen) -> Any:
        """Decode `step` after `text` (tokenized whole, prefilled whole); its text, value and stats."""
        import mlx.core as mx
        from mlx_lm.generate import generate_step

        grammar = self.grammar(step.constraint)
        matcher = self.llg.LLMatcher(self.tokenizer, grammar, log_level=1) if grammar is not None else None
        processors: list[Any] | None = [LLGuidanceMask(matcher, self.model.vocab_size)] if matcher else None
        prompt = self.model.tokenizer.encode(text)
        before = self.net.calls
        tokens: list[int] = []
        for token, _ in generate_step(mx.array(prompt), self.net, max_tokens=step.options.get("max_tokens", 256),
                                      sampler=lambda logprobs: mx.argmax(logprobs, axis=-1),
                                      logits_processors=processors):
            if int(token) in self.eos:
                break
            tokens.append(int(token))
            if matcher is not None and (matcher.is_stopped() or matcher.is_error()):
                break
        out = self.model.tokenizer.decode(tokens)
        if matcher is not None and not matcher.is_accepting():
            raise ValueError(f"step {step.name!r}: llguidance's output {out!r} is incomplete (max_tokens)")
        stats = SimpleNamespace(passes=self.net.calls - before, prompt_tokens=len(prompt), cached_tokens=0,
                                emitted_tokens=len(tokens))
        return SimpleNamespace(text=out, tokens=tokens, stats=stats, value=read_value(step.constraint, out))


def closed(schema: Any) -> Any:
    """`schema` with every object that does not say otherwise closed to its named properties, as stdsl's strict
    default reads it (llguidance, like JSON Schema, leaves them open and then writes extra keys)."""
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: closed(value) for key, value in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def read_value(constraint: Any, text: str) -> Any:
    """A peer's output read as stdsl reads it: a Pydantic instance, JSON, or the text (checked against a Regex)."""
    if isinstance(constraint, Regex):
        if re.fullmatch(constraint.pattern, text) is None:
            raise ValueError(f"{text!r} does not match {constraint.pattern!r}")
        return text
    if hasattr(constraint, "model_validate_json"):
        return constraint.model_validate_json(text)
    return json.loads(text) if constraint is not None else text


def example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"steps_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_once(model: Any, program: Any, args: dict[str, Any], variant: str, peer: MlxLmLLGuidance) -> dict[str, Any]:
    """One run of a program in one variant: passes, tokens, seconds, step values."""
    engine = engine_for(model)
    engine.prompt_cache.clear()
    passes_before, calls_before = engine.metrics()["passes"], peer.net.calls
    began = time.perf_counter()
    if variant == "program":
        run = program.run(model, **args)
        seconds = time.perf_counter() - began
        stats = [step.stats for step in run.steps if step.stats is not None]
        values = [step.value for step in run.steps if step.stats is not None]
        valid = not run.errors
    else:
        steps: list[dict[str, Any]] = []
        state = SeparateCalls(model, Transcript(model.tokenizer), {}, steps,
                              peer if variant == "mlx-lm + llguidance" else None)
        try:
            program.function(state, **args)
            valid = True
        except (ValueError, KeyError) as error:  # a peer's output that does not read back as its step's type
            print(f"{variant}: invalid: {error}", flush=True)
            valid = False
        seconds = time.perf_counter() - began
        stats = [step["stats"] for step in steps]
        values = list(state.values.values())
    passes = (peer.net.calls - calls_before if variant == "mlx-lm + llguidance"
              else engine.metrics()["passes"] - passes_before)
    return {"seconds": seconds, "passes": passes, "steps": len(stats),
            "prompt_tokens": sum(s.prompt_tokens for s in stats),
            "prefilled_tokens": sum(s.prompt_tokens - s.cached_tokens for s in stats),
            "output_tokens": sum(s.emitted_tokens for s in stats), "valid": valid,
            "values": [repr(v) for v in values]}


def measure(model: Any, repeats: int, only: str | None = None) -> list[dict[str, Any]]:
    rows = []
    uncached = Engine(model, prompt_cache_bytes=0)
    shared = engine_for(model)
    peer = MlxLmLLGuidance(model)
    for module_name, program_name, args in CASES:
        if only is not None and module_name != only:
            continue
        program = getattr(example(module_name), program_name)
        results: dict[str, list[dict[str, Any]]] = {variant: [] for variant in VARIANTS}
        for variant in VARIANTS:  # warm: compile every constraint once
            model._stdsl_engine = uncached if variant.endswith("no cache") else shared
            run_once(model, program, args, variant, peer)
        for _ in range(repeats):
            for variant in VARIANTS:
                model._stdsl_engine = uncached if variant.endswith("no cache") else shared
                results[variant].append(run_once(model, program, args, variant, peer))
        model._stdsl_engine = shared
        row: dict[str, Any] = {"example": module_name, "args": args}
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
              "re-tokenized text shares with what was decoded before. mlx-lm + llguidance makes the same separate "
              "calls with mlx-lm's `generate_step` under llguidance masks: no prompt cache between calls, so every "
              "call prefills its whole prompt. The program continues the decoded token sequence, so each step "
              "prefills only its new text, and decodes a fork's branches as rows of one batch: passes count forward "
              "passes of the whole run, so a pass over the rows of every branch counts once.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--only", help="run only this example (e.g. plan_then_expand); implies --no-write")
    options = parser.parse_args()
    command = "python benchmarks/programs.py" + (f" --repeats {options.repeats}" if options.repeats != 3 else "")
    model = stcon.load()
    rows = measure(model, options.repeats, options.only)
    report = markdown(rows, options.repeats, command)
    print(report)
    if not options.no_write and options.only is None:
        summary = {baseline: ratios(rows, baseline) for baseline in VARIANTS[1:]}
        (RESULTS / "programs.json").write_text(json.dumps({"command": command, "repeats": options.repeats,
                                                           "targets": TARGETS, "ratios": summary, "cases": rows},
                                                          indent=2) + "\n")
        (RESULTS / "programs.md").write_text(report)


if __name__ == "__main__":
    main()
