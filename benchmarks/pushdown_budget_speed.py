"""Per-step time of the exact pushdown budget under a tight max_tokens (issue 27, item 1 follow-up).

Random walks (no model) over SmolLM2's vocabulary: each step takes the controller's `mask()` (the budget mask
included), picks an admitted token at random and advances. Grammars: the nested-bracket GBNF grammar at
max_tokens=14 (many multi-bracket tokens: one token pushes or pops several return states), the recursive tasks of
../shared/tasks/recursive and the open twins (every `additionalProperties` removed) of ../shared/tasks/extraction,
each at its least budget plus 0 and 4. Reports per grammar the median and largest mask time and mask-and-advance
time per step, and the answers given by a bound (a search that gave up, or ran out of the mask's time) instead of
the exact need. Writes benchmarks/results/pushdown_budget_speed.md.

    python benchmarks/pushdown_budget_speed.py
    python benchmarks/pushdown_budget_speed.py --seeds 2 --tasks fs,thread
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT.parent / "shared" / "tasks"
NESTED = 'root ::= "(" root ")" | "x" | "[" root ("," root)* "]"'


def opened(schema: Any) -> Any:
    """The schema with every `additionalProperties` removed."""
    if isinstance(schema, dict):
        return {k: opened(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [opened(v) for v in schema]
    return schema


def constraints(tasks: set[str] | None) -> list[tuple[str, Any, list[int | None]]]:
    """(name, constraint, budgets: None for the least budget plus 0 and 4) per grammar measured."""
    import stdsl

    out: list[tuple[str, Any, list[int | None]]] = [("nested brackets (GBNF)", stdsl.compile(stdsl.Grammar(NESTED)),
                                                     [14])]
    for folder, change in (("recursive", lambda s: s), ("extraction", opened)):
        for path in sorted((TASKS / folder).glob("*.json")):
            if tasks is not None and path.stem not in tasks:
                continue
            constraint = stdsl.compile(change(json.loads(path.read_text())["schema"]), strict=False)
            if getattr(constraint, "machine", None) is not None:
                name = f"{path.stem} ({'open' if folder == 'extraction' else 'recursive'})"
                out.append((name, constraint, [None]))
    return out


def least_budget(machine: Any, tokenizer: Any, vocab: Any) -> int:
    """The engine's least budget (what its BudgetError names)."""
    from stdsl.control.tables import Tables
    from stdsl.errors import BudgetError

    probe = Tables.of(machine, vocab).controller(tokenizer, max_tokens=1)
    try:
        probe.started()
    except BudgetError:
        pass
    return probe.least_output_tokens()


def walk(machine: Any, tokenizer: Any, vocab: Any, max_tokens: int, seed: int) -> tuple[list[float], list[float], int]:
    """(mask seconds, mask-and-advance seconds) per step of one random walk under the budget, and the answers its
    budget has given by a bound so far (the budget is shared by every walk on the grammar)."""
    from stdsl.control.tables import Tables

    rng = random.Random(seed)
    control = Tables.of(machine, vocab).controller(tokenizer, max_tokens=max_tokens)
    log = control.started()
    masks, steps = [], []
    while not log.configuration.finished:
        began = time.perf_counter()
        allowed = control.row_mask(log)
        masked = time.perf_counter()
        choices = np.flatnonzero(allowed & ~vocab.eos)
        if choices.size == 0 or (control.accepting(log.configuration) and rng.random() < 0.1):
            token = int(vocab.eos_ids[0])
        else:
            token = int(rng.choice(choices.tolist()))
        log = log.apply(control.taken(log, token))
        masks.append(masked - began)
        steps.append(time.perf_counter() - began)
    return masks, steps, control.budget.solver.bounded_answers  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--tasks", default=None, help="comma-separated task names (default: all)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pushdown_budget_speed.md"))
    args = parser.parse_args()

    from stdsl.control.special_vocabulary import vocabulary_of
    from stdsl.model_files.gguf import GGUFFile
    from stdsl.model_files.tokenizer import Tokenizer
    from stdsl.runtime.model.loading import embedded_gguf_path

    tokenizer = Tokenizer.from_gguf(GGUFFile(embedded_gguf_path()))
    vocab = vocabulary_of(tokenizer)
    tasks = None if args.tasks is None else set(args.tasks.split(","))
    lines = ["# Exact pushdown budget: time per step under a tight max_tokens", "",
             "    python " + " ".join(["benchmarks/pushdown_budget_speed.py"] + sys.argv[1:]), "",
             f"SmolLM2-135M's vocabulary ({vocab.size} tokens), random admitted tokens, {args.seeds} seeds per budget; "
             "times in ms on a shared CPU (other jobs ran at the same time). 'bounded' counts answers given by a "
             "bound instead of the exact need (0: every mask was exact).", "",
             "| grammar | max_tokens | steps | mask median | mask max | step median | step max | bounded |",
             "|---|---|---|---|---|---|---|---|"]
    for name, constraint, budgets in constraints(tasks):
        machine = constraint.machine
        least = least_budget(machine, tokenizer, vocab)
        bounded = 0
        for budget in budgets:
            for max_tokens in ([least, least + 4] if budget is None else [budget]):
                masks: list[float] = []
                steps: list[float] = []
                before = bounded
                for seed in range(args.seeds):
                    m, s, bounded = walk(machine, tokenizer, vocab, max_tokens, seed)
                    masks += m
                    steps += s
                row = (f"| {name} | {max_tokens} | {len(steps)} | {1000 * statistics.median(masks):.1f} | "
                       f"{1000 * max(masks):.1f} | {1000 * statistics.median(steps):.1f} | {1000 * max(steps):.1f} | "
                       f"{bounded - before} |")
                print(row, flush=True)
                lines.append(row)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
