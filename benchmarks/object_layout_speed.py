"""Tool argument objects laid out (`stdsl/compiler/tools/object_layout.py`), this checkout's `_laid_out` against
another checkout's, in one process: the objects of random Hermes tool lists are recorded once (their keys, value
DFAs, required flags), then each side lays all of them out in alternating rounds; process CPU time per round, and
whether both sides' automata are the same table.

    python benchmarks/object_layout_speed.py /work/base --sizes 128 400 --rounds 7 --out benchmarks/results/NAME
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from random_tools import random_tools  # noqa: E402
from tool_compile import _spec  # noqa: E402

import stdsl  # noqa: E402
from stdsl.compiler.constraint_spec import build_constraint  # noqa: E402
from stdsl.compiler.tools import object_layout  # noqa: E402


def _recorded(sizes: list[int]) -> list[tuple[Any, ...]]:
    """The arguments of every `_laid_out` call a cold build of each list's Hermes reply grammar makes."""
    calls: list[tuple[Any, ...]] = []
    original = object_layout._laid_out

    def recording(*args: Any) -> Any:
        calls.append(args)
        return original(*args)

    object_layout._laid_out = recording
    try:
        for size in sizes:
            stdsl.caches.clear()
            build_constraint(_spec(random_tools(size, seed=size), "hermes"), 600)
    finally:
        object_layout._laid_out = original
    return calls


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return bool(np.array_equal(a.class_transitions, b.class_transitions) and np.array_equal(a.byte_class, b.byte_class)
                and np.array_equal(a.accepting, b.accepting))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="the other checkout (its stdsl/ folder's parent)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 400])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location(
        "before_object_layout", Path(args.before) / "stdsl" / "compiler" / "tools" / "object_layout.py")
    assert spec is not None and spec.loader is not None
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    calls = _recorded(args.sizes)
    seconds: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for side, module in (("before", before), ("after", object_layout)):
            began = time.process_time()
            for call in calls:
                module._laid_out(*call)
            seconds[side].append(time.process_time() - began)
    identical = all(_same(before._laid_out(*call), object_layout._laid_out(*call)) for call in calls)
    medians = {side: statistics.median(values) for side, values in seconds.items()}
    lines = ["# Tool argument objects laid out, two checkouts in one process", "",
             f"Command: `python benchmarks/object_layout_speed.py {' '.join(sys.argv[1:])}`", "",
             f"{len(calls)} objects (Hermes lists of {', '.join(map(str, args.sizes))} random tools); process CPU ms "
             f"of laying all of them out, {args.rounds} alternating rounds; tables identical: {identical}.", "",
             "| side | each round | median |", "|---|---|---:|"]
    for side, values in seconds.items():
        lines.append(f"| {side} | {', '.join(f'{v * 1e3:.0f}' for v in values)} | {medians[side] * 1e3:.0f} |")
    lines += ["", f"after / before (medians): {medians['after'] / medians['before']:.2f}"]
    print("\n".join(lines))
    if args.out:
        Path(args.out + ".md").write_text("\n".join(lines) + "\n")
        Path(args.out + ".json").write_text(json.dumps({"command": sys.argv, "objects": len(calls),
                                                        "identical": identical, "seconds": seconds}, indent=1))


if __name__ == "__main__":
    main()
