"""What MaskBench compiles leave in reference cycles, two checkouts side by side: objects only the collector frees.

The collector is paused while a compile runs (`stdsl.compiler.collector_pause`); whatever the compile left in cycles
waited for the next collection after it, and after a refusal at the time limit that collection walked what the
compile had built: 0.5 s past a 9.5 s limit (o65421, o65432; `compile_forked_repeats.py --max-seconds 9.5`).  Each
checkout runs in a worker of its own that compiles every Nth file (`strict=False`) with the collector off, empties
the caches, and counts what a collection then finds unreachable, with the kinds of object most often among it.

    python benchmarks/compile_cycles.py /work/base-NAME --every 10 --out benchmarks/results/compile_cycles_NAME
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = """
import collections, gc, json, os, sys, warnings
import stdsl.caches
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.errors import StdslError
checkout, max_seconds = sys.argv[1], float(sys.argv[2])
assert os.path.realpath(stdsl.caches.__file__).startswith(os.path.realpath(checkout) + os.sep), stdsl.caches.__file__
warnings.simplefilter("ignore")


def kind(thing):
    name = type(thing).__name__
    if name == "function":
        return "function " + thing.__qualname__
    if name == "frame":
        return "frame " + thing.f_code.co_qualname
    return name


gc.collect()
gc.disable()
for line in sys.stdin:
    schema = json.loads(open(json.loads(line)).read())["schema"]
    stdsl.caches.clear()
    gc.collect()
    try:
        compile_constraint(schema, max_states=100_000, max_seconds=max_seconds, strict=False)
        outcome = "ok"
    except StdslError as error:
        outcome = type(error).__name__
        del error
    stdsl.caches.clear()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found = gc.collect()
    kinds = collections.Counter(kind(thing) for thing in gc.garbage)
    gc.garbage.clear()
    gc.set_debug(0)
    gc.collect()
    print(json.dumps({"unreachable": found, "kinds": kinds.most_common(4), "outcome": outcome}), flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    """Run every Nth file through both checkouts' workers; write the per-file counts and a summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the other checkout (its stdsl/ folder's parent)")
    parser.add_argument("--after", default=str(REPO))
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--max-seconds", type=float, default=10.0)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "compile_cycles"))
    args = parser.parse_args(argv)
    files = sorted(Path(args.folder).glob("*.json"))[::args.every]
    rows: dict[str, dict[str, dict]] = {path.name: {} for path in files}
    for side, checkout in (("before", args.before), ("after", args.after)):
        env = dict(os.environ, PYTHONPATH=checkout)
        worker = subprocess.Popen([sys.executable, "-P", "-c", WORKER, checkout, str(args.max_seconds)], env=env,
                                  text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert worker.stdin is not None and worker.stdout is not None
        for path in files:
            worker.stdin.write(json.dumps(str(path)) + "\n")
            worker.stdin.flush()
            rows[path.name][side] = json.loads(worker.stdout.readline())
        worker.stdin.close()
        worker.wait()
    command = "python benchmarks/compile_cycles.py " + " ".join(argv if argv is not None else sys.argv[1:])
    Path(args.out).with_suffix(".json").write_text(json.dumps({"command": command, "rows": rows}, indent=1))
    lines = ["# Objects MaskBench compiles leave in reference cycles\n", f"Command: `{command}`\n",
             f"{len(files)} files (every {args.every}th, `strict=False`, `max_seconds={args.max_seconds:g}`), each "
             "compiled with the collector off in a worker per checkout, the caches emptied after; objects a "
             "collection then finds unreachable.\n",
             "| side | files leaving cycles | unreachable objects, all files | most in one file |",
             "|---|---:|---:|---:|"]
    for side in ("before", "after"):
        counts = [row[side]["unreachable"] for row in rows.values()]
        lines.append(f"| {side} | {sum(1 for c in counts if c)} | {sum(counts)} | {max(counts)} |")
    lines += ["", "Files leaving cycles after (the kinds of object most often among them):", ""]
    lines += [f"- `{name}` ({row['after']['outcome']}): {row['after']['unreachable']} objects, "
              + ", ".join(f"{kind} {count}" for kind, count in row["after"]["kinds"])
              for name, row in rows.items() if row["after"]["unreachable"]] or ["- none"]
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
