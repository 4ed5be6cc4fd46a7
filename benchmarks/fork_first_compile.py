"""What a compile's first run in a forked worker pays beyond the same compile in a fresh process (issue 36's p50).

The coverage benchmark (`jsonschema_coverage.py`) times each schema as the first compile in a worker forked from a
parent that imported the compiler and compiled nothing.  Such a child shares the parent's memory copy-on-write: each
page of the parent that the compile writes (an object's reference count, a pool of the allocator, a code object's
inline caches) is copied on first write, and a CPython compile touches a few thousand of them.  This script
measures, on one machine in one run:

- the page costs: a copy-on-write fault (one byte written per page of an array the parent filled) and a fresh page's
  first-touch fault, in microseconds per 4 KB page;
- per schema (a trivial object, and every k-th MaskBench file in the p40-p60 band of its forked compile): the
  compile's wall time and minor page faults as the first compile of a fresh process (`python -c`, imports done
  before the clock starts), as the first compile of a forked child, and as a forked child's compile after it
  compiled another small schema and emptied every cache (`primed`);
- with `--peers llguidance`, the peer's compile of the same schemas in a fresh process and in a forked child (its
  tokenizer built first, as `jsonschema_coverage.load_peers` builds it).

A compile that raises is reported as -1 ms and -1 faults, not timed.

    python benchmarks/fork_first_compile.py --every 20 --peers llguidance --out benchmarks/results/fork_first_compile
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from compile_settings import _in_child  # noqa: E402
from jsonschema_coverage import load_peers  # noqa: E402

TRIVIAL = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]}
PRIMER = {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "number"},
                                           "z": {"type": "array", "items": {"type": "boolean"}}}}
PAGE = 4096
FRESH_WORKER = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
schema = json.loads(sys.stdin.read())
if sys.argv[1] == "stdsl":
    from stdsl.compiler.constraint import compile as compile_constraint
    run = lambda: compile_constraint(schema, max_states=100_000, max_seconds=20, strict=False)
else:
    sys.path.insert(0, sys.argv[2])
    from peers import load_qwen_vocab, make_peer
    vocab = load_qwen_vocab()
    peer = make_peer(sys.argv[1], vocab.token_bytes, vocab.eos_id, vocab.encoding)
    peer.build_tokenizer()
    run = lambda: peer.compile(schema)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
start = time.perf_counter()
try:
    run()
except Exception:
    print(json.dumps([-1.0, -1]))
else:
    print(json.dumps([time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults]))
"""


def page_costs() -> dict[str, float]:
    """Microseconds per 4 KB page: a copy-on-write fault in a forked child, and a fresh page's first touch."""
    inherited = np.ones(64 << 20, dtype=np.uint8)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        start = time.perf_counter()
        inherited[::PAGE] = 2
        os.write(writer, json.dumps((time.perf_counter() - start) / (len(inherited) // PAGE) * 1e6).encode())
        os._exit(0)
    os.close(writer)
    copy_on_write = float(os.read(reader, 64))
    os.waitpid(pid, 0)
    fresh = np.empty(64 << 20, dtype=np.uint8)
    start = time.perf_counter()
    fresh[::PAGE] = 2
    first_touch = (time.perf_counter() - start) / (len(fresh) // PAGE) * 1e6
    return {"copy_on_write_us": round(copy_on_write, 2), "first_touch_us": round(first_touch, 2)}


def forked(run: Any, primer: Any = None) -> tuple[float, int]:
    """`run()` as the first timed call of a child forked from this process (after `primer` and emptied caches when
    given): `compile_settings`' child, its wall seconds and minor faults; -1 and -1 for a compile that raised."""
    found = _in_child(run, primer)
    return (-1.0, -1) if found is None else (found["wall"] / 1e3, int(found["faults"]))


def fresh(engine: str, schema: Any) -> tuple[float, int]:
    """The schema's compile as the first of a fresh process (its imports and the peer's vocabulary loaded first)."""
    out = subprocess.run([sys.executable, "-c", FRESH_WORKER, engine, str(REPO / "benchmarks")],
                         input=json.dumps(schema), capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    seconds, faults = json.loads(out.stdout.strip().splitlines()[-1])
    return float(seconds), int(faults)


def band(files: list[Path], compile_schema: Any) -> list[Path]:
    """The files in the p40-p60 band of their forked first compile's time."""
    timed = sorted((forked(lambda s=json.loads(f.read_text())["schema"]: compile_schema(s))[0], f) for f in files)
    return [f for _, f in timed[int(0.4 * len(timed)):int(0.6 * len(timed)) + 1]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peers", nargs="*", default=[])
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "fork_first_compile"))
    args = parser.parse_args()

    from stdsl.compiler.constraint import compile as compile_constraint

    def ours(schema: Any) -> Any:
        return compile_constraint(schema, max_states=100_000, max_seconds=20, strict=False)

    def primer() -> None:
        ours(PRIMER)

    peers = load_peers(args.peers) if args.peers else {}

    costs = page_costs()
    files = sorted(Path(args.folder).glob("*.json"))[::args.every]
    chosen = band(files, ours)
    cases: list[tuple[str, Any]] = [("trivial object", TRIVIAL)] + [
        (f.stem, json.loads(f.read_text())["schema"]) for f in chosen]
    rows = []
    for name, schema in cases:
        row: dict[str, Any] = {"schema": name}
        settings: dict[str, Any] = {
            "stdsl fresh process": lambda s=schema: fresh("stdsl", s),
            "stdsl forked": lambda s=schema: forked(lambda: ours(s)),
            "stdsl forked, primed": lambda s=schema: forked(lambda: ours(s), primer),
        }
        for peer_name, peer in peers.items():
            settings[f"{peer_name} fresh process"] = lambda s=schema, n=peer_name: fresh(n, s)
            settings[f"{peer_name} forked"] = lambda s=schema, p=peer: forked(lambda: p.compile(s))
        for setting, measure in settings.items():
            runs = [measure() for _ in range(args.repeats)]
            row[setting] = {"ms": round(1000 * statistics.median(r[0] for r in runs), 2),
                            "faults": int(statistics.median(r[1] for r in runs))}
        rows.append(row)
        print(json.dumps(row), flush=True)

    settings_names = [k for k in rows[0] if k != "schema"]
    medians = {k: {"ms": round(statistics.median(r[k]["ms"] for r in rows[1:]), 2),
                   "faults": int(statistics.median(r[k]["faults"] for r in rows[1:]))} for k in settings_names}
    command = "python benchmarks/" + Path(__file__).name + " " + " ".join(sys.argv[1:])
    result = {"command": command, "machine": platform.platform(), "page_costs": costs, "rows": rows,
              "band_medians": medians, "band_files": len(chosen), "files_sampled": len(files)}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    lines = ["# A compile's first run in a forked worker against a fresh process", "",
             f"Command: `{command}`  ", f"Machine: {platform.platform()}", "",
             f"Page faults on this machine: copy-on-write {costs['copy_on_write_us']} us per 4 KB page, first touch "
             f"of a fresh page {costs['first_touch_us']} us.", "",
             f"Median over {args.repeats} runs each of wall ms and minor page faults; the band is the {len(chosen)} "
             f"files in the p40-p60 of forked first-compile time among every {args.every}th MaskBench file "
             f"({len(files)}), strict=False.", "",
             "| schema | " + " | ".join(settings_names) + " |", "|---|" + "---:|" * len(settings_names)]
    for row in [*rows[:1], {"schema": "band median", **medians}, *rows[1:]]:
        lines.append(f"| {row['schema']} | " + " | ".join(f"{row[k]['ms']} ms / {row[k]['faults']}"
                                                          for k in settings_names) + " |")
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
