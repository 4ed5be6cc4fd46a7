"""Whether two checkouts compile to the same tables: every array of every compiled constraint, bit for bit.

Each checkout compiles, in a worker process of its own (its `stdsl` first on the path), every k-th MaskBench file
(`strict=False` as the coverage benchmark compiles it, and the default `strict=True`) and the argument schemas of
`--tools` random tools (`random_tools.py`, as `compile_embeddable` builds them for a reply grammar), each with every
cache emptied first.  A worker writes per compile its outcome (ok or the error's type) and a digest of every numpy
array reachable from the result (its automaton, pushdown grammar and their tables, in the order the walk meets them,
each with its path, dtype and shape; a compact table that stands for a dense one, with a `dense()` method, as that
dense table); the driver compares the two lists and names every difference.  A speedup must leave them all equal.
`--renamed OLD=NEW` compares an attribute the other checkout calls OLD with this one's NEW (a table renamed when its
representation changed: `--renamed call_of_class=calls`).

    python benchmarks/compile_identity.py /work/base-warm47 --every 10 --out benchmarks/results/compile_identity_warm47
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER = """
import hashlib, json, os, sys
import numpy as np
import stdsl.caches
from stdsl.compiler import ir
from stdsl.compiler.constraint import compile as compile_constraint, compile_embeddable
from stdsl.errors import StdslError
checkout, folder, every, tools = json.loads(sys.argv[1])
assert os.path.realpath(stdsl.caches.__file__).startswith(os.path.realpath(checkout) + os.sep), stdsl.caches.__file__
sys.path.insert(0, os.path.join(checkout, "benchmarks"))
from random_tools import random_tools

LEAVES = (ir.ByteSet, ir.Seq, ir.Alt, ir.Repeat, ir.Embedded, ir.EmbeddedGrammar)


def arrays(value, path, seen, out):
    if id(value) in seen or isinstance(value, LEAVES) or isinstance(value, (str, bytes, int, float, bool, type(None))):
        return
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        out.append([path, str(data.dtype), list(data.shape), hashlib.sha256(data.tobytes()).hexdigest()])
    elif isinstance(value, dict):
        for key in sorted(value, key=repr):
            arrays(value[key], f"{path}[{key!r}]", seen, out)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            arrays(item, f"{path}[{index}]", seen, out)
    elif hasattr(value, "dense") and type(value).__module__.startswith("stdsl"):
        arrays(value.dense(), path, seen, out)
    elif hasattr(value, "__dict__") and type(value).__module__.startswith("stdsl"):
        for key in sorted(vars(value)):
            if key not in ("source", "model_class", "compile_seconds", "fragment") and not key.startswith("_cache"):
                arrays(vars(value)[key], f"{path}.{key}", seen, out)


def digest(build):
    stdsl.caches.clear()
    try:
        compiled = build()
    except StdslError as error:
        return {"outcome": type(error).__name__}
    found = []
    arrays(compiled, type(compiled).__name__, set(), found)
    return {"outcome": "ok", "arrays": found}


results = {}
files = sorted(os.listdir(folder))
for name in [f for f in files if f.endswith(".json")][::every]:
    with open(os.path.join(folder, name)) as handle:
        schema = json.load(handle)["schema"]
    for strict in (False, True):
        results[f"{name} strict={strict}"] = digest(
            lambda: compile_constraint(schema, max_states=100_000, max_seconds=60, strict=strict))
for index, tool in enumerate(random_tools(tools, seed=tools)):
    schema = tool["function"]["parameters"]
    results[f"tool {index}"] = digest(lambda: compile_embeddable(schema, max_seconds=60))
print(json.dumps(results))
"""


def _run(checkout: Path, folder: str, every: int, tools: int) -> dict[str, dict]:
    """The worker's digests for one checkout (`-P` keeps the working directory off its path)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    command = [sys.executable, "-P", "-W", "ignore", "-c", WORKER, json.dumps([str(checkout), folder, every, tools])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout))


def main(argv: list[str] | None = None) -> int:
    """Compile the same inputs on both checkouts and report every difference; exit 1 when there is one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the other checkout (e.g. main)")
    parser.add_argument("--after", default=str(REPO))
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--tools", type=int, default=128)
    parser.add_argument("--renamed", action="append", default=[], metavar="OLD=NEW",
                        help="an attribute the other checkout calls OLD and this one NEW")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    began = time.time()
    sides = {side: _run(Path(path).resolve(), str(Path(args.folder).resolve()), args.every, args.tools)
             for side, path in (("before", args.before), ("after", args.after))}
    for pair in args.renamed:
        old, new = pair.split("=", 1)
        for row in sides["before"].values():
            for entry in row.get("arrays", ()):
                entry[0] = entry[0].replace(f".{old}", f".{new}")
    for side in sides.values():
        for row in side.values():
            row.get("arrays", []).sort()
    differences = []
    for key in sorted(set(sides["before"]) | set(sides["after"])):
        before, after = sides["before"].get(key), sides["after"].get(key)
        if before != after:
            differences.append(key)
    compiled = sum(row["outcome"] == "ok" for row in sides["after"].values())
    tables = sum(len(row.get("arrays", ())) for row in sides["after"].values())
    command = "python benchmarks/compile_identity.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"# Compiled tables, {args.before} against {args.after}\n",
             f"Command: `{command}`; {time.time() - began:.0f} s; load average "
             f"{', '.join(f'{v:.2f}' for v in os.getloadavg())} at the end.\n",
             f"{len(sides['after'])} compiles (every {args.every}th MaskBench file with strict=False and strict=True, "
             f"{args.tools} random tools' argument schemas embeddable), {compiled} compiled, {tables} arrays "
             f"compared: **{len(differences)} differ** (outcome or any array's dtype, shape or bytes)."]
    lines += [f"- {key}" for key in differences]
    print("\n".join(lines))
    if args.out:
        Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps({"command": command, "differences": differences,
                                                                   "compiles": len(sides["after"]),
                                                                   "arrays": tables}, indent=1))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
