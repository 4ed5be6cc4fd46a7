"""A cold compile, imports included: a fresh `python -c "import stdsl; stdsl.compile(schema)"` per extraction schema
(issue 36, item 3: at most 50 ms), beside the floors measured in the same run (an empty interpreter, `import
numpy`), with the heaviest imports of one run (`python -X importtime`).

Bytecode is cached (in a temporary `-X pycache_prefix`, written by a first unmeasured run) as in any installed
package; each measurement is the median over `--repeats` processes of wall time and of CPU time (user + system
of the child). `--stdsl PATH` puts another checkout of stdsl first on the path (to time the code before a change);
the children run with `-P`, so the working directory (a checkout, when run from one) does not come before it.

    python benchmarks/cold_compile.py --repeats 9
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTRACTION = REPO / ".." / "shared" / "tasks" / "extraction"
RESULTS = REPO / "benchmarks" / "results"
COMPILE = "import json, stdsl; s = json.load(open({path!r})); stdsl.compile(s.get('schema', s))"


def timed(code: str, env: dict[str, str], cache: str) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh interpreter running `code`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-P", "-X", f"pycache_prefix={cache}", "-c", code], env=env, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(code: str, env: dict[str, str], cache: str, repeats: int) -> dict[str, float]:
    """Median wall and CPU milliseconds over `repeats` fresh processes (after one that writes the bytecode)."""
    timed(code, env, cache)
    runs = [timed(code, env, cache) for _ in range(repeats)]
    return {"wall_ms": round(1e3 * statistics.median(w for w, _ in runs), 1),
            "cpu_ms": round(1e3 * statistics.median(c for _, c in runs), 1)}


def measure_pair(code: str, envs: list[dict[str, str]], cache: str, repeats: int) -> list[dict[str, float]]:
    """`measure` for two checkouts at once, their processes alternating, so the machine's load hits both alike."""
    for env in envs:
        timed(code, env, cache)
    runs: list[list[tuple[float, float]]] = [[], []]
    for repeat in range(repeats):
        for side in ((0, 1) if repeat % 2 == 0 else (1, 0)):
            runs[side].append(timed(code, envs[side], cache))
    return [{"wall_ms": round(1e3 * statistics.median(w for w, _ in side_runs), 1),
             "cpu_ms": round(1e3 * statistics.median(c for _, c in side_runs), 1)} for side_runs in runs]


def heaviest_imports(code: str, env: dict[str, str], cache: str, count: int) -> list[tuple[str, int]]:
    """The top-level imports of one run with the most cumulative microseconds (`-X importtime`)."""
    done = subprocess.run([sys.executable, "-P", "-X", "importtime", "-X", f"pycache_prefix={cache}", "-c", code],
                          env=env, check=True, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.split("|")
            if cumulative.strip().isdigit() and not name.startswith("  "):
                rows.append((name.strip(), int(cumulative)))
    return sorted(rows, key=lambda row: -row[1])[:count]


def main(argv: list[str] | None = None) -> int:
    """Time the floors and every extraction schema's cold compile; write results/cold_compile.{json,md}."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--stdsl", default=str(REPO), help="the checkout whose stdsl is imported")
    parser.add_argument("--versus", default=None, help="another checkout, measured alternately (CPU ms beside)")
    parser.add_argument("--out", default=str(RESULTS / "cold_compile"))
    args = parser.parse_args(argv)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([args.stdsl] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    schemas = sorted(EXTRACTION.glob("*.json"))
    if args.versus:
        return versus(args, env, schemas, argv)
    with tempfile.TemporaryDirectory() as cache:
        floors = {"empty interpreter": measure("pass", env, cache, args.repeats),
                  "import numpy": measure("import numpy", env, cache, args.repeats),
                  "import stdsl": measure("import stdsl", env, cache, args.repeats)}
        cases = {path.stem: measure(COMPILE.format(path=str(path)), env, cache, args.repeats) for path in schemas}
        imports = heaviest_imports(COMPILE.format(path=str(schemas[0])), env, cache, 12)
    command = "python benchmarks/cold_compile.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {"command": command, "repeats": args.repeats, "floors": floors, "cases": cases,
              "heaviest_imports_us": imports, "target_ms": 50}
    Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1))
    text = markdown(result)
    Path(args.out).with_suffix(".md").write_text(text)
    print(text)
    return 0


def versus(args: argparse.Namespace, env: dict[str, str], schemas: list[Path], argv: list[str] | None) -> int:
    """Both checkouts' floors and cold compiles, alternating; CPU ms side by side with the part past `import
    numpy` (for `import stdsl`: past the empty interpreter)."""
    other = dict(env, PYTHONPATH=env["PYTHONPATH"].replace(args.stdsl, args.versus, 1))
    codes = {"empty interpreter": "pass", "import numpy": "import numpy", "import stdsl": "import stdsl",
             **{f"compile `{path.stem}`": COMPILE.format(path=str(path)) for path in schemas}}
    with tempfile.TemporaryDirectory() as cache:
        rows = {name: measure_pair(code, [env, other], cache, args.repeats) for name, code in codes.items()}
    command = "python benchmarks/cold_compile.py " + " ".join(argv if argv is not None else sys.argv[1:])
    floors = [rows["import numpy"][side]["cpu_ms"] for side in (0, 1)]
    empty = [rows["empty interpreter"][side]["cpu_ms"] for side in (0, 1)]
    lines = ["# Cold compile, two checkouts alternating (issue 36, item 3)\n", f"Command: `{command}`\n",
             f"Median of {args.repeats} fresh processes each, the two checkouts' processes alternating; `this` is "
             f"{args.stdsl}, `versus` {args.versus}. Past = CPU ms over the same side's `import numpy` process "
             "(for `import stdsl`, which no longer imports numpy: over the empty interpreter).\n",
             "| process | CPU ms this | CPU ms versus | past this | past versus | wall ms this | wall ms versus |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, (this, that) in rows.items():
        base = empty if name == "import stdsl" else floors
        past = ["", ""] if name in ("empty interpreter", "import numpy") else \
            [round(this["cpu_ms"] - base[0], 1), round(that["cpu_ms"] - base[1], 1)]
        lines.append(f"| {name} | {this['cpu_ms']} | {that['cpu_ms']} | {past[0]} | {past[1]} | {this['wall_ms']} | "
                     f"{that['wall_ms']} |")
    Path(args.out).with_suffix(".json").write_text(json.dumps({"command": command, "rows": rows}, indent=1))
    Path(args.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def markdown(result: dict) -> str:
    """The floors, the cases against the target, and the heaviest imports."""
    lines = ["# Cold compile, imports included (issue 36, item 3)\n", f"Command: `{result['command']}`\n",
             f"Median of {result['repeats']} fresh processes each, bytecode cached; target: a cold compile of an "
             f"extraction schema within {result['target_ms']} ms.\n",
             "`past numpy` is the CPU time over the `import numpy` process's: what stdsl's import and compile add.\n",
             "| process | wall ms | CPU ms | past numpy CPU ms |", "|---|---:|---:|---:|"]
    numpy_cpu = result["floors"]["import numpy"]["cpu_ms"]
    for name, row in {**result["floors"], **{f"compile `{k}`": v for k, v in result["cases"].items()}}.items():
        past = round(row["cpu_ms"] - numpy_cpu, 1) if name != "empty interpreter" and name != "import numpy" else ""
        lines.append(f"| {name} | {row['wall_ms']} | {row['cpu_ms']} | {past} |")
    lines += ["", "Heaviest top-level imports of one compile (cumulative µs, `-X importtime`):\n",
              "| module | µs |", "|---|---:|"]
    lines += [f"| {name} | {us} |" for name, us in result["heaviest_imports_us"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
