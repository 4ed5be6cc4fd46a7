"""Mask time per decoding step under recursive schemas on Qwen3.5's vocabulary: concrete rows against symbolic rows.

Walks each recursive task's gold answer (compact JSON) token by token with the Qwen3.5 vocabulary
and times the full-vocabulary mask at every step: *before*, the concrete level pass from each
configuration (`pushdown_row`, what every step cost when rows were cached per configuration);
*after*, `PushdownRows` composing rows from symbolic rows (Theorem 22), cold (a fresh constraint)
and warm (the same answer again on the same tables, as a second request of the schema would);
and llguidance in the same run when it imports (the peers' venv). Reports median, p95 and mean
per step, the symbolic-row hit rate and cache bytes. Writes benchmarks/results/pushdown_masks.{json,md}.

    python benchmarks/pushdown_masks.py                          # stdsl only (our venv)
    /tmp/peers/venv/bin/python benchmarks/pushdown_masks.py      # with llguidance beside it
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import stdsl  # noqa: E402,I001  (stdsl binds MKL before mlx.core loads)
from stdsl.kernels.pushdown_rows import PushdownRows, pushdown_row  # noqa: E402
from stdsl.kernels.vocab_sources import qwen_tiktoken_encoding, qwen_vocabulary  # noqa: E402
from stdsl.kernels.vocabulary import Vocabulary  # noqa: E402

SHARED = BENCH_DIR.parent.parent / "shared"


def load_tasks(names: list[str] | None) -> list[dict[str, Any]]:
    """The recursive tasks (name, schema, gold) from ../shared/tasks/recursive."""
    tasks = []
    for path in sorted((SHARED / "tasks" / "recursive").glob("*.json")):
        data = json.loads(path.read_text())
        if not names or data["name"] in names:
            tasks.append(data)
    return tasks


def summary(times: list[float]) -> dict[str, float]:
    """Median, p95, mean and max of per-step times, in milliseconds."""
    ms = 1000 * np.asarray(times)
    return {"median_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95)), "mean_ms": float(ms.mean()),
            "max_ms": float(ms.max())}


def walk_before(schema: dict, ids: list[int], vocab: Vocabulary) -> list[float]:
    """Per-step mask time by the concrete level pass from each configuration (a fresh constraint)."""
    machine = stdsl.compile(schema).machine
    config, times = machine.start, []
    for token in ids:
        tick = time.perf_counter()
        row = pushdown_row(machine, config, vocab)
        allowed = row >= 0
        allowed[vocab.eos_ids] = machine.config_accepts(config)
        times.append(time.perf_counter() - tick)
        assert allowed[token]
        config = int(row[token])
    return times


def walk_after(rows: PushdownRows, ids: list[int]) -> list[float]:
    """Per-step mask time with rows composed from symbolic rows."""
    config, times = rows.machine.start, []
    for token in ids:
        tick = time.perf_counter()
        allowed = rows.mask(config)
        times.append(time.perf_counter() - tick)
        assert allowed[token]
        config = int(rows.next_states(config)[token])
    assert rows.mask(config)[rows.vocab.eos_ids].all()
    return times


def walk_llguidance(peer: Any, schema: dict, ids: list[int]) -> list[float]:
    """Per-step llguidance mask fill time along the same tokens."""
    matcher = peer.compile(schema)
    times = []
    for token in ids:
        tick = time.perf_counter()
        peer.fill(matcher)
        times.append(time.perf_counter() - tick)
        peer.advance(matcher, token)
    return times


def stats_record(rows: PushdownRows) -> dict[str, Any]:
    """Symbolic-row lookups and bytes so far."""
    stats = rows.stats
    return {"hit_rate": stats.hit_rate, "free_walks": stats.free_misses, "free_hits": stats.free_hits,
            "context_walks": stats.context_misses, "context_hits": stats.context_hits,
            "concrete_token_steps": stats.concrete_steps, "evictions": stats.evictions,
            "symbolic_rows": len(rows.symbolic), "symbolic_bytes": rows.symbolic.nbytes}


def llguidance_peer() -> tuple[Any, str | None]:
    """The llguidance peer over Qwen3.5 (None and the import error where it is not installed)."""
    try:
        from peers import load_qwen_vocab, make_peer

        qwen = load_qwen_vocab()
        peer = make_peer("llguidance", qwen.token_bytes, qwen.eos_id, qwen.encoding)
        peer.build_tokenizer()
        return peer, None
    except ImportError as error:
        return None, repr(error)


def render(report: dict[str, Any]) -> str:
    """The markdown report."""
    lines = [f"# Pushdown masks on Qwen3.5's vocabulary ({report['vocab_size']:,} ids)", "",
             f"Generated {report['generated']} on {report['machine']}. Each recursive task's gold answer (compact "
             "JSON) is walked token by token; every step times the full-vocabulary mask.", "",
             "| task | steps | before median / p95 / mean ms | after cold median / p95 / mean ms | "
             "after warm median / p95 / mean ms | llguidance median / p95 / mean ms | hit rate cold / warm | "
             "free + context walks | symbolic cache |", "|---|---|---|---|---|---|---|---|---|"]

    def cell(s: dict[str, float] | None) -> str:
        return "n/a" if not s else f"{s['median_ms']:.3f} / {s['p95_ms']:.2f} / {s['mean_ms']:.2f}"

    for r in report["tasks"] + [report["all"]]:
        cold, warm = r["cold_stats"], r["warm_stats"]
        lines.append(f"| {r['task']} | {r['steps']} | {cell(r['before'])} | {cell(r['after_cold'])} | "
                     f"{cell(r['after_warm'])} | {cell(r.get('llguidance'))} | {cold['hit_rate']:.0%} / "
                     f"{warm['hit_rate']:.0%} | {cold['free_walks']} + {cold['context_walks']} | "
                     f"{cold['symbolic_bytes'] / 1e6:.2f} MB |")
    lines += ["", "*before*: the concrete level pass (`pushdown_row`) from each configuration, which every step "
              "paid when rows were cached per configuration (a configuration carries its whole stack, so it is "
              "rarely met twice). *after*: `PushdownRows`, composing each row from the free row of the "
              "configuration's state and, for the few tokens that pop what they did not push, a context row of "
              "(state, top two return states); cold on a fresh constraint, warm when the same answer is walked "
              "again on the same tables. Hit rate: symbolic-row lookups served without a walk of the trie. "
              "Symbolic cache: bytes of the cached symbolic rows after the cold walk (LRU bound "
              f"{report['max_bytes'] / 2**20:.0f} MiB per constraint; the *all* row sums the five). llguidance: "
              "`fill_next_token_bitmask` along the same tokens, same process.", ""]
    if report.get("llguidance_error"):
        lines += [f"llguidance was not measured: {report['llguidance_error']}", ""]
    lines += [f"Command: `{report['command']}`", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", help="task names (default: all five)")
    parser.add_argument("--no-llguidance", action="store_true", help="skip llguidance even where it imports")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "pushdown_masks")
    args = parser.parse_args()
    vocab = qwen_vocabulary()
    _ = vocab.levels
    encoding = qwen_tiktoken_encoding()
    peer, peer_error = (None, "skipped (--no-llguidance)") if args.no_llguidance else llguidance_peer()
    records, everything = [], {"before": [], "after_cold": [], "after_warm": [], "llguidance": []}
    totals = {"cold": [], "warm": []}
    for task in load_tasks(args.tasks):
        ids = encoding.encode(json.dumps(task["gold"], separators=(",", ":"), ensure_ascii=False))
        before = walk_before(task["schema"], ids, vocab)
        rows = PushdownRows(stdsl.compile(task["schema"]).machine, vocab)
        cold = walk_after(rows, ids)
        cold_stats = stats_record(rows)
        warm = walk_after(rows, ids)
        warm_stats = stats_record(rows)
        for stat in ("free_hits", "free_walks", "context_hits", "context_walks"):
            warm_stats[stat] -= cold_stats[stat]
        hits = warm_stats["free_hits"] + warm_stats["context_hits"]
        warm_stats["hit_rate"] = hits / max(1, hits + warm_stats["free_walks"] + warm_stats["context_walks"])
        totals["cold"].append(cold_stats)
        totals["warm"].append(warm_stats)
        record = {"task": task["name"], "steps": len(ids), "before": summary(before), "after_cold": summary(cold),
                  "after_warm": summary(warm), "cold_stats": cold_stats, "warm_stats": warm_stats,
                  "configurations": rows.machine.num_configurations, "states": rows.machine.grammar.num_states}
        everything["before"] += before
        everything["after_cold"] += cold
        everything["after_warm"] += warm
        if peer is not None:
            guided = walk_llguidance(peer, task["schema"], ids)
            record["llguidance"] = summary(guided)
            everything["llguidance"] += guided
        records.append(record)
        print(json.dumps(record), flush=True)

    def pooled(stats: list[dict[str, Any]]) -> dict[str, Any]:
        out = {key: sum(s[key] for s in stats) for key in stats[0] if key != "hit_rate"}
        hits = out["free_hits"] + out["context_hits"]
        out["hit_rate"] = hits / max(1, hits + out["free_walks"] + out["context_walks"])
        return out

    report = {
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {platform.system()}, Python {platform.python_version()}",
        "vocab_size": vocab.size, "max_bytes": rows.symbolic.max_bytes, "tasks": records,
        "all": {"task": "all", "steps": sum(r["steps"] for r in records),
                **{key: summary(times) for key, times in everything.items() if times},
                "cold_stats": pooled(totals["cold"]), "warm_stats": pooled(totals["warm"])},
        "llguidance_error": peer_error,
        "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(render(report))
    print(render(report))


if __name__ == "__main__":
    main()
