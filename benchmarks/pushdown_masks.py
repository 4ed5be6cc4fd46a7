"""Mask time per decoding step under recursive schemas on Qwen3.5's vocabulary: concrete rows against symbolic rows.

Walks each recursive task's gold answer (compact JSON) token by token with the Qwen3.5 vocabulary
and times the full-vocabulary mask at every step: *before*, the concrete level pass from each
configuration (`pushdown_row`, what every step cost when rows were cached per configuration);
*after*, `PushdownRows` composing rows from symbolic rows (Theorem 22), cold (a fresh constraint)
and warm (the same answer again on the same tables, as a second request of the schema would), as the
bool mask and as the int32 bitmask fill (`PushdownRows.fill_bitmask`, a copy of the memoized packed
words); and llguidance's bitmask fill in the same run when it imports. Reports median, p95 and mean
per step, the symbolic-row hit rate and cache bytes. Writes benchmarks/results/pushdown_masks.{json,md}.

    python benchmarks/pushdown_masks.py                          # with llguidance where it is installed
    python benchmarks/pushdown_masks.py --no-llguidance          # stdsl only
    python benchmarks/pushdown_masks.py --device                 # plus the device state vector section
    python benchmarks/pushdown_masks.py --sources-only --tasks fs expression
        # only the decode path's mask by source (host rows, device vector), merged into the existing results
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import stdsl  # noqa: E402,I001
from stdsl.runtime.platform.blas import bind_blas  # noqa: E402
from stdsl.kernels.pushdown.device import PushdownDevice  # noqa: E402
from stdsl.kernels.pushdown.device_masks import DeviceMasks  # noqa: E402
from stdsl.kernels.pushdown.rows import PushdownRows, pushdown_row  # noqa: E402
from stdsl.kernels.token_mask import bitmask_words  # noqa: E402
from stdsl.kernels.vocab_sources import qwen_tiktoken_encoding, qwen_vocabulary  # noqa: E402
from stdsl.kernels.vocabulary import Vocabulary  # noqa: E402

bind_blas()  # MKL for MLX's CPU matmuls before anything is timed (stdsl.load binds it too)

SHARED = BENCH_DIR.parent.parent / "shared"


def load_tasks(names: list[str] | None) -> list[dict[str, Any]]:
    """The recursive tasks (name, schema, gold) from ../shared/tasks/recursive; exits naming the folder or the names
    where none is found (a checkout without ../shared beside it)."""
    folder = SHARED / "tasks" / "recursive"
    tasks = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if not names or data["name"] in names:
            tasks.append(data)
    if not tasks:
        raise SystemExit(f"no recursive task {'named ' + ', '.join(names) + ' ' if names else ''}in {folder}")
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


def walk_fill(rows: PushdownRows, ids: list[int]) -> list[float]:
    """Per-step time of the int32 bitmask fill (`PushdownRows.fill_bitmask`, what the peers' fill is compared to)."""
    config, times = rows.machine.start, []
    out = np.zeros(bitmask_words(rows.vocab.size), dtype=np.int32)
    for token in ids:
        tick = time.perf_counter()
        rows.fill_bitmask(config, out)
        times.append(time.perf_counter() - tick)
        assert (int(out[token >> 5]) >> (token & 31)) & 1
        config = int(rows.next_states(config)[token])
    return times


def walk_llguidance(peer: Any, schema: dict, ids: list[int]) -> list[float]:
    """Per-step llguidance mask fill time along the same tokens."""
    from peers import fill_times

    return fill_times(peer, peer.compile(schema), ids)


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


def device_section(tasks: list[dict[str, Any]], vocab: Vocabulary, encode: Any) -> dict[str, Any]:
    """Per-step mask + advance time of the device state vector (`PushdownDevice`, MLX's default device) and table bytes.

    Each gold answer is walked twice on one device table set (cold: rows uploaded as met; warm: all
    uploaded); every step times `mask` then `advance`, both evaluated.
    """
    import mlx.core as mx

    records, pooled = [], {"cold": [], "warm": []}
    for task in tasks:
        ids = encode(json.dumps(task["gold"], separators=(",", ":"), ensure_ascii=False))
        machine = stdsl.compile(task["schema"]).machine
        device = PushdownDevice(machine, vocab, PushdownRows(machine, vocab).symbolic)
        times: dict[str, list[float]] = {"cold": [], "warm": []}
        for phase in ("cold", "warm"):
            vector = device.start()
            for token in ids:
                tick = time.perf_counter()
                allowed = device.mask(vector)
                vector = device.advance(vector, token)
                mx.eval(allowed, vector)
                times[phase].append(time.perf_counter() - tick)
            assert np.array(device.mask(vector))[vocab.eos_ids].all()
            pooled[phase] += times[phase]
        stats = device.stats
        records.append({"task": task["name"], "steps": len(ids), "cold": summary(times["cold"]),
                        "warm": summary(times["warm"]), "device_bytes": device.nbytes,
                        "free_rows": stats.free_uploads, "context_rows": stats.context_uploads,
                        "host_token_steps": stats.host_steps})
        print(json.dumps(records[-1]), flush=True)
    total = {"task": "all", "steps": sum(r["steps"] for r in records), "cold": summary(pooled["cold"]),
             "warm": summary(pooled["warm"]), **{key: sum(r[key] for r in records) for key in
                                                 ("device_bytes", "free_rows", "context_rows", "host_token_steps")}}
    return {"backend": str(mx.default_device()), "tasks": records + [total]}


def render_device(section: dict[str, Any]) -> list[str]:
    """The markdown lines of the device state vector section."""
    lines = [f"## Device state vector ({section['backend']})", "",
             "| task | steps | mask + advance cold median / p95 / mean ms | warm median / p95 / mean ms | "
             "device tables | free + context rows | host token steps |", "|---|---|---|---|---|---|---|"]
    for r in section["tasks"]:
        lines.append(f"| {r['task']} | {r['steps']} | {r['cold']['median_ms']:.3f} / {r['cold']['p95_ms']:.2f} / "
                     f"{r['cold']['mean_ms']:.2f} | {r['warm']['median_ms']:.3f} / {r['warm']['p95_ms']:.2f} / "
                     f"{r['warm']['mean_ms']:.2f} | {r['device_bytes'] / 1e6:.2f} MB | {r['free_rows']} + "
                     f"{r['context_rows']} | {r['host_token_steps']} |")
    lines += ["", "`PushdownDevice`: the state as an int32 vector `[q, pointer, stack[0..63], S]`; each step is the "
              "full-vocabulary mask (gathers over the uploaded free row of q and the context row of the top two "
              "return states) and the advance (gathers, a masked stack write, eager returns), both evaluated. Cold: "
              "rows computed on the CPU and uploaded as met; warm: the same answer again. Device tables: bytes of "
              "every uploaded row, outcome table and grammar array.", ""]
    return lines


def sources_section(tasks: list[dict[str, Any]], vocab: Vocabulary, encode: Any, command: str) -> dict[str, Any]:
    """Per-step time of the decode path's live mask by source: host rows (`PushdownRows.mask`) and the device vector
    (`DeviceMasks.mask`, on MLX's default device), each on its own fresh tables (cold), then the same answer again
    (warm); every step checks the two masks equal."""
    import mlx.core as mx

    records, pooled = [], {f"{source}_{phase}": [] for source in ("host", "device") for phase in ("cold", "warm")}
    for task in tasks:
        ids = encode(json.dumps(task["gold"], separators=(",", ":"), ensure_ascii=False))
        machine = stdsl.compile(task["schema"]).machine
        host, device = PushdownRows(machine, vocab), DeviceMasks(PushdownRows(machine, vocab))
        times: dict[str, list[float]] = {key: [] for key in pooled}
        for phase in ("cold", "warm"):
            config = machine.start
            for token in ids:
                tick = time.perf_counter()
                expected = host.mask(config)
                middle = time.perf_counter()
                got = device.mask(config)
                times[f"host_{phase}"].append(middle - tick)
                times[f"device_{phase}"].append(time.perf_counter() - middle)
                assert np.array_equal(got, expected) and expected[token], (task["name"], config)
                config = int(host.next_states(config)[token])
        for key, values in times.items():
            pooled[key] += values
        records.append({"task": task["name"], "steps": len(ids), **{key: summary(v) for key, v in times.items()},
                        "device_masks_computed": device.device.stats.masks, "device_bytes": device.device.nbytes})
        print(json.dumps(records[-1]), flush=True)
    total = {"task": "all", "steps": sum(r["steps"] for r in records), **{k: summary(v) for k, v in pooled.items()},
             **{key: sum(r[key] for r in records) for key in ("device_masks_computed", "device_bytes")}}
    return {"backend": str(mx.default_device()), "tasks": records + [total], "command": command,
            "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load": f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"}


def render_sources(section: dict[str, Any]) -> list[str]:
    """The markdown lines of the mask-source section."""
    lines = [f"## The decode path's mask by source ({section['backend']}, {section['generated']}, {section['load']})",
             "",
             "| task | steps | host rows cold median / p95 / mean ms | device cold | host rows warm | device warm | "
             "device masks computed | device tables |", "|---|---|---|---|---|---|---|---|"]

    def cell(s: dict[str, float]) -> str:
        return f"{s['median_ms']:.3f} / {s['p95_ms']:.2f} / {s['mean_ms']:.2f}"

    for r in section["tasks"]:
        lines.append(f"| {r['task']} | {r['steps']} | {cell(r['host_cold'])} | {cell(r['device_cold'])} | "
                     f"{cell(r['host_warm'])} | {cell(r['device_warm'])} | {r['device_masks_computed']} | "
                     f"{r['device_bytes'] / 1e6:.2f} MB |")
    lines += ["", "What the pushdown controller asks each step for the live mask (before forced text and the budget): "
              "*host "
              "rows*, `PushdownRows.mask` (the default on the CPU); *device*, `DeviceMasks.mask`, the state vector "
              "encoded and masked by `PushdownDevice` on MLX's default device and read back (the default on a "
              "Metal or CUDA GPU; `STDSL_PUSHDOWN_MASKS=device|host` overrides). Each source on its own fresh "
              "tables (cold), then the same answer again (warm); the two masks are checked equal at every step.",
              "", f"Command: `{section['command']}`", ""]
    return lines


def render(report: dict[str, Any]) -> str:
    """The markdown report."""
    lines = [f"# Pushdown masks on Qwen3.5's vocabulary ({report['vocab_size']:,} ids)", "",
             f"Generated {report['generated']} on {report['machine']}. Each recursive task's gold answer (compact "
             "JSON) is walked token by token; every step times the full-vocabulary mask.", "",
             "| task | steps | before median / p95 / mean ms | after cold median / p95 / mean ms | "
             "after warm median / p95 / mean ms | warm bitmask fill median / p95 / mean ms | "
             "llguidance median / p95 / mean ms | hit rate cold / warm | free + context walks | symbolic cache |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def cell(s: dict[str, float] | None) -> str:
        return "n/a" if not s else f"{s['median_ms']:.3f} / {s['p95_ms']:.2f} / {s['mean_ms']:.2f}"

    for r in report["tasks"] + [report["all"]]:
        cold, warm = r["cold_stats"], r["warm_stats"]
        lines.append(f"| {r['task']} | {r['steps']} | {cell(r['before'])} | {cell(r['after_cold'])} | "
                     f"{cell(r['after_warm'])} | {cell(r.get('after_warm_fill'))} | {cell(r.get('llguidance'))} | "
                     f"{cold['hit_rate']:.0%} / "
                     f"{warm['hit_rate']:.0%} | {cold['free_walks']} + {cold['context_walks']} | "
                     f"{cold['symbolic_bytes'] / 1e6:.2f} MB |")
    lines += ["", "*before*: the concrete level pass (`pushdown_row`) from each configuration, which every step "
              "paid when rows were cached per configuration (a configuration carries its whole stack, so it is "
              "rarely met twice). *after*: `PushdownRows`, composing each row from the free row of the "
              "configuration's state and, for the few tokens that pop what they did not push, a context row of "
              "(state, top two return states); cold on a fresh constraint, warm when the same answer is walked "
              "again on the same tables (the bool mask; the warm bitmask fill copies the memoized packed words of "
              "each configuration's mask into an int32 buffer, the layout llguidance's fill writes). Hit rate: "
              "symbolic-row lookups served without a walk of the trie. "
              "Symbolic cache: bytes of the cached symbolic rows after the cold walk (LRU bound "
              f"{report['max_bytes'] / 2**20:.0f} MiB per constraint; the *all* row sums the five). llguidance: "
              "`fill_next_token_bitmask` along the same tokens, same process.", ""]
    if report.get("llguidance_error"):
        lines += [f"llguidance was not measured: {report['llguidance_error']}", ""]
    if report.get("device"):
        lines += render_device(report["device"])
    lines += [f"Command: `{report['command']}`", ""]
    if report.get("sources"):
        lines += render_sources(report["sources"])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", help="task names (default: all five)")
    parser.add_argument("--no-llguidance", action="store_true", help="skip llguidance even where it imports")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "pushdown_masks")
    parser.add_argument("--device", action="store_true", help="also time the device state vector (PushdownDevice)")
    parser.add_argument("--sources", action="store_true", help="also time the decode path's mask by source")
    parser.add_argument("--sources-only", action="store_true",
                        help="time only the mask by source, merged into the existing results of --out")
    args = parser.parse_args()
    vocab = qwen_vocabulary()
    _ = vocab.levels
    encoding = qwen_tiktoken_encoding()
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    if args.sources_only:
        existing = args.out.with_suffix(".json")
        if not existing.is_file():
            raise SystemExit(f"--sources-only merges into {existing}, which does not exist: run without it first")
        report = json.loads(existing.read_text())
        report["sources"] = sources_section(load_tasks(args.tasks), vocab, encoding.encode, command)
        existing.write_text(json.dumps(report, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(render(report))
        print(render(report))
        return
    peer, peer_error = (None, "skipped (--no-llguidance)") if args.no_llguidance else llguidance_peer()
    records, everything = [], {"before": [], "after_cold": [], "after_warm": [], "after_warm_fill": [],
                               "llguidance": []}
    totals = {"cold": [], "warm": []}
    for task in load_tasks(args.tasks):
        ids = encoding.encode(json.dumps(task["gold"], separators=(",", ":"), ensure_ascii=False))
        before = walk_before(task["schema"], ids, vocab)
        rows = PushdownRows(stdsl.compile(task["schema"]).machine, vocab)
        cold = walk_after(rows, ids)
        cold_stats = stats_record(rows)
        warm = walk_after(rows, ids)
        warm_stats = stats_record(rows)
        warm_fill = walk_fill(rows, ids)
        for stat in ("free_hits", "free_walks", "context_hits", "context_walks"):
            warm_stats[stat] -= cold_stats[stat]
        hits = warm_stats["free_hits"] + warm_stats["context_hits"]
        warm_stats["hit_rate"] = hits / max(1, hits + warm_stats["free_walks"] + warm_stats["context_walks"])
        totals["cold"].append(cold_stats)
        totals["warm"].append(warm_stats)
        record = {"task": task["name"], "steps": len(ids), "before": summary(before), "after_cold": summary(cold),
                  "after_warm": summary(warm), "after_warm_fill": summary(warm_fill), "cold_stats": cold_stats,
                  "warm_stats": warm_stats,
                  "configurations": rows.machine.num_configurations, "states": rows.machine.grammar.num_states}
        everything["before"] += before
        everything["after_cold"] += cold
        everything["after_warm"] += warm
        everything["after_warm_fill"] += warm_fill
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
        "command": command,
    }
    if args.device:
        report["device"] = device_section(load_tasks(args.tasks), vocab, encoding.encode)
    if args.sources:
        report["sources"] = sources_section(load_tasks(args.tasks), vocab, encoding.encode, command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(render(report))
    print(render(report))


if __name__ == "__main__":
    main()
