"""Open schemas against their closed twins (issue 27): refusal boundary, passes, wall time and mask time, one run.

For the 18 extraction outputs (6 schemas x 3 prompts of ../shared/tasks/extraction) and the recursive tasks
(../shared/tasks/recursive), each schema as written (closed) and with every `additionalProperties` removed (open:
undeclared members may hold any JSON value, so it compiles to the pushdown), on SmolLM2-135M (fp32, CPU), greedy:
- refusal boundary: the engine's least budget (what a BudgetError names) and the true minimum, found by a
  uniform-cost search over configurations with the real token rows, each forced chain counted by the tokenizer
  (none of the budget's own code); per schema, not per prompt;
- passes, passes per output token, decode wall time, and the mean time of one step's mask (the controller's
  `mask()`, budget included) at `--max-tokens` and at the least budget (where the budget mask is active).
Writes benchmarks/results/open_schemas.{json,md}.

    python benchmarks/open_schemas.py
    python benchmarks/open_schemas.py --tasks person,fs --max-tokens 120
"""

from __future__ import annotations

import argparse
import heapq
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import stdsl.runtime  # noqa: F401  (binds MKL before MLX loads)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / ".." / "shared" / "tasks"
RESULTS = ROOT / "benchmarks" / "results"
COMMAND = "python benchmarks/open_schemas.py"


def opened(schema: Any) -> Any:
    """The schema with every `additionalProperties` removed."""
    if isinstance(schema, dict):
        return {k: opened(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [opened(v) for v in schema]
    return schema


def tasks(names: set[str] | None) -> list[tuple[str, dict, list[str]]]:
    """(name, schema, prompts) for the extraction tasks (three prompts each) and the recursive tasks (one)."""
    out = []
    for path in sorted((SHARED / "extraction").glob("*.json")):
        task = json.loads(path.read_text())
        prompts = [p.format(schema=json.dumps(task["schema"]), source=task["source"]) for p in task["prompts"]]
        out.append((task["name"], task["schema"], prompts))
    for path in sorted((SHARED / "recursive").glob("*.json")):
        task = json.loads(path.read_text())
        prompt = task["prompt"].replace("{schema}", json.dumps(task["schema"])).replace("{source}", task["source"])
        out.append((task["name"], task["schema"], [prompt]))
    return [t for t in out if names is None or t[0] in names]


def true_minimum(machine: Any, tokenizer: Any, vocab: Any) -> tuple[int, int]:
    """Fewest tokens of a valid output under the table policy (uniform-cost search) and configurations expanded."""
    from stdsl.runtime.control.pushdown_state import pushdown_tables

    rows = pushdown_tables(machine, vocab).rows

    def chain(config: int) -> tuple[int, int]:
        forced = machine.forced_chain(config)
        return (len(tokenizer.encode_ordinary(forced.decode())) if forced else 0), machine.chain_end(config)

    first, start = chain(machine.start)
    best, heap, expanded = {start: first}, [(first, start)], 0
    while heap:
        cost, config = heapq.heappop(heap)
        if cost > best[config]:
            continue
        if machine.config_accepts(config):
            return cost, expanded
        expanded += 1
        row = rows.next_states(config)
        for after in np.unique(row[row >= 0]).tolist():
            count, end = chain(after)
            if cost + 1 + count < best.get(end, 1 << 30):
                best[end] = cost + 1 + count
                heapq.heappush(heap, (cost + 1 + count, end))
    raise AssertionError("no valid output")


def least_budget(constraint: Any, tokenizer: Any, vocab: Any) -> tuple[int, bool, float]:
    """The engine's least budget (what its BudgetError names), whether it was exact, and the seconds to find it."""
    from stdsl.errors import BudgetError
    from stdsl.runtime.control.constraint_state import ConstraintState
    from stdsl.runtime.control.pushdown_state import PushdownState

    machine = getattr(constraint, "machine", None)
    began = time.perf_counter()
    control = (PushdownState(machine, tokenizer, vocab, max_tokens=1) if machine is not None
               else ConstraintState(constraint.automaton, tokenizer, vocab, max_tokens=1))
    try:
        control.start()
    except BudgetError:
        pass
    least = control.least_output_tokens
    assert least is not None
    exact = getattr(control.budget, "exact", True)
    return least, exact, time.perf_counter() - began


class MaskClock:
    """Times the outermost `mask()` of the controllers (the budget mask included)."""

    def __init__(self) -> None:
        from stdsl.runtime.control.constraint_state import ConstraintState
        from stdsl.runtime.control.pushdown_state import PushdownState

        self.seconds: list[float] = []
        self._depth = 0
        for cls in (ConstraintState, PushdownState):
            cls.mask = self._timed(cls.__dict__["mask"])  # type: ignore[method-assign]

    def _timed(self, mask: Any) -> Any:
        def timed(control: Any) -> Any:
            self._depth += 1
            began = time.perf_counter()
            try:
                return mask(control)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds.append(time.perf_counter() - began)
        return timed

    def take(self) -> list[float]:
        out, self.seconds = self.seconds, []
        return out


def decode(model: Any, prompt: str, constraint: Any, max_tokens: int, clock: MaskClock) -> dict[str, Any]:
    """One greedy output: tokens, passes, passes per token, wall seconds, mean mask milliseconds."""
    from stdsl.runtime.decode import generate

    clock.take()
    began = time.perf_counter()
    out = generate(model, prompt, constraint, max_tokens=max_tokens)
    seconds = time.perf_counter() - began
    masks = clock.take()
    assert constraint.accepts(out.text), out.text
    return {"tokens": len(out.tokens), "passes": out.stats.passes,
            "passes_per_token": round(out.stats.passes_per_token, 3), "seconds": round(seconds, 3),
            "mask_ms": round(1000 * statistics.mean(masks), 3) if masks else 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default=None, help="comma-separated task names (default: all)")
    parser.add_argument("--max-tokens", type=int, default=300)
    args = parser.parse_args()
    import stdsl
    from stdsl.runtime.control.constraint_state import vocabulary_of
    from stdsl.runtime.model.loading import load

    model = load()
    tokenizer = model.tokenizer
    vocab = vocabulary_of(tokenizer)
    clock = MaskClock()
    rows = []
    for name, schema, prompts in tasks(set(args.tasks.split(",")) if args.tasks else None):
        for variant, twin in (("closed", schema), ("open", opened(schema))):
            constraint = stdsl.compile(twin)
            kind = "pushdown" if hasattr(constraint, "machine") else "dfa"
            least, exact, least_seconds = least_budget(constraint, tokenizer, vocab)
            truth, expanded = (true_minimum(constraint.machine, tokenizer, vocab) if kind == "pushdown"
                               else (least, 0))
            decode(model, "warm up", constraint, args.max_tokens, clock)
            outputs = [decode(model, prompt, constraint, args.max_tokens, clock) for prompt in prompts]
            at_least = [decode(model, prompt, constraint, least, clock) for prompt in prompts]
            row = {"task": name, "variant": variant, "kind": kind, "least_budget": least, "true_minimum": truth,
                   "exact": exact, "least_seconds": round(least_seconds, 3), "oracle_expanded": expanded,
                   "passes": sum(o["passes"] for o in outputs), "tokens": sum(o["tokens"] for o in outputs),
                   "seconds": round(sum(o["seconds"] for o in outputs), 3),
                   "mask_ms": round(statistics.mean(o["mask_ms"] for o in outputs), 3),
                   "mask_ms_at_least": round(statistics.mean(o["mask_ms"] for o in at_least), 3),
                   "outputs": outputs, "at_least": at_least}
            row["passes_per_token"] = round(row["passes"] / row["tokens"], 3)
            rows.append(row)
            print({k: v for k, v in row.items() if k not in ("outputs", "at_least")}, flush=True)
    RESULTS.mkdir(exist_ok=True)
    command = f"{COMMAND} --max-tokens {args.max_tokens}" + (f" --tasks {args.tasks}" if args.tasks else "")
    (RESULTS / "open_schemas.json").write_text(json.dumps({"command": command, "max_tokens": args.max_tokens,
                                                            "rows": rows}, indent=2))
    (RESULTS / "open_schemas.md").write_text(report(rows, args.max_tokens, command))
    return 0


def report(rows: list[dict[str, Any]], max_tokens: int, command: str) -> str:
    """The markdown table: each task's closed and open twins side by side."""
    lines = [f"# Open schemas against their closed twins (SmolLM2-135M, greedy, max_tokens={max_tokens})\n",
             f"`{command}`\n",
             "Least budget: what the engine's BudgetError names; true minimum: uniform-cost search over token rows. "
             "Passes, tokens and seconds summed over the task's prompts; mask: mean ms per step at max_tokens and at "
             "the least budget (budget mask active).\n",
             "| task | twin | kind | least budget | true minimum | passes | tokens | passes/token | seconds "
             "| mask ms | mask ms at least |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['task']} | {r['variant']} | {r['kind']} | {r['least_budget']} | {r['true_minimum']} | "
                     f"{r['passes']} | {r['tokens']} | {r['passes_per_token']} | {r['seconds']} | {r['mask_ms']} | "
                     f"{r['mask_ms_at_least']} |")
    by_task: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_task.setdefault(r["task"], {})[r["variant"]] = r
    lines += ["", "| task | open/closed passes | open/closed seconds | open − closed least budget |",
              "|---|---|---|---|"]
    for task, twins in by_task.items():
        closed, open_ = twins["closed"], twins["open"]
        lines.append(f"| {task} | {open_['passes'] / closed['passes']:.3f} | {open_['seconds'] / closed['seconds']:.3f}"
                     f" | {open_['least_budget'] - closed['least_budget']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
