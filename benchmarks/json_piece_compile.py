"""The per-piece work of a `%json` grammar's cold compile, checkout against checkout: for the Hermes reply of N
random tools (`tool_compile.py`'s llguidance grammar), the pieces' NFAs, their subset constructions, the head chains
and each piece's whole DFA (`piece_alternatives._piece_automaton`), process CPU, the least of R passes in one process
per checkout, the checkouts' processes alternated.  A pass over the same pieces in a warm loop reads less noise than
a whole compile on a loaded machine (the stages of `json_grammar_stages.py` cost more inside a compile: its other
work leaves the caches cold), so it shows changes of a few percent there that the whole compile's noise hides.

    python benchmarks/json_piece_compile.py /work/main . --tools 128 --out benchmarks/results/json_piece_compile
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent

WORKER = """
import gc, json, sys, time
import numpy as np
checkout, tools, passes = json.loads(sys.argv[1])
sys.path[:0] = [checkout, checkout + "/benchmarks"]
import stdsl
assert stdsl.__file__.startswith(checkout), stdsl.__file__
from random_tools import random_tools
from tool_compile import LLGuidance, Stdsl
from stdsl.compiler import ir
from stdsl.compiler.automata import determinize, nfa
from stdsl.compiler.automata.minimization.minimize import trim_in_bfs_order
from stdsl.compiler.grammar import piece_alternatives

items = []
built = piece_alternatives._piece_automaton
def kept(item, max_states):
    items.append(item)
    return built(item, max_states)
piece_alternatives._piece_automaton = kept
text = LLGuidance.grammar(random_tools(tools, seed=tools), "hermes")
stdsl.caches.clear()
Stdsl().run({"kind": "grammar", "text": text, "syntax": "lark"})
piece_alternatives._piece_automaton = built
heads = [piece_alternatives._head(item.items) for item in items]
nodes = [ir.seq(*item.items[len(head):]) for item, head in zip(items, heads)]
gc.collect()
gc.freeze()
best = {}
for _ in range(passes):
    began = time.process_time()
    nfas = [nfa.build_nfa(node) for node in nodes]
    built_nfas = time.process_time()
    dfas = [determinize.determinize(machine, 10**6) for machine in nfas]
    determinized = time.process_time()
    for head, node, dfa in zip(heads, nodes, dfas):
        table, accepting = trim_in_bfs_order(dfa.table, dfa.accepting, all_reachable=True,
                                             all_live=nfa.all_live(node), in_bfs_order=dfa.in_bfs_order)
        piece_alternatives._behind_head(head, np.asarray(table), np.asarray(accepting, dtype=bool), dfa.byte_class)
    chained = time.process_time()
    for item in items:
        built(item, 10**6)
    whole = time.process_time()
    for stage, seconds in (("NFAs", built_nfas - began), ("subset constructions", determinized - built_nfas),
                           ("trims and head chains", chained - determinized), ("whole pieces", whole - chained)):
        best[stage] = min(best.get(stage, seconds), seconds)
print(json.dumps({"pieces": len(items), "best": best}))
"""


def _run(checkout: str, tools: int, passes: int) -> dict:
    env = {**os.environ, "PYTHONPATH": checkout}
    out = subprocess.run([sys.executable, "-c", WORKER, json.dumps([checkout, tools, passes])], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="the checkout compared against (e.g. main)")
    parser.add_argument("after", help="the checkout measured")
    parser.add_argument("--tools", type=int, default=128)
    parser.add_argument("--passes", type=int, default=15)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "json_piece_compile"))
    args = parser.parse_args()
    before, after = (str(Path(path).resolve()) for path in (args.before, args.after))
    runs: dict[str, list[dict]] = {before: [], after: []}
    for _ in range(args.pairs):
        for checkout in (before, after):
            runs[checkout].append(_run(checkout, args.tools, args.passes))
    result = {"command": "python benchmarks/json_piece_compile.py " + " ".join(sys.argv[1:]),
              "machine": platform.platform(), "load": os.getloadavg(), "tools": args.tools, "runs": runs}
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    Path(args.out + ".md").write_text(_markdown(result, before, after))
    print(_markdown(result, before, after))


def _markdown(result: dict, before: str, after: str) -> str:
    runs = result["runs"]
    stages = list(runs[before][0]["best"])
    lines = [f"# The per-piece work of a %json grammar of {result['tools']} tools ({runs[after][0]['pieces']} pieces): "
             "process CPU ms, least of each process's passes", "",
             f"Command: `{result['command']}`  ",
             f"Machine: {result['machine']}, load average {', '.join(f'{x:.2f}' for x in result['load'])} at the end "
             "(shared, noisy); the checkouts' processes alternated", "",
             f"| stage | {before} (each process) | {after} (each process) | median change |", "|---|---|---|---|"]
    for stage in stages:
        old = [run["best"][stage] * 1000 for run in runs[before]]
        new = [run["best"][stage] * 1000 for run in runs[after]]
        change = statistics.median(new) / statistics.median(old) - 1
        lines.append(f"| {stage} | {' / '.join(f'{x:.1f}' for x in old)} | {' / '.join(f'{x:.1f}' for x in new)} | "
                     f"{change:+.1%} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
