"""JSON Schema conformance runner: the MaskBench table over a MaskBench-format folder, or the test suite.

MaskBench mode: every `*.json` file holds `schema` and `tests` (instances with `valid`).  Each
schema is compiled in a worker forked from a parent that imported the compiler and compiled nothing
(each peer's module and tokenizer are loaded before its workers fork too), under a time limit
(`stdsl.compile` gets the limit less half a second as `max_seconds`, so a schema it cannot finish
is refused rather than killed); a schema *passes* when it compiles and every valid instance is
accepted and every invalid instance rejected.  A valid instance is written compactly in its own
key order (MaskBench keeps schema order; `dump_in_schema_order` is tried too and counted
separately); an invalid instance counts as accepted if *any* of its compact spellings (own order,
ASCII escapes, schema order) is accepted.
Compilation goes through `stdsl.compile`, which routes recursive and oversized schemas to the
pushdown engine, with `strict=False`: the schema's exact language, which is what conformance asks.
`--strict` measures the default's instead (objects closed to their declared members: a valid instance
with undeclared members is then a validation error), for the DFA/pushdown split it gives.

    python benchmarks/jsonschema_coverage.py ../shared/jsonschemabench/maskbench-sample --every 2
    python benchmarks/jsonschema_coverage.py --suite ../shared/json-schema-test-suite

With `--peers llguidance,xgrammar` (their venv, see benchmarks/README.md) each schema is also
compiled by the peers on the Qwen3.5 vocabulary, each in a forked worker under the same time
limit, and the compile-time percentiles of every engine are reported side by side.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.errors import EmptyLanguageError, StdslError

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
PUBLISHED = {"LLGuidance": (8909, 2377, 0), "XGrammar": (8122, 90, 1368), "Outlines": (7050, 1773, 822),
             "llama.cpp": (6505, 1301, 649)}
PUBLISHED_TOTAL = 11306
COMPILE_MARGIN_S = 0.5
OUTCOMES = ("passing", "compile error", "timeout", "validation error", "invalidation error")


def _compile(schema: Any, max_states: int, max_seconds: float, strict: bool) -> tuple[Any, str]:
    """A matcher with `accepts(bytes)` for the schema, and which engine built it ('dfa' or 'pushdown').

    The same routing as `stdsl.compile`: recursive schemas, and schemas too large for one DFA (their
    container members outlined as nonterminals), go to the pushdown engine.
    """
    try:
        constraint = compile_constraint(schema, max_states=max_states, max_seconds=max_seconds, strict=strict)
    except EmptyLanguageError:
        return None, "dfa"
    return constraint, "pushdown" if isinstance(constraint, PushdownConstraint) else "dfa"


def _spellings(instance: Any, schema: Any) -> list[str]:
    """Compact spellings of an instance: own key order (UTF-8, then ASCII escapes), then schema order.

    The schema-order spelling counts only when it reads back as the very same JSON value, number
    types included: `12345.0` respelled `12345` is another instance under draft 4 (not an integer there).
    """
    out = [json.dumps(instance, separators=(",", ":"), ensure_ascii=False),
           json.dumps(instance, separators=(",", ":"))]
    try:
        ordered = dump_in_schema_order(instance, schema)
        if strictly_equal(json.loads(ordered), instance):
            out.append(ordered)
    except (StdslError, RecursionError, ValueError, TypeError):
        pass
    return list(dict.fromkeys(out))


def strictly_equal(a: Any, b: Any) -> bool:
    """JSON values equal with their number types (int vs float) and key sets, key order aside."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strictly_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strictly_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _accepts(matcher: Any, text: str) -> bool:
    return matcher is not None and matcher.accepts(text.encode("utf-8"))


def _classify(schema: Any, tests: list[dict], max_states: int, limit: float, conn: Any, strict: bool) -> None:
    """Worker: compile, report the compile time, then classify every instance."""
    start = time.perf_counter()
    try:
        matcher, engine = _compile(schema, max_states, max(limit - COMPILE_MARGIN_S, 0.1), strict)
    except StdslError as exc:
        conn.send({"stage": "compiled", "error": f"{type(exc).__name__}: {exc}"[:300],
                   "seconds": time.perf_counter() - start})
        return
    except Exception as exc:  # noqa: BLE001 - any other failure is reported as a compile error of its own kind
        conn.send({"stage": "compiled", "error": f"CRASH {type(exc).__name__}: {exc}"[:300],
                   "seconds": time.perf_counter() - start})
        return
    conn.send({"stage": "compiled", "error": None, "seconds": time.perf_counter() - start, "engine": engine})
    rejected, schema_order_only, accepted_invalid = [], 0, []
    for i, test in enumerate(tests):
        spellings = _spellings(test["data"], schema)
        if test["valid"]:
            if _accepts(matcher, spellings[0]):
                continue
            if any(_accepts(matcher, s) for s in spellings[1:]):
                schema_order_only += 1
            else:
                rejected.append(i)
        elif any(_accepts(matcher, s) for s in spellings):
            accepted_invalid.append(i)
    conn.send({"stage": "checked", "rejected": rejected, "accepted_invalid": accepted_invalid,
               "schema_order_only": schema_order_only})


def run_one(schema: Any, tests: list[dict], limit: float, max_states: int, strict: bool = False) -> dict:
    """Compile and check one schema in a forked worker; the outcome row (see OUTCOMES)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    worker = ctx.Process(target=_classify, args=(schema, tests, max_states, limit, child, strict), daemon=True)
    worker.start()
    child.close()
    row: dict = {"outcome": "timeout", "seconds": limit}
    try:
        if not parent.poll(limit):
            return row
        compiled = parent.recv()
        row["seconds"] = compiled["seconds"]
        if compiled["error"] is not None:
            row.update(outcome="compile error", error=compiled["error"])
            return row
        row["engine"] = compiled["engine"]
        if not parent.poll(max(60.0, 4 * limit)):
            row.update(outcome="timeout", error="instance check did not finish")
            return row
        checked = parent.recv()
        row.update(rejected=checked["rejected"], accepted_invalid=checked["accepted_invalid"],
                   schema_order_only=checked["schema_order_only"])
        if checked["accepted_invalid"]:
            row["outcome"] = "invalidation error"
        elif checked["rejected"]:
            row["outcome"] = "validation error"
        else:
            row["outcome"] = "passing"
        return row
    except EOFError:
        row.update(outcome="compile error", error="CRASH worker died")
        return row
    finally:
        if worker.is_alive():
            worker.kill()
        worker.join()
        parent.close()


def _peer_compile(peer: Any, schema: Any, conn: Any) -> None:
    """Worker: one peer's compile of the schema, timed (an exception is its refusal)."""
    start = time.perf_counter()
    try:
        peer.compile(schema)
        conn.send({"seconds": time.perf_counter() - start, "error": None})
    except Exception as exc:  # noqa: BLE001 - a peer's refusal is whatever it raises
        conn.send({"seconds": time.perf_counter() - start, "error": f"{type(exc).__name__}: {exc}"[:200]})


def run_peer(peer: Any, schema: Any, limit: float) -> dict:
    """A peer's compile of one schema in a forked worker: {'seconds', 'error'} ('timeout' past the limit)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    worker = ctx.Process(target=_peer_compile, args=(peer, schema, child), daemon=True)
    worker.start()
    child.close()
    try:
        if not parent.poll(limit):
            return {"seconds": limit, "error": "timeout"}
        return parent.recv()
    except EOFError:
        return {"seconds": limit, "error": "CRASH worker died"}
    finally:
        if worker.is_alive():
            worker.kill()
        worker.join()
        parent.close()


def load_peers(names: list[str]) -> dict[str, Any]:
    """The named peers with their Qwen3.5 tokenizer structures built (once, before the workers fork)."""
    from peers import load_qwen_vocab, make_peer

    qwen = load_qwen_vocab()
    out = {}
    for name in names:
        peer = make_peer(name, qwen.token_bytes, qwen.eos_id, qwen.encoding)
        if name == "xgrammar":
            peer.threads = 1
        peer.build_tokenizer()
        out[name] = peer
    return out


def source_of(name: str) -> str:
    """The MaskBench source folder of a file name (`Github_easy---o1.json` → Github_easy, `BFCL_simple_3` → BFCL)."""
    if "---" in name:
        return name.split("---")[0]
    return re.sub(r"_\d+\.json$", "", name).split("_")[0]


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4)
    return {"p50": at(0.50), "p90": at(0.90), "p95": at(0.95), "p99": at(0.99), "max": round(ordered[-1], 4)}


def run_maskbench(folder: Path, every: int, limit_files: int | None, timeout: float, max_states: int,
                  peers: dict[str, Any] | None = None, only: set[str] | None = None,
                  previous: dict | None = None, strict: bool = False) -> dict:
    """The MaskBench table over (a sample of) the folder, with the peers' compile times when given.

    With `only`, just those files are run and their rows replace the ones in `previous` (a result
    of an earlier run), whose other rows are kept; the tables are then recomputed from all rows.
    """
    peers = peers or {}
    files = sorted(folder.glob("*.json"))
    chosen = files[::every][:limit_files] if only is None else [f for f in files if f.name in only]
    rows = dict(previous["rows"]) if previous else {}
    start = time.time()
    for n, path in enumerate(chosen, 1):
        data = json.loads(path.read_text())
        row = run_one(data["schema"], data["tests"], timeout, max_states, strict)
        row["source"] = source_of(path.name)
        row["peers"] = {name: run_peer(peer, data["schema"], timeout) for name, peer in peers.items()}
        if previous and not peers and "peers" in rows.get(path.name, {}):
            row["peers"] = rows[path.name]["peers"]
        rows[path.name] = row
        if n % 50 == 0:
            print(f"  {n}/{len(chosen)} files, {time.time() - start:.0f}s", file=sys.stderr, flush=True)
    totals = Counter(r["outcome"] for r in rows.values())
    per_source: dict[str, Counter] = defaultdict(Counter)
    for r in rows.values():
        per_source[r["source"]][r["outcome"]] += 1
    compile_times = [r["seconds"] for r in rows.values() if r["outcome"] != "timeout"]
    errors = Counter(_error_kind(r.get("error", "")) for r in rows.values() if r["outcome"] == "compile error")
    peer_names = list(peers) or sorted({n for r in rows.values() for n in r.get("peers", {})})
    return {"folder": str(folder), "files_in_folder": len(files), "files_run": len(rows),
            "every": previous["every"] if previous else every, "timeout_s": timeout, "max_states": max_states,
            "strict": strict,
            "wall_s": round(time.time() - start, 1) + (previous["wall_s"] if previous else 0),
            "rerun_files": sorted(only) if only is not None else [],
            "totals": {k: totals.get(k, 0) for k in OUTCOMES},
            "per_source": {s: {k: c.get(k, 0) for k in OUTCOMES} for s, c in sorted(per_source.items())},
            "compile_seconds": _percentiles(compile_times),
            "peer_compile": _peer_compile_table(rows, peer_names),
            "pushdown_schemas": sum(r.get("engine") == "pushdown" for r in rows.values()),
            "schema_order_rescues": sum(r.get("schema_order_only", 0) for r in rows.values()),
            "compile_error_kinds": dict(errors.most_common(40)), "rows": rows}


def _peer_compile_table(rows: dict, names: list[str]) -> dict:
    """Per engine: schemas compiled, refused, timed out, and compile-time percentiles over the schemas it
    compiled and over those every engine compiled."""
    if not names:
        return {}
    ours = {f: r["seconds"] for f, r in rows.items() if r["outcome"] != "timeout" and r["outcome"] != "compile error"}
    times = {"stdsl": ours} | {n: {f: r["peers"][n]["seconds"] for f, r in rows.items()
                                   if r["peers"][n]["error"] is None} for n in names}
    common = set.intersection(*(set(t) for t in times.values()))
    table = {}
    for name, by_file in times.items():
        errors = [r["peers"][name]["error"] for r in rows.values()] if name != "stdsl" else []
        table[name] = {"compiled": len(by_file), "timeout": sum(e == "timeout" for e in errors),
                       "all": _percentiles(list(by_file.values())),
                       "common": _percentiles([by_file[f] for f in common]), "common_files": len(common)}
    return table


def _error_kind(error: str) -> str:
    """A compile error reduced to its reason (the schema path stripped), for the tally of refusals."""
    reason = re.sub(r"\(at [^)]*\)", "", error)
    return re.sub(r"#[^\s:']*", "#…", reason)[:120]


def run_suite(root: Path, timeout: float, max_states: int) -> dict:
    """Every draft 2020-12 file of the JSON-Schema-Test-Suite: per file, groups compiled and tests right."""
    suite = root / "tests" / "draft2020-12"
    files = sorted(suite.glob("*.json")) + sorted((suite / "optional" / "format").glob("*.json"))
    per_file = {}
    invalid_accepted: list[str] = []
    start = time.time()
    for path in files:
        name = str(path.relative_to(suite))
        stats = Counter()
        for i, group in enumerate(json.loads(path.read_text())):
            tests = [t for t in group["tests"] if "only an annotation" not in t["description"]]
            row = run_one(group["schema"], tests, timeout, max_states)
            stats["groups"] += 1
            stats["tests"] += len(tests)
            if row["outcome"] in ("compile error", "timeout"):
                stats["refused" if row["outcome"] == "compile error" else "timeout"] += 1
                stats["tests_unrun"] += len(tests)
                continue
            stats["compiled"] += 1
            stats["valid_rejected"] += len(row["rejected"])
            stats["invalid_accepted"] += len(row["accepted_invalid"])
            for j in row["accepted_invalid"]:
                invalid_accepted.append(f"{name}#{i} {group['description']} / {tests[j]['description']}")
        stats["fully_passes"] = int(stats["compiled"] == stats["groups"] and not stats["valid_rejected"]
                                    and not stats["invalid_accepted"])
        per_file[name] = dict(stats)
    return {"suite": str(suite), "wall_s": round(time.time() - start, 1), "timeout_s": timeout,
            "files": len(files), "fully_passing_files": [n for n, s in per_file.items() if s["fully_passes"]],
            "invalid_accepted": invalid_accepted, "per_file": per_file}


def maskbench_markdown(result: dict, command: str) -> str:
    """The MaskBench table (ours beside the published peers), per source folder, compile-time percentiles."""
    t, n = result["totals"], result["files_run"]
    lines = ["# JSON Schema coverage (MaskBench format)\n", f"Command: `{command}`\n",
             f"Ran {n} of {result['files_in_folder']} files of `{result['folder']}` (every {result['every']}th), "
             f"{result['timeout_s']} s compile limit per schema, {result['max_states']} DFA states at most, "
             f"{'the strict default (objects closed)' if result.get('strict') else 'the exact language'}; "
             f"{result['wall_s']} s wall.\n",
             *([f"Files run again with the code and rules of the second command and merged in: "
                f"{', '.join(result['rerun_files'])}.\n"] if result.get("rerun_files") else []),
             "| engine | files | passing | share | compile error | timeout | validation error | invalidation error |",
             "|---|---:|---:|---:|---:|---:|---:|---:|",
             f"| stdsl (this run) | {n} | {t['passing']} | {100 * t['passing'] / max(n, 1):.1f}% | "
             f"{t['compile error']} | {t['timeout']} | {t['validation error']} | {t['invalidation error']} |"]
    for name, (passing, compile_error, invalidation) in PUBLISHED.items():
        lines.append(f"| {name} (published, full set) | {PUBLISHED_TOTAL} | {passing} | "
                     f"{100 * passing / PUBLISHED_TOTAL:.1f}% | {compile_error} | – | – | {invalidation} |")
    lines += ["", "| source | files | passing | share | compile error | timeout | validation error "
              "| invalidation error |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for source, c in result["per_source"].items():
        total = sum(c.values())
        lines.append(f"| {source} | {total} | {c['passing']} | {100 * c['passing'] / max(total, 1):.1f}% | "
                     f"{c['compile error']} | {c['timeout']} | {c['validation error']} | {c['invalidation error']} |")
    p = result["compile_seconds"]
    lines += ["", "Compile seconds (schemas that finished): " + ", ".join(f"{k} {v}" for k, v in p.items()),
              "", "Each compile is the first in a worker forked from a parent that had imported every engine "
              "and compiled nothing (no compile cache, no kept nonterminal bodies)."]
    if result.get("peer_compile"):
        lines += ["", "Compile seconds beside the peers (Qwen3.5 vocabulary, same schemas, same process, "
                  f"{result['timeout_s']} s limit each; `common` = the schemas every engine compiled):\n",
                  "| engine | compiled | timeout | p50 | p95 | p99 | max | common p50 | common p95 | common p99 |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, row in result["peer_compile"].items():
            a, c = row["all"], row["common"]
            lines.append(f"| {name} | {row['compiled']} | {row['timeout']} | {a.get('p50')} | {a.get('p95')} | "
                         f"{a.get('p99')} | {a.get('max')} | {c.get('p50')} | {c.get('p95')} | {c.get('p99')} |")
    lines += [
              f"\nSchemas compiled through the pushdown engine: {result['pushdown_schemas']}; valid instances "
              f"accepted only in schema order (not the instance's own): {result['schema_order_rescues']}.\n",
              "Most common compile errors:\n", "| count | reason |", "|---:|---|"]
    lines += [f"| {c} | {k.replace('|', '/')} |" for k, c in result["compile_error_kinds"].items()]
    return "\n".join(lines) + "\n"


def suite_markdown(result: dict, command: str) -> str:
    """Per-file results over the JSON-Schema-Test-Suite."""
    lines = ["# JSON-Schema-Test-Suite (draft 2020-12)\n", f"Command: `{command}`\n",
             f"{result['files']} files, {result['wall_s']} s. Invalid instances accepted: "
             f"**{len(result['invalid_accepted'])}**.\n",
             f"Fully passing files ({len(result['fully_passing_files'])}): "
             + ", ".join(f"`{n}`" for n in result["fully_passing_files"]) + "\n",
             "| file | groups | compiled | refused | timeout | tests | valid rejected | invalid accepted |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, s in result["per_file"].items():
        lines.append(f"| {name} | {s.get('groups', 0)} | {s.get('compiled', 0)} | {s.get('refused', 0)} | "
                     f"{s.get('timeout', 0)} | {s.get('tests', 0)} | {s.get('valid_rejected', 0)} | "
                     f"{s.get('invalid_accepted', 0)} |")
    lines += ["", *(f"- INVALID ACCEPTED: {x}" for x in result["invalid_accepted"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the table, write the results files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?",
                        default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--suite", metavar="ROOT", help="run the JSON-Schema-Test-Suite at ROOT instead")
    parser.add_argument("--every", type=int, default=1, help="run every k-th file (sorted)")
    parser.add_argument("--limit", type=int, default=None, help="run at most this many files")
    parser.add_argument("--timeout", type=float, default=10.0, help="compile limit per schema, seconds")
    parser.add_argument("--max-states", type=int, default=100_000)
    parser.add_argument("--peers", default="", help="comma-separated peers to time too (llguidance,xgrammar)")
    parser.add_argument("--rerun", default=None, metavar="NAMES",
                        help="comma-separated file names to run again, merged into the existing results file")
    parser.add_argument("--strict", action="store_true",
                        help="measure the strict default (closed objects) instead of the exact language")
    parser.add_argument("--out", default=None,
                        help="results file stem (default benchmarks/results/jsonschema_coverage or jsonschema_suite)")
    args = parser.parse_args(argv)
    command = "python benchmarks/jsonschema_coverage.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.suite:
        result = run_suite(Path(args.suite), args.timeout, args.max_states)
        text = suite_markdown(result, command)
        stem = Path(args.out) if args.out else RESULTS / "jsonschema_suite"
    else:
        peers = load_peers([n for n in args.peers.split(",") if n])
        stem = Path(args.out) if args.out else RESULTS / "jsonschema_coverage"
        only = set(args.rerun.split(",")) if args.rerun else None
        previous = json.loads(stem.with_suffix(".json").read_text()) if only is not None else None
        if previous is not None:
            command = previous["command"] + " (then " + command + ")"
        result = run_maskbench(Path(args.folder), args.every, args.limit, args.timeout, args.max_states, peers,
                               only, previous, args.strict)
        text = maskbench_markdown(result, command)
    result["command"] = command
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1, ensure_ascii=False))
    stem.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
