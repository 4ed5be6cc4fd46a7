"""Open schemas against their closed twins (issue 27): refusal boundary, passes, wall time and mask time, one run.

For the 18 extraction outputs (6 schemas x 3 prompts of ../shared/tasks/extraction) and the recursive tasks
(../shared/tasks/recursive), each schema as written (closed) and with every `additionalProperties` removed (open:
undeclared members may hold any JSON value, so it compiles to the pushdown), on SmolLM2-135M (fp32, CPU), greedy:
- refusal boundary: the engine's least budget (what a BudgetError names) and the true minimum, found by a
  uniform-cost search over configurations with the real token rows, each forced chain counted by the tokenizer
  (none of the budget's own code); per schema, not per prompt;
- passes, passes per output token, decode wall time, and the mean time of one step's mask (the controller's
  `mask()`, budget included) at `--max-tokens` and at the least budget (where the budget mask is active);
- the undeclared members the model chose to write under the open twin (its outputs then differ from the closed
  twin's, and so do their passes);
- replay: the sampling steps each twin's controller takes to write the closed twin's own greedy output as a model
  sampling the tokenizer's own split of it would (no model): the open twin's declared part decodes exactly as
  the closed one when its steps are the closed twin's plus its tail choices (`,` or `}` where the closed object's
  `}` is forced), and its fed tokens are the same (the tokenizer's own split);
- certified rounds (`parallel_fields=True`, greedy) where `--certified` is given; a twin the certified path
  decodes sequentially (one block) reads "sequential".
Writes benchmarks/results/open_schemas.{json,md}.

    python benchmarks/open_schemas.py
    python benchmarks/open_schemas.py --tasks person,fs --max-tokens 120 --prompts 1
    python benchmarks/open_schemas.py --rerender     # the markdown again from the saved json
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

from stdsl.runtime.platform.blas import bind_blas

bind_blas()  # MKL for MLX's CPU matmuls before anything is timed (stdsl.load binds it too)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / ".." / "shared" / "tasks"
RESULTS = ROOT / "benchmarks" / "results"
COMMAND = "python benchmarks/open_schemas.py"
BULKY = ("outputs", "at_least", "replay_tokens", "replay_sampled_at", "certified")


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


def resolved(schema: Any, root: Any) -> Any:
    """The schema with its local `$ref`s followed (the shared tasks refer within one document)."""
    while isinstance(schema, dict) and "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part] if part else target
        schema = target
    return schema


def undeclared_members(instance: Any, schema: Any, root: Any) -> int:
    """Members of `instance` that its object schemas do not declare (what an open twin admits and a closed one
    refuses), counted through arrays, nested objects and `anyOf` branches that are objects."""
    schema = resolved(schema, root)
    if not isinstance(schema, dict):
        return 0
    if isinstance(instance, dict):
        objects = [resolved(b, root) for b in schema.get("anyOf", [])]
        schema = next((b for b in objects if isinstance(b, dict) and b.get("type") == "object"), schema)
        props = schema.get("properties", {})
        return sum(1 if key not in props else undeclared_members(value, props[key], root)
                   for key, value in instance.items())
    if isinstance(instance, list):
        return sum(undeclared_members(item, schema.get("items", True), root) for item in instance)
    return 0


def controller(constraint: Any, tokenizer: Any, vocab: Any) -> Any:
    """A fresh controller of a constraint without a budget (pushdown or DFA)."""
    from stdsl.control.tables import Tables

    return Tables.of(constraint, vocab).controller(tokenizer, max_tokens=None)


def replay(constraint: Any, tokenizer: Any, vocab: Any, text: bytes) -> tuple[list[int], list[int]]:
    """Write `text` under a constraint's controller as a model that samples the tokenizer's own split of it would:
    at each step the token of `encode_ordinary(text)` that starts where the output stands, where admissible, else
    the longest admissible token that continues it. Returns the tokens fed and the byte offsets sampled at."""
    control = controller(constraint, tokenizer, vocab)
    spelled = control.planner.by_bytes
    canonical, offset = {}, 0
    for token in tokenizer.encode_ordinary(text.decode()):
        canonical[offset] = token
        offset += len(vocab.token_bytes[token] or b"")
    log = control.started()
    fed, sampled_at = list(log.tokens), []
    while not log.configuration.finished and len(log.data) < len(text):
        at = len(log.data)
        rest = text[at:]
        allowed = control.row_mask(log)
        token = canonical.get(at)
        if token is None or not allowed[token]:
            widths = range(min(len(rest), control.planner.longest_token), 0, -1)
            token = next((t for t in (spelled.get(rest[:w]) for w in widths) if t is not None and allowed[t]), None)
        assert token is not None, f"no admissible token continues {rest[:40]!r}"
        sampled_at.append(at)
        move = control.taken(log, token)
        log = log.apply(move)
        fed += move.feed
    assert bytes(log.data) == text and control.accepting(log.configuration), text
    return fed, sampled_at


def true_minimum(machine: Any, tokenizer: Any, vocab: Any) -> tuple[int, int]:
    """Fewest tokens of a valid output under the table policy (uniform-cost search) and configurations expanded."""
    from stdsl.control.tables import Tables

    rows = Tables.of(machine, vocab).rows

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
    from stdsl.control.tables import Tables
    from stdsl.errors import BudgetError

    began = time.perf_counter()
    control = Tables.of(constraint, vocab).controller(tokenizer, max_tokens=1)
    try:
        control.started()
    except BudgetError:
        pass
    least = control.least_output_tokens()
    exact = getattr(control.budget, "exact", True)
    return least, exact, time.perf_counter() - began


class MaskClock:
    """Times the outermost `row_mask()` of the controllers (the budget mask included)."""

    def __init__(self) -> None:
        from stdsl.control.controller import Controller

        self.seconds: list[float] = []
        self._depth = 0
        Controller.row_mask = self._timed(Controller.__dict__["row_mask"])  # type: ignore[method-assign]

    def _timed(self, mask: Any) -> Any:
        def timed(control: Any, log: Any) -> Any:
            self._depth += 1
            began = time.perf_counter()
            try:
                return mask(control, log)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds.append(time.perf_counter() - began)
        return timed

    def take(self) -> list[float]:
        out, self.seconds = self.seconds, []
        return out


def decode(model: Any, prompt: str, constraint: Any, max_tokens: int, clock: MaskClock,
           certified: bool = False) -> dict[str, Any]:
    """One greedy output: text, tokens, passes, passes per token, wall seconds, mean mask milliseconds (and the
    certified rounds, None where the certified path decoded it sequentially)."""
    from stdsl.runtime.decode import generate

    clock.take()
    began = time.perf_counter()
    out = generate(model, prompt, constraint, max_tokens=max_tokens, parallel_fields=certified)
    seconds = time.perf_counter() - began
    masks = clock.take()
    assert constraint.accepts(out.text), out.text
    row = {"text": out.text, "tokens": len(out.tokens), "passes": out.stats.passes,
           "passes_per_token": round(out.stats.passes_per_token, 3), "seconds": round(seconds, 3),
           "mask_ms": round(1000 * statistics.mean(masks), 3) if masks else 0.0}
    if certified:
        row["rounds"] = getattr(out.stats, "rounds", 0) or None
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default=None, help="comma-separated task names (default: all)")
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--prompts", type=int, default=None, help="prompts per task (default: all)")
    parser.add_argument("--certified", action="store_true", help="also decode with certified parallel fields")
    parser.add_argument("--rerender", action="store_true", help="rewrite the markdown from the saved json only")
    args = parser.parse_args()
    if args.rerender:
        saved = json.loads((RESULTS / "open_schemas.json").read_text())
        (RESULTS / "open_schemas.md").write_text(report(saved["rows"], saved["max_tokens"], saved["command"]))
        return 0
    import stdsl
    from stdsl.control.special_vocabulary import vocabulary_of
    from stdsl.runtime.model.loading import load

    model = load()
    tokenizer = model.tokenizer
    vocab = vocabulary_of(tokenizer)
    clock = MaskClock()
    rows: list[dict[str, Any]] = []
    command = (f"{COMMAND} --max-tokens {args.max_tokens}" + (f" --tasks {args.tasks}" if args.tasks else "")
               + (f" --prompts {args.prompts}" if args.prompts else "") + (" --certified" if args.certified else ""))
    for name, schema, prompts in tasks(set(args.tasks.split(",")) if args.tasks else None):
        prompts = prompts[: args.prompts]
        closed_texts: list[bytes] = []
        for variant, twin in (("closed", schema), ("open", opened(schema))):
            constraint = stdsl.compile(twin, strict=False)  # the open twin's exact language
            kind = "pushdown" if hasattr(constraint, "machine") else "dfa"
            least, exact, least_seconds = least_budget(constraint, tokenizer, vocab)
            truth, expanded = (true_minimum(constraint.machine, tokenizer, vocab) if kind == "pushdown"
                               else (least, 0))
            decode(model, "warm up", constraint, min(args.max_tokens, least + 8), clock)
            outputs = [decode(model, prompt, constraint, args.max_tokens, clock) for prompt in prompts]
            at_least = [decode(model, prompt, constraint, least, clock) for prompt in prompts]
            if variant == "closed":
                closed_texts = [o["text"].encode() for o in outputs]
            replays = [replay(constraint, tokenizer, vocab, text) for text in closed_texts]
            row = {"task": name, "variant": variant, "kind": kind, "least_budget": least, "true_minimum": truth,
                   "exact": exact, "least_seconds": round(least_seconds, 3), "oracle_expanded": expanded,
                   "passes": sum(o["passes"] for o in outputs), "tokens": sum(o["tokens"] for o in outputs),
                   "seconds": round(sum(o["seconds"] for o in outputs), 3),
                   "mask_ms": round(statistics.mean(o["mask_ms"] for o in outputs), 3),
                   "mask_ms_at_least": round(statistics.mean(o["mask_ms"] for o in at_least), 3),
                   "undeclared": sum(undeclared_members(json.loads(o["text"]), schema, schema) for o in outputs),
                   "replay_steps": sum(len(at) for _, at in replays),
                   "replay_tokens": [fed for fed, _ in replays], "replay_sampled_at": [at for _, at in replays],
                   "outputs": outputs, "at_least": at_least}
            if args.certified:
                certified = [decode(model, prompt, constraint, args.max_tokens, clock, certified=True)
                             for prompt in prompts]
                rounds = [c["rounds"] for c in certified]
                row["rounds"] = None if None in rounds else sum(rounds)
                row["certified"] = certified
            row["passes_per_token"] = round(row["passes"] / row["tokens"], 3)
            rows.append(row)
            print({k: v for k, v in row.items() if k not in BULKY}, flush=True)
        write(rows, args.max_tokens, command)
    return 0


def write(rows: list[dict[str, Any]], max_tokens: int, command: str) -> None:
    """The results so far (after each task, so that a long run stopped early keeps what it measured)."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "open_schemas.json").write_text(json.dumps({"command": command, "max_tokens": max_tokens,
                                                            "rows": rows}, indent=2))
    (RESULTS / "open_schemas.md").write_text(report(rows, max_tokens, command))


def tail_choices(closed: dict[str, Any], open_: dict[str, Any]) -> tuple[int, bool]:
    """The open twin's extra replay steps (its tail choices) and whether its replay is the closed one's plus them:
    the same fed tokens, every closed sampling offset sampled, each extra one at a `}`."""
    extra, same = 0, True
    for text, closed_fed, open_fed, closed_at, open_at in zip(
            (o["text"].encode() for o in closed["outputs"]), closed["replay_tokens"], open_["replay_tokens"],
            closed["replay_sampled_at"], open_["replay_sampled_at"]):
        more = set(open_at) - set(closed_at)
        extra += len(more)
        same = same and closed_fed == open_fed and set(closed_at) <= set(open_at) and all(
            text[i:i + 1] == b"}" for i in more)
    return extra, same


def report(rows: list[dict[str, Any]], max_tokens: int, command: str) -> str:
    """The markdown tables: each task's closed and open twins side by side, then their ratios."""
    certified = any("rounds" in r for r in rows)
    lines = [f"# Open schemas against their closed twins (SmolLM2-135M, greedy, max_tokens={max_tokens})\n",
             f"`{command}`\n",
             "Least budget: what the engine's BudgetError names; true minimum: uniform-cost search over token rows. "
             "Passes, tokens and seconds summed over the task's prompts; mask: mean ms per step at max_tokens and at "
             "the least budget (budget mask active); undeclared: members the model chose to write that the closed "
             "twin does not admit; replay steps: sampling steps to write the closed twin's outputs"
             + ("; rounds: certified rounds (sequential: the certified path decoded it in one block)" if certified
                else "") + ".\n",
             "| task | twin | kind | least budget | true minimum | passes | tokens | passes/token | seconds "
             "| mask ms | mask ms at least | undeclared | replay steps |" + (" rounds |" if certified else ""),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if certified else "")]
    for r in rows:
        rounds = (f" {r['rounds'] if r['rounds'] is not None else 'sequential'} |" if certified else "")
        lines.append(f"| {r['task']} | {r['variant']} | {r['kind']} | {r['least_budget']} | {r['true_minimum']} | "
                     f"{r['passes']} | {r['tokens']} | {r['passes_per_token']} | {r['seconds']} | {r['mask_ms']} | "
                     f"{r['mask_ms_at_least']} | {r['undeclared']} | {r['replay_steps']} |" + rounds)
    by_task: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_task.setdefault(r["task"], {})[r["variant"]] = r
    lines += ["", "Ratios open/closed. Free decode: the model's own outputs (they differ where it writes undeclared "
              "members). Replay: both twins writing the closed twin's outputs; declared part: the open replay less "
              "its tail choices; same split: the open replay feeds the closed one's tokens and samples where it does "
              "plus only at `}`.\n",
              "| task | open − closed least budget | least = true minimum | passes (free) | passes/token (free) "
              "| seconds (free) | replay steps | tail choices | declared part | same split |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for task, twins in by_task.items():
        closed, open_ = twins["closed"], twins["open"]
        extra, same = tail_choices(closed, open_)
        exact = all(t["least_budget"] == t["true_minimum"] for t in (closed, open_))
        declared = (open_["replay_steps"] - extra) / closed["replay_steps"]
        lines.append(f"| {task} | {open_['least_budget'] - closed['least_budget']} | {'yes' if exact else 'NO'} | "
                     f"{open_['passes'] / closed['passes']:.3f} | "
                     f"{open_['passes_per_token'] / closed['passes_per_token']:.3f} | "
                     f"{open_['seconds'] / closed['seconds']:.3f} | "
                     f"{open_['replay_steps'] / closed['replay_steps']:.3f} | {extra} | {declared:.3f} | "
                     f"{'yes' if same else 'NO'} |")
    lines += ["", *summary(by_task)]
    return "\n".join(lines) + "\n"


def summary(by_task: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """The targets of issue 27 read off the tables: refusal boundary, open within 5% of closed, declared part."""
    twins = [t for pair in by_task.values() for t in pair.values() if t["kind"] == "pushdown"]
    exact = sum(t["least_budget"] == t["true_minimum"] for t in twins)
    equal = sum(p["open"]["least_budget"] == p["closed"]["least_budget"] for p in by_task.values())
    within = {key: [task for task, p in by_task.items() if p["open"][key] <= 1.05 * p["closed"][key]]
              for key in ("passes", "passes_per_token", "seconds", "replay_steps")}
    declared = [task for task, p in by_task.items()
                if p["open"]["replay_steps"] - tail_choices(p["closed"], p["open"])[0] == p["closed"]["replay_steps"]
                and tail_choices(p["closed"], p["open"])[1]]
    total = {v: sum(p[v][k] for p in by_task.values()) for v in ("closed", "open") for k in ("passes",)}
    undeclared = sum(p["open"]["undeclared"] for p in by_task.values())
    n = len(by_task)
    dfa = [p for p in by_task.values() if p["closed"]["kind"] == "dfa"]
    bounded = sum(p["closed"]["least_budget"] == p["open"]["true_minimum"] for p in dfa)
    return [f"- Refusal boundary: least budget = true minimum on {exact}/{len(twins)} pushdown twins; a DFA twin's "
            f"true minimum column repeats its least budget (not searched), and equals its open twin's searched true "
            f"minimum (a lower bound of its own: the open language holds the closed one) on {bounded}/{len(dfa)}; "
            f"open = closed on {equal}/{n} tasks.",
            f"- Open within 5% of closed: passes on {len(within['passes'])}/{n} tasks, passes per token on "
            f"{len(within['passes_per_token'])}/{n}, wall time on {len(within['seconds'])}/{n}, replay steps on "
            f"{len(within['replay_steps'])}/{n}; total passes open/closed {total['open'] / total['closed']:.3f}; "
            f"undeclared members the model wrote under the open twins: {undeclared}.",
            f"- Declared part: the open replay is the closed one's steps plus its tail choices, in the same tokens, on "
            f"{len(declared)}/{n} tasks."]


if __name__ == "__main__":
    sys.exit(main())
