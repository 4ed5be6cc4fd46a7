"""Where the compile of a Lark grammar with one `%json` per tool spends its process CPU time, stage by stage, cold
and with one tool changed (issue 36; the `%json` rows of `tag_compile.py`).

The Hermes reply grammar of `tool_compile.py` for N random tools is built as the server builds it
(`build_constraint` and the first mask on the Qwen3.5 vocabulary): cold (every cache emptied) and then with the
middle tool's schema replaced (a new one each repeat), each stage timed exclusively (a nested stage's time is not
counted in its caller's, `tool_compile_stages.StageClock`) with `time.process_time`.  Stages a tree does not have
are left out, so the same script profiles main (run it with `PYTHONPATH` set to main's checkout: the `stdsl` found
first is the one timed, and the file names it).  Medians over the repeats; writes NAME.{md,json}.

    PYTHONPATH=. python benchmarks/json_grammar_stages.py --tools 128 --out benchmarks/results/json_grammar_stages
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

import stdsl

BENCH_DIR = Path(__file__).resolve().parent
sys.path.append(str(BENCH_DIR))

from random_tools import random_tools  # noqa: E402
from tool_compile import LLGuidance, Stdsl, _changed  # noqa: E402
from tool_compile_stages import StageClock  # noqa: E402

STAGES = [
    ("stdsl.compiler.grammar.lowering", "slotted_text", "frame: find the %json blocks"),
    ("stdsl.compiler.grammar.lowering", "parse_grammar", "parse the Lark text"),
    ("stdsl.compiler.grammar.lowering", "GrammarLowering", "lower the rules"),
    ("stdsl.compiler.grammar.expressions", "schema_to_ir", "%json schemas to IR"),
    ("stdsl.compiler.grammar.json_slots", "schema_to_ir", "%json schemas to IR"),
    ("stdsl.compiler.grammar.lowering", "productive_rules", "productive rules"),
    ("stdsl.compiler.grammar.lowering", "substitute", "inline the rules"),
    ("stdsl.compiler.grammar.lowering", "frame_of", "frame: pieces over slots"),
    ("stdsl.compiler.grammar.json_slots", "_instantiated", "frame: values into pieces"),
    ("stdsl.compiler.automata.build", "build_nfa", "NFAs of the subset constructions"),
    ("stdsl.compiler.automata.determinize", "build_nfa", "NFAs of the subset constructions"),
    ("stdsl.compiler.grammar.piece_alternatives", "determinized", "pieces: subset construction"),
    ("stdsl.compiler.grammar.piece_alternatives", "_behind_head", "pieces: head chain"),
    ("stdsl.compiler.grammar.piece_alternatives", "_behind_heads", "pieces: head chain"),
    ("stdsl.compiler.grammar.piece_alternatives", "holds_grammar", "pieces: recursive-grammar walk"),
    ("stdsl.compiler.grammar.json_slots", "holds_grammar", "slot values: recursive-grammar walk"),
    ("stdsl.compiler.grammar.piece_alternatives", "assemble", "assemble the pieces (block substitution)"),
]


def _instrument(clock: StageClock) -> list[str]:
    """Wrap each stage the tree has; the stages found."""
    found = []
    for module_name, name, stage in STAGES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        function = getattr(module, name, None)
        if function is not None:
            setattr(module, name, clock.wrap(stage, function))
            found.append(stage)
    return list(dict.fromkeys(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "json_grammar_stages"))
    args = parser.parse_args()
    clock = StageClock()
    stages = _instrument(clock)
    ours = Stdsl()
    tools = random_tools(args.tools, seed=args.tools)
    text = LLGuidance.grammar(tools, "hermes")
    gc.collect()
    gc.freeze()
    runs: dict[str, list[dict[str, float]]] = {"cold": [], "changed": []}
    for repeat in range(args.repeats):
        for case in ("cold", "changed"):
            changed = LLGuidance.grammar(_changed(tools, seed=args.tools + 1 + repeat), "hermes")
            spec = {"kind": "grammar", "text": text if case == "cold" else changed, "syntax": "lark"}
            if case == "cold":
                stdsl.caches.clear()
                ours.run({"kind": "regex", "pattern": "a"})
            clock.seconds.clear()
            result = ours.run(spec)
            split = dict(clock.seconds)
            split["first mask"] = result["cpu_s"] - result["cpu_compile_s"]
            split["other (not in a stage)"] = result["cpu_compile_s"] - sum(split.values()) + split["first mask"]
            split["total (compile + first mask)"] = result["cpu_s"]
            runs[case].append(split)
    names = [*stages, "other (not in a stage)", "first mask", "total (compile + first mask)"]
    medians = {case: {name: statistics.median(run.get(name, 0.0) for run in found) for name in names}
               for case, found in runs.items()}
    result = {"command": "python benchmarks/json_grammar_stages.py " + " ".join(sys.argv[1:]),
              "stdsl": str(Path(stdsl.__file__).parent), "machine": platform.platform(), "load": os.getloadavg(),
              "tools": args.tools, "medians": medians, "runs": runs}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    Path(args.out + ".md").write_text(_markdown(result, names))
    print(_markdown(result, names))


def _markdown(result: dict[str, Any], names: list[str]) -> str:
    medians = result["medians"]
    lines = [f"# A %json grammar of {result['tools']} tools: process CPU per stage (ms, exclusive, medians)", "",
             f"Command: `{result['command']}` (stdsl from `{result['stdsl']}`)  ",
             f"Machine: {result['machine']}, load average {', '.join(f'{x:.2f}' for x in result['load'])} at the "
             "end (shared, noisy)", "",
             "cold empties every cache first; changed is the same list with the middle tool's schema replaced "
             "(another schema each repeat).", "",
             "| stage | cold | changed |", "|---|---|---|"]
    for name in names:
        lines.append(f"| {name} | {medians['cold'][name] * 1000:.1f} | {medians['changed'][name] * 1000:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
