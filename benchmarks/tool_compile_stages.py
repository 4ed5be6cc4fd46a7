"""Where a tool reply grammar's build spends its process CPU time, stage by stage: for random tools (cold, every
cache emptied, then the same list with one tool changed) it times each stage exclusively (a nested stage's time
is not counted in its caller's) with `time.process_time`, which a loaded machine inflates far less than wall time.

Stages: the per-tool schema compile, the format's raw-value intersections (arguments kept free of the call's end
literals), the call layout (a call's DFA from its head, arguments and tail), the guarded calls (the new calls of a
JSON-arguments format built together: guard product, head, tail, one trim), the reply skeleton, the substitution
of the calls into it, the rest of `build_constraint`, then on the Qwen3.5 vocabulary the token table (`WalkTable`),
the first mask, and the canonical-split and budget tables a `max_tokens` request builds (forced chains, bound).
Writes benchmarks/results/tool_compile_profile.md.

    python benchmarks/tool_compile_stages.py --tools 128 --formats hermes qwen_xml harmony
"""

from __future__ import annotations

import argparse
import functools
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from random_tools import random_tools  # noqa: E402
from tool_compile import _changed, _spec  # noqa: E402


class StageClock:
    """Exclusive process CPU time per stage: entering a stage pauses the one it was called from."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.stack: list[tuple[str, float]] = []

    def wrap(self, stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.enter(stage)
            try:
                return function(*args, **kwargs)
            finally:
                self.leave()
        return timed

    def enter(self, stage: str) -> None:
        now = time.process_time()
        if self.stack:
            outer, began = self.stack[-1]
            self.seconds[outer] = self.seconds.get(outer, 0.0) + now - began
        self.stack.append((stage, now))

    def leave(self) -> None:
        now = time.process_time()
        stage, began = self.stack.pop()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - began
        if self.stack:
            self.stack[-1] = (self.stack[-1][0], now)


STAGES = ("schema compile", "raw-value intersection", "call layout", "guarded calls", "reply skeleton",
          "substitution", "rest of build_constraint", "token table", "first mask", "split + budget tables")


def _instrument(clock: StageClock) -> None:
    """Wrap each stage's entry point where its callers look it up."""
    import stdsl.compiler.constraint_spec as constraint_spec
    import stdsl.compiler.pushdown.piece_assembly as piece_assembly
    import stdsl.compiler.tools.formats.gemma as gemma
    import stdsl.compiler.tools.formats.pythonic as pythonic
    import stdsl.compiler.tools.formats.raw_values as raw_values
    import stdsl.compiler.tools.reply_automaton as reply_automaton

    constraint_spec._embeddable_schema = clock.wrap("schema compile", constraint_spec._embeddable_schema)
    for module in (raw_values, gemma, pythonic):
        module.intersection = clock.wrap("raw-value intersection", raw_values.intersection)
    for name in ("build_automaton", "call_layout", "call_layouts", "piece_from_parts"):
        setattr(reply_automaton, name, clock.wrap("call layout", getattr(reply_automaton, name)))
    for name in ("determinize", "determinize_expression", "shrink", "build_nfa"):
        if hasattr(piece_assembly, name):  # a tree before determinize_expression calls the first and last
            setattr(piece_assembly, name, clock.wrap("reply skeleton", getattr(piece_assembly, name)))
    for name in ("substitute", "general_substitute"):
        setattr(piece_assembly, name, clock.wrap("substitution", getattr(piece_assembly, name)))
    reply_automaton.guarded_calls = clock.wrap("guarded calls", reply_automaton.guarded_calls)


def _measure(spec: dict[str, Any], vocab: Any, tokenizer: Any, clock: StageClock) -> dict[str, float]:
    from stdsl.compiler.constraint_spec import build_constraint
    from stdsl.control.split.planner import ForcedPlanner
    from stdsl.control.tables import budget_table_for
    from stdsl.kernels.combined import WalkTable
    from stdsl.kernels.rows import RowCache

    clock.seconds = {}
    began = time.process_time()
    clock.enter("rest of build_constraint")
    constraint = build_constraint(spec, 600)
    clock.leave()
    automaton = constraint.automaton
    clock.enter("token table")
    WalkTable.of(automaton)
    clock.leave()
    clock.enter("first mask")
    RowCache(automaton, vocab).token_mask(0)
    clock.leave()
    clock.enter("split + budget tables")
    planner = ForcedPlanner(automaton, tokenizer, vocab.token_bytes, False)
    budget_table_for(automaton, vocab, planner)
    clock.leave()
    seconds = dict(clock.seconds)
    seconds["total"] = time.process_time() - began
    seconds["states"] = constraint.num_states
    return seconds


def main() -> None:
    import stdsl
    from stdsl.control.special_vocabulary import vocabulary_of
    from stdsl.model_files.tokenizer import Tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=128)
    parser.add_argument("--formats", nargs="+", default=["hermes", "qwen_xml", "harmony"])
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "tool_compile_profile.md"))
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    tokenizer = Tokenizer.qwen()
    vocab = vocabulary_of(tokenizer)
    clock = StageClock()
    _instrument(clock)
    tools = random_tools(args.tools, seed=args.tools)
    changed = _changed(tools, seed=args.tools + 1)
    rows = []
    for tool_format in args.formats:
        stdsl.caches.clear()
        _measure({"kind": "regex", "pattern": "a"}, vocab, tokenizer, clock)
        for label, listed in (("cold", tools), ("changed", changed)):
            seconds = _measure(_spec(listed, tool_format), vocab, tokenizer, clock)
            rows.append((tool_format, label, seconds))
            print(tool_format, label, {k: round(v, 4) for k, v in seconds.items()}, flush=True)
    header = "| format | build | " + " | ".join(STAGES) + " | total | states |"
    lines = [f"# Reply grammar build for {args.tools} random tools: process CPU seconds per stage", "",
             f"Command: `python benchmarks/tool_compile_stages.py {' '.join(sys.argv[1:])}`".replace("  ", " "),
             f"Machine: {platform.platform()} (shared; process CPU time, each stage exclusive of the stages it calls)",
             "", "build_constraint's stages first (cold: every cache emptied; changed: the same list with one tool's "
             "schema replaced, right after), then the runtime's tables on the Qwen3.5 vocabulary.", "",
             header, "|" + "---|" * (len(STAGES) + 4)]
    for tool_format, label, seconds in rows:
        cells = [f"{seconds.get(stage, 0.0):.3f}" for stage in STAGES]
        lines.append(f"| {tool_format} | {label} | " + " | ".join(cells)
                     + f" | {seconds['total']:.3f} | {int(seconds['states'])} |")
    if args.note:
        lines += ["", args.note]
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
