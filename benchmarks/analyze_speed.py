"""`stcon analyze` against `stcon compile` on the same inputs: analysis may cost at most one more compile.

Issue 35 asks `stcon analyze` to take at most 2x `stcon compile` on every example and task schema. Each input is
timed two ways, in this one run:

- fresh process: `python -m stdsl.cli compile FILE` and `python -m stdsl.cli analyze FILE` as a user runs them
  (interpreter start, imports, the command), best CPU time of `--repeats` runs each (wall time kept too);
- same process: the two commands' work after every cache is emptied (`stdsl.caches.clear()`), imports done:
  `stdsl.cli.main(["compile", FILE])` against `stdsl.cli.main(["analyze", FILE])` (output discarded), best CPU
  time of `--repeats`. `.stc` programs (which `stcon` compiles inside `run`) are timed here alone, as
  `CompiledProgram.constraint()` against the same plus `analyze_automaton` and its text report.

Inputs: examples/*.schema.json, the regular examples/*.stc, the schemas of tests/data/tasks (recursive ones are
refused by analyze and listed as such), and every `--maskbench-every`-th file of the MaskBench sample when
../shared/jsonschemabench/maskbench-sample exists. Writes benchmarks/results/analyze_speed.{json,md}.

    python benchmarks/analyze_speed.py
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stdsl.caches
from stdsl.cli import main as stcon
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.theory.analyze import analyze_automaton, render_analysis

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
MASKBENCH = REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"
CLAIMED_RATIO = 2.0


def inputs(maskbench: Path, every: int, scratch: Path) -> list[tuple[str, str, Path]]:
    """(group, name, file) per input; task and MaskBench schemas are written out to `scratch` as bare schemas."""
    found = [("example", path.name, path) for path in sorted((REPO / "examples").glob("*.schema.json"))]
    found += [("example", path.name, path) for path in sorted((REPO / "examples").glob("*.stc"))]
    sources = [("task", path) for path in sorted((REPO / "tests" / "data" / "tasks").glob("*/*.json"))]
    if maskbench.is_dir() and every > 0:
        sources += [("maskbench", path) for path in sorted(maskbench.glob("*.json"))[::every]]
    for group, path in sources:
        bare = scratch / f"{group}-{path.name}"
        bare.write_text(json.dumps(json.loads(path.read_text())["schema"]))
        found.append((group, path.name, bare))
    return found


def best_of(repeats: int, run: Callable[[], Any]) -> tuple[float, float]:
    """The least CPU seconds (this process and the children it waited for) and the least wall seconds of
    `repeats` runs of `run`: CPU time is what a shared, busy machine disturbs least."""
    cpu, wall = [], []
    for _ in range(repeats):
        own, children = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        run()
        wall.append(time.perf_counter() - start)
        done = resource.getrusage(resource.RUSAGE_CHILDREN)
        waited = done.ru_utime + done.ru_stime - children.ru_utime - children.ru_stime
        cpu.append(time.process_time() - own + waited)
    return min(cpu), min(wall)


def quiet_command(argv: list[str]) -> Callable[[], None]:
    """An `stcon` command run in this process on emptied caches, its output discarded; raises if it fails."""

    def run() -> None:
        stdsl.caches.clear()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            code = stcon(argv)
        if code != 0:
            raise RuntimeError(f"stcon {' '.join(argv)} exited {code}: {err.getvalue().strip()}")

    return run


def program_runs(path: Path) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """A `.stc` program's compile, and its compile plus the analysis and its text report."""

    def compile_only() -> Any:
        stdsl.caches.clear()
        return CompiledProgram.from_file(path).constraint()

    def analyze() -> str:
        return render_analysis(analyze_automaton(compile_only().automaton))

    return compile_only, analyze


def fresh(argv: list[str], repeats: int) -> tuple[float, float]:
    """Best CPU and wall seconds of `python -m stdsl.cli ARGV` in a new interpreter, on the stdsl this process
    imported (a worktree's, not the installed one's, when run with PYTHONPATH pointing at it)."""
    env = {**os.environ, "PYTHONPATH": str(Path(stdsl.caches.__file__).resolve().parents[1])}

    def run() -> None:
        subprocess.run([sys.executable, "-m", "stdsl.cli", *argv], cwd=REPO, env=env, check=True, capture_output=True)

    return best_of(repeats, run)


def measure(group: str, name: str, path: Path, repeats: int) -> dict[str, Any]:
    """One input's row: states, byte edges, both ways of timing and their ratios (or why it was skipped)."""
    row: dict[str, Any] = {"group": group, "input": name}
    if path.suffix == ".stc":
        constraint = CompiledProgram.from_file(path).constraint()
        if isinstance(constraint, PushdownConstraint):
            return {**row, "skipped": "recursive program: analyze works on regular constraints"}
        compile_run, analyze_run = program_runs(path)
        automaton = constraint.automaton
    else:
        probe = io.StringIO()
        with contextlib.redirect_stdout(probe), contextlib.redirect_stderr(io.StringIO()) as err:
            code = stcon(["analyze", str(path), "--json"])
        if code != 0:
            return {**row, "skipped": err.getvalue().strip().removeprefix("stcon: error: ")[:160]}
        compile_run, analyze_run = quiet_command(["compile", str(path)]), quiet_command(["analyze", str(path)])
        report = json.loads(probe.getvalue())
        compiled = io.StringIO()
        with contextlib.redirect_stdout(compiled):
            stcon(["compile", str(path), "--json"])
        row["compile_kind"] = "pushdown" if "nonterminals" in json.loads(compiled.getvalue()) else "dfa"
        row.update(states=report["states"], byte_edges=report["byte_edges"])
        automaton = None
    if automaton is not None:
        report = analyze_automaton(automaton)
        row.update(states=report["states"], byte_edges=report["byte_edges"])
    compile_run()  # warm: imports and lazily built tables outside the caches
    row["same_compile_s"], row["same_compile_wall_s"] = best_of(repeats, compile_run)
    row["same_analyze_s"], row["same_analyze_wall_s"] = best_of(repeats, analyze_run)
    row["same_ratio"] = row["same_analyze_s"] / row["same_compile_s"]
    if path.suffix != ".stc":
        row["fresh_compile_s"], row["fresh_compile_wall_s"] = fresh(["compile", str(path)], repeats)
        row["fresh_analyze_s"], row["fresh_analyze_wall_s"] = fresh(["analyze", str(path)], repeats)
        row["fresh_ratio"] = row["fresh_analyze_s"] / row["fresh_compile_s"]
    return row


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Worst and median ratio per way of timing, and whether every input is within the claimed ratio."""
    out: dict[str, Any] = {"inputs": len(rows), "measured": sum("same_ratio" in r for r in rows)}
    regular = [r for r in rows if r.get("compile_kind") != "pushdown"]
    for way, among in (("fresh", rows), ("same", regular), ("same_pushdown_compiles", rows)):
        key = f"{way.removesuffix('_pushdown_compiles')}_ratio"
        chosen = [r for r in among if key in r]
        if way == "same_pushdown_compiles":
            chosen = [r for r in chosen if r.get("compile_kind") == "pushdown"]
        ratios = [r[key] for r in chosen]
        if ratios:
            worst = max(chosen, key=lambda r: r[key])
            out[way] = {
                "inputs": len(ratios),
                "median_ratio": statistics.median(ratios),
                "max_ratio": max(ratios),
                "worst_input": worst["input"],
                f"within_{CLAIMED_RATIO:g}x": all(ratio <= CLAIMED_RATIO for ratio in ratios),
            }
    return out


def markdown(result: dict[str, Any]) -> str:
    """The results as a table per input, the summary first."""
    lines = [
        "# `stcon analyze` against `stcon compile`",
        "",
        f"Command: `{result['command']}`  ",
        f"Machine: {result['machine']}; best of {result['repeats']} runs each, in CPU seconds (the process and the",
        "children it waited for: what other work on a shared machine disturbs least; wall seconds are in the JSON).",
        "",
        "Fresh process: `python -m stdsl.cli compile|analyze FILE`, interpreter start included. Same process: the",
        "commands' work on emptied caches (for `.stc` programs: `CompiledProgram.constraint()` against it plus",
        "`analyze_automaton` and the text report). Ratio = analyze / compile; the claim is at most "
        f"{CLAIMED_RATIO:g}x. Where `stcon compile` gives a pushdown (free-form values nest to any depth, built",
        "lazily), analyze builds the bounded DFA (`compile_embeddable`) first: its same-process ratio compares two",
        "different compiles and is listed apart.",
        "",
        "| timing | inputs | median ratio | max ratio | worst input | all within |",
        "|---|---:|---:|---:|---|---|",
    ]
    for way, title in (("fresh", "fresh process"), ("same", "same process, DFA compiles"),
                       ("same_pushdown_compiles", "same process, pushdown compiles")):
        s = result["summary"].get(way)
        if s:
            within = "yes" if s[f"within_{CLAIMED_RATIO:g}x"] else "NO"
            lines.append(f"| {title} | {s['inputs']} | {s['median_ratio']:.2f} | {s['max_ratio']:.2f} | "
                         f"{s['worst_input']} | {within} |")
    lines += [
        "",
        "| group | input | compile gives | states | byte edges | compile s (fresh) | analyze s (fresh) | ratio "
        "| compile s (same) | analyze s (same) | ratio |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        if "skipped" in r:
            lines.append(f"| {r['group']} | {r['input']} | skipped: {r['skipped']} | | | | | | | | |")
            continue
        fresh_cells = (f"{r['fresh_compile_s']:.2f} | {r['fresh_analyze_s']:.2f} | {r['fresh_ratio']:.2f}"
                       if "fresh_ratio" in r else "- | - | -")
        lines.append(f"| {r['group']} | {r['input']} | {r.get('compile_kind', 'dfa')} | {r['states']} | "
                     f"{r['byte_edges']} | {fresh_cells} | "
                     f"{r['same_compile_s']:.3f} | {r['same_analyze_s']:.3f} | {r['same_ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per timing; the best is kept")
    parser.add_argument("--maskbench", default=str(MASKBENCH), help="folder of MaskBench files ({schema, tests})")
    parser.add_argument("--maskbench-every", type=int, default=113, help="take every n-th MaskBench file (0: none)")
    parser.add_argument("--out", default=str(RESULTS / "analyze_speed"), help="results path without suffix")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for group, name, path in inputs(Path(args.maskbench), args.maskbench_every, Path(scratch)):
            row = measure(group, name, path, args.repeats)
            rows.append(row)
            shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
            print(json.dumps(shown), flush=True)
    given = " ".join(sys.argv[1:])
    result = {
        "command": f"python benchmarks/analyze_speed.py{' ' + given if given else ''}",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "repeats": args.repeats,
        "claimed_ratio": CLAIMED_RATIO,
        "summary": summary(rows),
        "rows": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(json.dumps(result["summary"], indent=2))


if __name__ == "__main__":
    main()
