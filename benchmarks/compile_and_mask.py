"""Compile time, memory and per-step mask time of stdsl beside llguidance, XGrammar and outlines-core.

Issue 2's benchmark: on the Qwen3.5 vocabulary, for the six extraction schemas, fields_48, fields_96
and a typed tool-call schema, one process compiles every schema with every engine, then drives each
valid document token by token, computing the full mask at every step, and checks that stdsl's mask
equals each peer's. Writes benchmarks/results/compile_and_mask.{json,md}.

    /tmp/peers/venv/bin/python benchmarks/compile_and_mask.py            # everything (about 3 min on 2 cores)
    /tmp/peers/venv/bin/python benchmarks/compile_and_mask.py --peers llguidance --workloads person
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from compile_and_mask_report import render_markdown  # noqa: E402
from mask_agreement import compare_masks  # noqa: E402
from peers import (  # noqa: E402
    PEER_NAMES,
    Peer,
    QwenVocab,
    load_qwen_vocab,
    make_peer,
    malloc_in_use,
    version_of,
)

SHARED = BENCH_DIR.parent.parent / "shared"
EXTRACTION = ("person", "tool_call", "product", "event", "classification", "contact_card")
FIELDS = ("fields_48", "fields_96")
TOOLS = "tools_typed"
ALL_WORKLOADS = EXTRACTION + FIELDS + (TOOLS,)


@dataclass
class Workload:
    """A schema and the valid documents (compact JSON) driven through it."""

    name: str
    schema: dict
    documents: list[str]


def compact(value: Any) -> str:
    """The compact serialization every engine is configured for (no whitespace, UTF-8 kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def typed_tool_schema(tools: list[dict]) -> dict:
    """anyOf over the tools of {"name": const, "arguments": parameters} (the typed tool-call reply)."""
    options = []
    for tool in tools:
        fn = tool["function"]
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": fn["name"]}, "arguments": fn["parameters"]},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": options}


def typed_tool_documents(tools: list[dict], requests: list[dict]) -> list[str]:
    """One call per request, arguments in the schema's property order."""
    params = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in tools}
    docs = []
    for req in requests:
        args = req["expected_arguments"]
        ordered = {key: args[key] for key in params[req["expected_tool"]] if key in args}
        docs.append(compact({"name": req["expected_tool"], "arguments": ordered}))
    return docs


def load_workloads(names: list[str]) -> list[Workload]:
    """The benchmark's schemas and documents from ../shared/tasks."""
    out = []
    for name in names:
        if name in EXTRACTION:
            task = json.loads((SHARED / "tasks" / "extraction" / f"{name}.json").read_text())
            out.append(Workload(name, task["schema"], [compact(task["gold"])]))
        elif name in FIELDS:
            task = json.loads((SHARED / "tasks" / "fields" / f"{name}.json").read_text())
            out.append(Workload(name, task["schema"], [compact(task["example"])]))
        elif name == TOOLS:
            tools = json.loads((SHARED / "tasks" / "tools" / "tools.json").read_text())
            requests = json.loads((SHARED / "tasks" / "tools" / "requests.json").read_text())
            out.append(Workload(name, typed_tool_schema(tools), typed_tool_documents(tools, requests)))
        else:
            raise SystemExit(f"unknown workload {name!r}; expected one of {', '.join(ALL_WORKLOADS)}")
    return out


def stats_us(samples: list[float]) -> dict[str, float | int | None]:
    """median / p95 / max / n of a list of microsecond samples."""
    if not samples:
        return {"median": None, "p95": None, "max": None, "n": 0}
    arr = np.asarray(samples, dtype=float)
    return {
        "median": float(np.median(arr)),
        "p95": float(np.percentile(arr, 95)),
        "max": float(arr.max()),
        "n": len(arr),
    }


def measure_memory(fn: Callable[[], Any]) -> tuple[Any, float, int]:
    """(fn(), seconds, malloc bytes still held afterwards), with gc before both probes."""
    gc.collect()
    before = malloc_in_use()
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    gc.collect()
    after = malloc_in_use()
    return value, seconds, (after - before) if before >= 0 else -1


class OurEngine:
    """stdsl's compiler and mask kernels behind the same drive loop as the peers."""

    name = "stdsl"

    def __init__(self) -> None:
        import stdsl  # noqa: F401  (imported here so the first compile does not pay for imports)
        from stdsl.control.special_vocabulary import vocabulary_of
        from stdsl.model_files.tokenizer import Tokenizer

        self.tokenizer, self.tokenizer_s, self.tokenizer_malloc = measure_memory(Tokenizer.qwen)
        _, self.token_list_s, self.token_list_malloc = measure_memory(lambda: self.tokenizer.token_bytes)
        self.eos_id = self.tokenizer.eos_ids[0]
        self.vocab, self.vocab_build_s, self.vocab_malloc = measure_memory(lambda: vocabulary_of(self.tokenizer))
        _, self.trie_build_s, self.trie_malloc = measure_memory(lambda: self.vocab.levels)
        self.rows_path_nbytes = self.vocab.nbytes
        self.first_compile_s = measure_memory(lambda: self.compile({"type": "string"}))[1]

    def shared_facts(self) -> dict[str, Any]:
        """Per-tokenizer figures: what the Vocabulary holds for rows on demand (core arrays and trie), then for
        the walks (packed bytes and offsets, built on first use, and the walk layout)."""
        from stdsl.kernels.walk import walk_layout

        _, packed_s, packed_malloc = measure_memory(lambda: (self.vocab.offsets, self.vocab.data))
        layout, layout_s, layout_malloc = measure_memory(lambda: walk_layout(self.vocab))
        return {
            "vocabulary_core_nbytes": self.vocab.core_nbytes,
            "tokenizer_token_list_nbytes": sys.getsizeof(self.tokenizer.token_bytes),
            "vocabulary_copies_token_list": self.vocab.token_bytes is not self.tokenizer.token_bytes
            and getattr(self.vocab.token_bytes, "spelled", None) is not self.tokenizer.token_bytes,
            "tokenizer_build_s": self.tokenizer_s,
            "tokenizer_malloc_bytes": self.tokenizer_malloc,
            "token_list_build_s": self.token_list_s,
            "token_list_malloc_bytes": self.token_list_malloc,
            "vocabulary_rows_path_nbytes": self.rows_path_nbytes,
            "vocabulary_trie_malloc_bytes": self.trie_malloc,
            "packed_build_s": packed_s,
            "packed_malloc_bytes": packed_malloc,
            "vocab_size": self.vocab.size,
            "vocabulary_packed_nbytes": self.vocab.packed_nbytes,
            "vocabulary_trie_nbytes": self.vocab.trie_nbytes,
            "vocabulary_trie_build_s": self.trie_build_s,
            "vocabulary_nbytes": self.vocab.nbytes,
            "vocabulary_build_s": self.vocab_build_s,
            "vocabulary_malloc_bytes": self.vocab_malloc,
            "packed_token_bytes": int(self.vocab.data.nbytes + self.vocab.offsets.nbytes),
            "trie_nodes": self.vocab.trie_nodes,
            "walk_layout_nbytes": layout.nbytes,
            "walk_layout_build_s": layout_s,
            "walk_layout_malloc_bytes": layout_malloc,
            "process_first_compile_s": self.first_compile_s,
        }

    def compile(self, schema: dict) -> Any:
        """Schema -> Automaton through the compiler itself (stdsl.compile would return its cached result)."""
        from stdsl.compiler.automata.build import build_automaton
        from stdsl.compiler.json_schema.to_ir import schema_to_ir

        return build_automaton(schema_to_ir(schema))

    def forced_chain(self, automaton: Any) -> Callable[[int], bytes]:
        """state -> its forced chain (Definition 7)."""
        return lambda state: bytes(automaton.forced_chain(state))

    def row_cache(self, automaton: Any) -> Any:
        """A fresh rows-on-demand cache (D.6) large enough never to evict (warm = every row cached)."""
        from stdsl.kernels.rows import RowCache

        return RowCache(automaton, self.vocab, max_rows=max(256, automaton.num_states))

    def walk_mask(self, automaton: Any, state: int) -> np.ndarray:
        """The portable walk's full mask from one state, materialized as a bool array."""
        from stdsl.kernels.walk import walk_mask

        return np.asarray(walk_mask(automaton, None, [state], self.vocab, path="portable"))[0]


def drive_ours(engine: OurEngine, automaton: Any, docs: list[list[int]], passes: int, walk: bool) -> dict[str, Any]:
    """Drive every document through RowCache (cold pass, then warm passes) and the portable walk.

    A step's mask is `RowCache.token_mask` (the compact form a warm step hands over); warm passes also time
    filling an int32 bitmask from it (what the peers' figures are) and expanding it to a bool array.
    """
    from stdsl.kernels.token_mask import bitmask_words

    cache, cache_s, cache_malloc = measure_memory(lambda: engine.row_cache(automaton))
    start = automaton.start
    cold_first, cold_revisit, adv, masks, states_seen = [], [], [], [], set()
    gc.collect()
    before = malloc_in_use()
    for ids in docs:
        q = start
        for step, tok in enumerate(ids + [None]):
            first_visit = q not in states_seen
            states_seen.add(q)
            t0 = time.perf_counter_ns()
            mask = cache.token_mask(q)
            dt = (time.perf_counter_ns() - t0) / 1e3
            (cold_first if first_visit else cold_revisit).append(dt)
            allowed = mask.dense()
            masks.append((q, np.packbits(allowed)))
            if tok is None:
                if not allowed[engine.eos_id]:
                    raise RuntimeError(f"stdsl: eos not allowed at the end of the document (state {q})")
                continue
            if not allowed[tok]:
                raise RuntimeError(f"stdsl: document token {tok} not allowed at step {step} (state {q})")
            t0 = time.perf_counter_ns()
            q = int(cache.advance(q, tok))
            adv.append((time.perf_counter_ns() - t0) / 1e3)
    del allowed
    gc.collect()
    masks_nbytes = sum(m.nbytes for _, m in masks)
    rows_malloc = malloc_in_use() - before - masks_nbytes
    bitmask = np.zeros(bitmask_words(engine.vocab.size), dtype=np.int32)
    runs: dict[str, list[list[float]]] = {"compact": [], "bitmask": [], "bool": []}
    calls: dict[str, Callable[[int], Any]] = {
        "compact": cache.token_mask,
        "bitmask": lambda state: cache.fill_bitmask(state, bitmask),
        "bool": cache.mask,
    }
    for _ in range(passes):
        for kind, call in calls.items():
            times = []
            for ids in docs:
                q = start
                for tok in ids + [None]:
                    t0 = time.perf_counter_ns()
                    call(q)
                    times.append((time.perf_counter_ns() - t0) / 1e3)
                    if tok is not None:
                        q = int(cache.advance(q, tok))
            runs[kind].append(times)
    warm = {kind: np.median(np.asarray(r), axis=0).tolist() if r else [] for kind, r in runs.items()}
    gc.collect()
    rows_malloc_warm = malloc_in_use() - before - masks_nbytes - bitmask.nbytes
    out: dict[str, Any] = {
        "rows_cold_first_visit_us": stats_us(cold_first),
        "rows_cold_revisit_us": stats_us(cold_revisit),
        "rows_warm_us": stats_us(warm["compact"]),
        "rows_warm_bitmask_us": stats_us(warm["bitmask"]),
        "rows_warm_bool_us": stats_us(warm["bool"]),
        "advance_us": stats_us(adv),
        "distinct_states_visited": len(states_seen),
        "row_cache_setup_s": cache_s,
        "row_cache_setup_malloc_bytes": cache_malloc,
        "rows_malloc_bytes_after_walk": rows_malloc,
        "rows_malloc_bytes_after_warm": rows_malloc_warm,
        "row_cache_nbytes": int(getattr(cache, "nbytes", -1)),
        "row_cache_walk_table_nbytes": int(cache.table.scaled.nbytes),
        "automaton_classes": int(automaton.num_classes),
        "automaton_whole_rows": int(automaton.branch_rows.shape[0]),
    }
    if walk:
        walk_times, walk_mismatch = [], 0
        for q, packed in masks:
            t0 = time.perf_counter_ns()
            walked = engine.walk_mask(automaton, q)
            walk_times.append((time.perf_counter_ns() - t0) / 1e3)
            walk_mismatch += int(not np.array_equal(np.packbits(walked), packed))
        out["walk_portable_us"] = stats_us(walk_times)
        out["walk_vs_rows_mismatched_steps"] = walk_mismatch
    out["_masks"] = masks
    return out


def drive_peer(peer: Peer, matcher: Any, docs: list[list[int]], passes: int) -> dict[str, Any]:
    """Drive every document through a peer: a cold pass (masks kept for comparison), then steady passes."""
    cold, masks = [], []
    gc.collect()
    before = malloc_in_use()
    for i, ids in enumerate(docs):
        if i:
            peer.reset(matcher)
        for step, tok in enumerate(ids + [None]):
            t0 = time.perf_counter_ns()
            peer.fill(matcher)
            cold.append((time.perf_counter_ns() - t0) / 1e3)
            allowed = peer.allowed()
            masks.append(np.packbits(allowed))
            if tok is None:
                if not allowed[peer.eos_id]:
                    raise RuntimeError(f"{peer.name}: eos not allowed at the end of the document")
                continue
            if not allowed[tok]:
                raise RuntimeError(f"{peer.name}: document token {tok} not allowed at step {step}")
            peer.advance(matcher, tok)
    gc.collect()
    walk_malloc = malloc_in_use() - before - sum(m.nbytes for m in masks)
    runs = []
    for _ in range(passes):
        times = []
        for ids in docs:
            peer.reset(matcher)
            for tok in ids + [None]:
                t0 = time.perf_counter_ns()
                peer.fill(matcher)
                times.append((time.perf_counter_ns() - t0) / 1e3)
                if tok is not None:
                    peer.advance(matcher, tok)
        runs.append(times)
    steady = np.median(np.asarray(runs), axis=0).tolist() if runs else []
    return {"cold_us": stats_us(cold), "steady_us": stats_us(steady), "walk_malloc_bytes": walk_malloc, "_masks": masks}


def run_workload(
    work: Workload,
    engine: OurEngine | None,
    peers: list[Peer],
    qwen: QwenVocab,
    args: argparse.Namespace,
    errors: list[str],
) -> dict[str, Any]:
    """Everything for one schema: compile all engines, drive all documents, compare masks."""
    docs = [qwen.encode(d) for d in work.documents]
    token_bytes = qwen.token_bytes
    contexts = [bytes(b"".join(token_bytes[t] for t in ids[:i])) for ids in docs for i in range(len(ids) + 1)]
    row: dict[str, Any] = {
        "workload": work.name,
        "documents": len(docs),
        "doc_tokens": sum(len(d) for d in docs),
        "doc_bytes": sum(len(d.encode()) for d in work.documents),
        "ours": None,
        "peers": {},
    }
    our_masks = None
    if engine is not None:
        try:
            automaton, compile_s, compile_malloc = measure_memory(lambda: engine.compile(work.schema))
            warm = [measure_memory(lambda: engine.compile(work.schema))[1] for _ in range(args.recompiles)]
            q, vsize = automaton.num_states, engine.vocab.size
            from stdsl.kernels.token_table import state_dtype

            ours: dict[str, Any] = {
                "compile_s": compile_s,
                "warm_compile_s": float(np.median(warm)) if warm else None,
                "compile_malloc_bytes": compile_malloc,
                "states": q,
                "automaton_nbytes": int(automaton.nbytes),
                "token_table_bytes_3B": 3 * q * vsize,
                "token_table_dtype": str(state_dtype(q)),
                "token_table_bytes_actual": state_dtype(q).itemsize * q * vsize,
            }
            ours.update(drive_ours(engine, automaton, docs, args.passes, walk=not args.no_walk))
            our_masks = ours.pop("_masks")
            row["ours"] = ours
        except Exception as exc:  # noqa: BLE001  (a failure is recorded in the results, the run goes on)
            errors.append(f"stdsl on {work.name}: {type(exc).__name__}: {exc}")
            row["ours"] = {"error": f"{type(exc).__name__}: {exc}"}
    for peer in peers:
        try:
            matcher, compile_s, compile_malloc = measure_memory(partial(peer.compile, work.schema))
            cell: dict[str, Any] = {
                "compile_s": compile_s,
                "compile_malloc_bytes": compile_malloc,
                "self_reported_bytes": peer.self_reported_bytes(matcher),
            }
            cell.update(drive_peer(peer, matcher, docs, args.passes))
            masks = cell.pop("_masks")
            if our_masks is not None:
                cell["agreement"] = compare_masks(
                    our_masks, masks, engine.vocab.token_bytes, engine.forced_chain(automaton), contexts
                )
            row["peers"][peer.name] = cell
            del matcher, masks
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{peer.name} on {work.name}: {type(exc).__name__}: {exc}")
            row["peers"][peer.name] = {"error": f"{type(exc).__name__}: {exc}"}
    print(f"[bench] {work.name}: done", file=sys.stderr, flush=True)
    return row


def main() -> None:
    """Parse arguments, build the shared structures, run every workload, write json + md."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", default=",".join(PEER_NAMES), help="comma list; '' for none")
    ap.add_argument("--workloads", default=",".join(ALL_WORKLOADS))
    ap.add_argument("--passes", type=int, default=3, help="warm/steady passes over each document")
    ap.add_argument("--recompiles", type=int, default=3, help="warm recompiles of our schema (median)")
    ap.add_argument("--no-walk", action="store_true", help="skip the portable walk timing")
    ap.add_argument("--no-ours", action="store_true", help="measure the peers only")
    ap.add_argument("--out", default=str(BENCH_DIR / "results" / "compile_and_mask"), help="path stem for .json/.md")
    args = ap.parse_args()
    wall0 = time.perf_counter()
    errors: list[str] = []

    qwen = load_qwen_vocab()
    token_bytes, eos, size = qwen.token_bytes, qwen.eos_id, len(qwen.token_bytes)

    shared: dict[str, Any] = {}
    engine = None
    if not args.no_ours:
        try:
            engine = OurEngine()
            shared["stdsl"] = engine.shared_facts()
            if list(engine.vocab.token_bytes) != token_bytes or engine.eos_id != eos:
                raise RuntimeError("stdsl's Qwen3.5 Vocabulary differs from the wheel's token bytes / eos")
        except Exception as exc:  # noqa: BLE001
            errors.append(f"stdsl shared structures: {type(exc).__name__}: {exc}")
            engine = None
    peers: list[Peer] = []
    for name in [n for n in args.peers.split(",") if n]:
        try:
            peer = make_peer(name, token_bytes, eos, qwen.encoding)
            _, build_s, build_malloc = measure_memory(peer.build_tokenizer)
            shared[name] = {"build_s": build_s, "malloc_bytes": build_malloc}
            peers.append(peer)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{name} tokenizer: {type(exc).__name__}: {exc}")

    rows = [run_workload(w, engine, peers, qwen, args, errors) for w in load_workloads(args.workloads.split(","))]
    result = {
        "command": " ".join([sys.executable, "benchmarks/compile_and_mask.py", *sys.argv[1:]]),
        "generated_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": time.perf_counter() - wall0,
        "machine": {"python": platform.python_version(), "machine": platform.machine(), "processor": _cpu_model()},
        "versions": {
            d: version_of(d) for d in ("stdsl", "llguidance", "xgrammar", "outlines_core", "numpy", "mlx", "tiktoken")
        },
        "vocab_size": size,
        "eos_id": eos,
        "passes": args.passes,
        "shared": shared,
        "workloads": rows,
        "errors": errors,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    markdown = render_markdown(result)
    out.with_suffix(".md").write_text(markdown)
    print(markdown)


def _cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
