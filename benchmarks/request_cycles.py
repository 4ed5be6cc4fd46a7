"""What finished requests leave in reference cycles, two checkouts side by side: objects only the collector frees.

A request left in a cycle is not freed when its caller lets go of the result: its controller (with the masks it
keeps, a vocabulary-sized row each), its log and its events wait for the collector, and on a long-running server
they are old by then, walked only by its rare full passes.  Each checkout runs in a worker of its own on the
embedded SmolLM2: each kind of request is run once to fill the process's caches, then `--requests` times with the
collector off, and a collection counts what is unreachable, how many row controllers are among it and the bytes of
the masks they keep.

    python benchmarks/request_cycles.py /work/base-NAME --out benchmarks/results/request_cycles_NAME
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
import gc, json, os, sys, warnings
import stdsl
from stdsl.control.controller import Controller
checkout, requests = sys.argv[1], int(sys.argv[2])
assert os.path.realpath(stdsl.__file__).startswith(os.path.realpath(checkout) + os.sep), stdsl.__file__
warnings.simplefilter("ignore")
model = stdsl.load()
closed = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
                                           "city": {"type": "string", "maxLength": 12}},
          "required": ["name", "age", "city"]}
open_object = stdsl.compile({"type": "object", "properties": {"name": {"type": "string"}}}, strict=False)


def streamed():
    for _ in stdsl.stream(model, "A person:", closed, max_tokens=16):
        pass


KINDS = {
    "generate, closed object": lambda: stdsl.generate(model, "A person:", closed, max_tokens=24),
    "generate, open object (pushdown)": lambda: stdsl.generate(model, "A person:", open_object, max_tokens=24),
    "stream": streamed,
    "generate_batch of 3": lambda: stdsl.generate_batch(
        model, [{"prompt": f"Person {i}:", "constraint": closed, "max_tokens": 16} for i in range(3)]),
    "parallel_fields": lambda: stdsl.generate(model, "A person:", closed, max_tokens=32, parallel_fields=True),
}
rows = {}
for name, run in KINDS.items():
    run()
    gc.collect()
    gc.disable()
    for _ in range(requests):
        run()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found = gc.collect()
    controllers = [thing for thing in gc.garbage if isinstance(thing, Controller)]
    held = sum(int(array.nbytes) for c in controllers for memo in (c._masks, c._words)
               for entry in memo.values() for array in entry if hasattr(array, "nbytes"))
    gc.garbage.clear()
    gc.set_debug(0)
    gc.collect()
    gc.enable()
    rows[name] = {"unreachable": found, "controllers": len(controllers), "mask_bytes": held}
print(json.dumps(rows), flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    """Run each kind of request in both checkouts' workers; write the counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the other checkout (its stdsl/ folder's parent)")
    parser.add_argument("--after", default=str(REPO))
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "request_cycles"))
    args = parser.parse_args(argv)
    sides = {}
    for side, checkout in (("before", args.before), ("after", args.after)):
        env = dict(os.environ, PYTHONPATH=checkout)
        done = subprocess.run([sys.executable, "-P", "-c", WORKER, checkout, str(args.requests)], env=env,
                              text=True, capture_output=True, check=True)
        sides[side] = json.loads(done.stdout.strip().splitlines()[-1])
    command = "python benchmarks/request_cycles.py " + " ".join(argv if argv is not None else sys.argv[1:])
    Path(args.out).with_suffix(".json").write_text(json.dumps({"command": command, "sides": sides}, indent=1))
    lines = ["# Objects finished requests leave in reference cycles\n", f"Command: `{command}`\n",
             f"SmolLM2 (embedded), {args.requests} requests of each kind after one that fills the caches, the "
             "collector off; what a collection then finds unreachable, the row controllers among it and the bytes "
             "of the masks they keep.\n",
             "| requests | side | unreachable objects | controllers | mask bytes |", "|---|---|---:|---:|---:|"]
    for kind in sides["after"]:
        for side in ("before", "after"):
            row = sides[side][kind]
            lines.append(f"| {kind} | {side} | {row['unreachable']} | {row['controllers']} | {row['mask_bytes']} |")
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
