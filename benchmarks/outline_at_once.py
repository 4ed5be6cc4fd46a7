"""Whether reading the outline choice off the outlined bodies (`recursive._outlined_at_once`) picks the road the plain
bodies' count (`outline_pays`) picks, on every MaskBench schema that reaches the choice.

Each schema is compiled (strict=False, as the coverage benchmark compiles it) in a forked child along the old road
(plain bodies lowered first) up to `outline_pays`; there the outlined bodies are lowered and measured as
`_outlined_at_once` measures them for any member count, and the child stops.  Reports how many schemas reach the
choice, how many of each choice, every disagreement, and the schemas that declare `MANY_MEMBERS_FROM` members or
more (those that take the outlined bodies first now): their choice and the CPU seconds of the outlined lowering
and measure.  Writes benchmarks/results/NAME.{md,json}.

    python benchmarks/outline_at_once.py --out benchmarks/results/outline_at_once
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stdsl.compiler import constraint  # noqa: E402
from stdsl.compiler.json_schema import recursive  # noqa: E402
from stdsl.compiler.json_schema.outline_size import MANY_MEMBERS_FROM, declared_members  # noqa: E402


class _Reached(Exception):
    """Raised where the old road reaches its choice (or the DFA compiler), to stop the compile there."""


def _choices(schema: Any) -> dict[str, Any]:
    """In this process: the old road's choice and the outlined bodies' choice, or where the compile ended."""
    found: dict[str, Any] = {}
    old_pays, at_once = recursive.outline_pays, recursive._outlined_at_once

    def pays(*bodies: Any) -> bool:
        found["old"] = old_pays(*bodies)
        caller = sys._getframe(1).f_locals
        recursive.MANY_MEMBERS_FROM = 0
        began = time.process_time()
        found["new"] = at_once(caller["schema"], caller["calls"], caller["whitespace"], caller["zero_fractions"],
                               caller["strict"], caller["context"]) is not None
        found["outlined_cpu_s"] = round(time.process_time() - began, 4)
        raise _Reached

    def dfa(*_: Any, **__: Any) -> Any:
        raise _Reached

    recursive._outlined_at_once = lambda *_: None
    recursive.outline_pays = pays
    constraint.build_automaton = dfa  # type: ignore[assignment]
    try:
        constraint.compile(schema, max_states=100_000, max_seconds=30, strict=False)
        found["end"] = "compiled"
    except _Reached:
        found["end"] = "choice" if "old" in found else "dfa"
    except Exception as error:  # noqa: BLE001 - any refusal ends the walk; its class is reported
        found["end"] = type(error).__name__
    return found


def in_child(schema: Any) -> dict[str, Any]:
    """`_choices` in a forked child (its monkeypatching and caches die with it), at most 60 s."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        signal.alarm(60)
        os.write(write, json.dumps(_choices(schema)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(child, 0)
    return json.loads(text) if text else {"end": "killed"}


def main(argv: list[str] | None = None) -> int:
    """Walk every file, then write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "outline_at_once"))
    args = parser.parse_args(argv)
    rows = []
    for path in sorted(Path(args.folder).glob("*.json")):
        schema = json.loads(path.read_text())["schema"]
        rows.append({"file": path.name, "members": declared_members(schema, 10**9), **in_child(schema)})
    reached = [row for row in rows if row["end"] == "choice"]
    differ = [row for row in reached if row["old"] != row["new"]]
    many = [row for row in reached if row["members"] >= MANY_MEMBERS_FROM]
    command = "python " + " ".join(shlex.quote(arg) for arg in sys.argv)
    lines = [
        "# The outline choice read off the outlined bodies against the plain bodies' count",
        "",
        f"Command: `{command}`; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} at the end.",
        "",
        f"{len(rows)} schemas, {len(reached)} reach the choice (the others end in the DFA compiler or a refusal "
        f"first): the plain count outlines {sum(row['old'] for row in reached)}, the outlined count "
        f"{sum(row['new'] for row in reached)}; **{len(differ)} differ**"
        + (": " + ", ".join(f"`{row['file']}` (plain {row['old']})" for row in differ) if differ else "") + ".",
        "",
        f"{len(many)} of them declare {MANY_MEMBERS_FROM} members or more and now lower the outlined bodies first "
        f"({sum(row['old'] for row in many)} outline; the others lower both, the outlined ones first; CPU seconds of "
        "the outlined lowering and measure, measured after the plain lowering here, so caches it filled are warm):",
        "",
        "| file | members | outlined | outlined lowering + measure (CPU s) |",
        "|---|---:|---|---:|",
        *(f"| `{row['file']}` | {row['members']} | {row['old']} | {row['outlined_cpu_s']} |"
          for row in sorted(many, key=lambda row: -row["members"])),
    ]
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    Path(args.out + ".json").write_text(json.dumps(rows, indent=1) + "\n")
    print("\n".join(lines[:6]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
