"""Storing an automaton (`Automaton._store`: checks, equal byte classes merged, rows split into whole rows and sole
moves), per call, in this checkout against another, on the tables real builds store.

The calls are captured once here, from a cold tool reply (`--tools` random tools, Hermes, `tool_choice` auto) and
the named MaskBench files (`strict=False`, every cache emptied first), and replayed in a fresh process of each
checkout, the two alternating `--rounds` times (best of `--repeats` passes within a process).  A reply of many tools
stores two small tables a tool (its arguments' layout and its guarded call), so the per-call cost is paid hundreds
of times a build.

    python benchmarks/automaton_store_speed.py /tmp/base Handwritten---allany12 --tools 128 \\
        --out benchmarks/results/automaton_store_speed
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
REPLAY = """
import json, pickle, sys, time
from stdsl.compiler.automata.automaton import Automaton
import stdsl.caches
assert stdsl.caches.__file__.startswith(sys.argv[2]), stdsl.caches.__file__
groups = pickle.load(open(sys.argv[1], "rb"))
out = {}
for name, calls in groups.items():
    best = float("inf")
    for _ in range(int(sys.argv[3])):
        start = time.perf_counter()
        for table, accepting, byte_class in calls:
            Automaton.__new__(Automaton)._store(table, accepting, byte_class)
        best = min(best, time.perf_counter() - start)
    out[name] = best
print(json.dumps(out))
"""


def captured_calls(files: list[Path], tools: int) -> dict[str, list[tuple[Any, Any, Any]]]:
    """Every `Automaton._store` call (table, accepting, byte class) of each build, by build name."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from random_tools import random_tools

    import stdsl.caches
    from stdsl.compiler.automata.automaton import Automaton
    from stdsl.compiler.constraint import compile as compile_constraint
    from stdsl.compiler.constraint_spec import build_constraint

    groups: dict[str, list[tuple[Any, Any, Any]]] = {}
    original = Automaton._store
    current: list[tuple[Any, Any, Any]] = []

    def recorded(self: Automaton, table: Any, accepting: Any, byte_class: Any) -> None:
        current.append((table.copy(), accepting.copy(), byte_class.copy()))
        original(self, table, accepting, byte_class)

    entries = [{"name": tool["function"]["name"], "parameters": tool["function"]["parameters"]}
               for tool in random_tools(tools, seed=tools)]
    builds: list[tuple[str, Any]] = [(f"{tools} tools (Hermes)", lambda: build_constraint(
        {"kind": "tools", "format": "hermes", "tools": entries, "choice": "auto", "parallel": True,
         "content": None}, 600))]
    builds += [(path.stem, lambda path=path: compile_constraint(
        json.loads(path.read_text())["schema"], max_states=100_000, max_seconds=60, strict=False)) for path in files]
    Automaton._store = recorded  # type: ignore[method-assign]
    try:
        for name, build in builds:
            stdsl.caches.clear()
            current = groups[name] = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                build()
    finally:
        Automaton._store = original  # type: ignore[method-assign]
    return groups


def replayed(checkout: str, calls_file: str, repeats: int) -> dict[str, float]:
    """Best seconds per build over `repeats` passes, in a fresh process importing `checkout`'s stdsl."""
    done = subprocess.run([sys.executable, "-P", "-c", REPLAY, calls_file, os.path.realpath(checkout), str(repeats)],
                          env=dict(os.environ, PYTHONPATH=checkout), capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", help="the other checkout (a worktree)")
    parser.add_argument("files", nargs="*", help="MaskBench file names, with or without .json")
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--tools", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "automaton_store_speed"))
    args = parser.parse_args()
    folder = Path(args.folder)
    files = [folder / (name if name.endswith(".json") else f"{name}.json") for name in args.files]
    groups = captured_calls(files, args.tools)
    with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as handle:
        pickle.dump(groups, handle)
    times: dict[str, dict[str, list[float]]] = {"this": {}, "base": {}}
    try:
        for _ in range(args.rounds):
            for side, checkout in (("this", str(REPO)), ("base", args.base)):
                for name, seconds in replayed(checkout, handle.name, args.repeats).items():
                    times[side].setdefault(name, []).append(seconds)
    finally:
        os.unlink(handle.name)
    rows = []
    for name, calls in groups.items():
        this, base = statistics.median(times["this"][name]), statistics.median(times["base"][name])
        rows.append({"build": name, "calls": len(calls), "this_us": round(this / len(calls) * 1e6, 1),
                     "base_us": round(base / len(calls) * 1e6, 1), "this_ms": round(this * 1e3, 2),
                     "base_ms": round(base * 1e3, 2), "ratio": round(this / base, 3)})
    command = "python benchmarks/" + Path(__file__).name + " " + " ".join(sys.argv[1:])
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        {"command": command, "machine": platform.platform(), "rounds": args.rounds, "repeats": args.repeats,
         "rows": rows}, indent=1))
    lines = ["# Storing an automaton, per call: this checkout against a base", "", f"Command: `{command}`  ",
             f"Machine: {platform.platform()} (shared; alternating processes, read the ratios)", "",
             f"Every `Automaton._store` call of each build (cold, caches emptied), replayed in fresh processes of each "
             f"checkout, {args.rounds} rounds alternating, each the best of {args.repeats} passes; medians over the "
             f"rounds.", "",
             "| build | calls | this (us a call) | base (us a call) | this (ms in all) | base (ms in all) "
             "| this / base |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {row['build']} | {row['calls']} | {row['this_us']} | {row['base_us']} | {row['this_ms']} | "
              f"{row['base_ms']} | {row['ratio']} |" for row in rows]
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
