"""Where a tool reply grammar's build spends its time: cProfile of `build_constraint` for random tools, cold
(every cache emptied) and again with one tool changed.  Writes benchmarks/results/tool_compile_profile.txt.

    python benchmarks/tool_compile_profile.py --tools 128 --formats hermes qwen_xml harmony
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

from random_tools import random_tools  # noqa: E402
from tool_compile import _changed, _spec  # noqa: E402


def _profiled(spec: dict, lines: int) -> tuple[float, str]:
    from stdsl.compiler.constraint_spec import build_constraint

    profile = cProfile.Profile()
    began = time.perf_counter()
    profile.enable()
    build_constraint(spec, 600)
    profile.disable()
    seconds = time.perf_counter() - began
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(lines)
    body = text.getvalue()
    return seconds, body[body.index("   ncalls"):]


def main() -> None:
    import stdsl

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=128)
    parser.add_argument("--formats", nargs="+", default=["hermes", "qwen_xml", "harmony"])
    parser.add_argument("--lines", type=int, default=25)
    parser.add_argument("--out", default=str(BENCH_DIR / "results" / "tool_compile_profile.txt"))
    args = parser.parse_args()
    tools = random_tools(args.tools, seed=args.tools)
    changed = _changed(tools, seed=args.tools + 1)
    parts = [f"Command: python benchmarks/tool_compile_profile.py {' '.join(sys.argv[1:])}".strip(), ""]
    for tool_format in args.formats:
        stdsl.caches.clear()
        for label, listed in (("cold", tools), ("one tool changed", changed)):
            seconds, body = _profiled(_spec(listed, tool_format), args.lines)
            parts += [f"== {args.tools} tools, {tool_format}, {label}: {seconds:.3f} s (under cProfile)", body]
            print(parts[-2], flush=True)
    Path(args.out).write_text("\n".join(parts))


if __name__ == "__main__":
    main()
