"""How far the pushdown's least budget (Proposition 2) is from the true shortest output, on the recursive tasks.

For every task in ../shared/tasks/recursive and the example program examples/tree.stc, under the SmolLM2 vocabulary:
- `bytes_bound`: what the BudgetError said before issue 15: forced prefix tokens plus need+ in bytes;
- `one_step_bound`: what it says now: the least budget at which the budget mask of Proposition 2 admits a first
  token (forced prefix tokens plus the least 1 + need+ over the tokens admissible after it);
- `true_shortest`: the fewest tokens of any valid output, by breadth-first search over pushdown configurations
  with the real token rows (a lower bound for every decoder with this vocabulary).
Writes benchmarks/results/recursive_budget_bound.{json,md}.

    python benchmarks/recursive_budget_bound.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
RESULTS = ROOT / "benchmarks" / "results"
COMMAND = "python benchmarks/recursive_budget_bound.py"


def constraints() -> list[tuple[str, Any]]:
    """(name, compiled constraint) for the recursive tasks and the tree example program."""
    import stdsl
    from stdsl.compiler.stc.program import CompiledProgram

    out = []
    for path in sorted((SHARED / "tasks" / "recursive").glob("*.json")):
        data = json.loads(path.read_text())
        out.append((data["name"], stdsl.compile(data["schema"])))
    tree = CompiledProgram.from_file(ROOT / "examples" / "tree.stc")
    out.append(("tree.stc", tree.constraint({"text": "x"})))
    return out


def bound(machine: Any, tokenizer: Any, vocab: Any, max_tokens: int) -> int:
    """least_output_tokens of a pushdown controller started under `max_tokens`."""
    from stdsl.control.tables import Tables
    from stdsl.errors import BudgetError

    control = Tables.of(machine, vocab).controller(tokenizer, max_tokens=max_tokens)
    try:
        control.started()
    except BudgetError:
        pass
    return control.least_output_tokens()


def true_shortest(machine: Any, vocab: Any, limit: int) -> tuple[int, int]:
    """Fewest tokens of a valid output (breadth-first over configurations) and the configurations visited."""
    from stdsl.control.tables import Tables

    rows = Tables.of(machine, vocab).rows
    frontier, seen = {machine.start}, {machine.start}
    for length in range(limit + 1):
        if any(machine.config_accepts(c) for c in frontier):
            return length, len(seen)
        following: set[int] = set()
        for config in frontier:
            row = rows.next_states(config)
            following.update(int(c) for c in np.unique(row[row >= 0]))
        frontier = following - seen
        seen |= frontier
    raise AssertionError(f"no valid output within {limit} tokens")


def main() -> int:
    from stdsl.control.special_vocabulary import vocabulary_of
    from stdsl.model_files.tokenizer import Tokenizer
    from stdsl.runtime.model.loading import embedded_gguf_path

    tokenizer = Tokenizer.from_gguf(embedded_gguf_path())
    vocab = vocabulary_of(tokenizer)
    rows = []
    for name, constraint in constraints():
        began = time.perf_counter()
        machine = constraint.machine
        old = bound(machine, tokenizer, vocab, 10**6)
        new = bound(machine, tokenizer, vocab, 1)
        shortest, visited = true_shortest(machine, vocab, new)
        rows.append({"task": name, "bytes_bound": old, "one_step_bound": new, "true_shortest": shortest,
                     "gap": new - shortest, "configurations_searched": visited,
                     "seconds": round(time.perf_counter() - began, 2)})
        print(rows[-1], flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "recursive_budget_bound.json").write_text(json.dumps({"command": COMMAND, "rows": rows}, indent=2))
    lines = ["# Pushdown least budget against the true shortest output (SmolLM2 vocabulary)\n", f"`{COMMAND}`\n",
             "| task | before (bytes bound) | now (one-step bound) | true shortest | gap now |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['task']} | {r['bytes_bound']} | {r['one_step_bound']} | {r['true_shortest']} | {r['gap']} |"
              for r in rows]
    (RESULTS / "recursive_budget_bound.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
