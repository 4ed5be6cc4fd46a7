"""The subset construction (`automata/nfa.build_nfa` and `automata/determinize.determinize`), this checkout's against
another checkout's, in one process: every call a MaskBench file's compile makes to them is recorded once (the IR of
each NFA built, each NFA determinized), then both sides' modules replay all of them in alternating rounds, so the
load of the host falls on both alike.  Process CPU per round; the median of the per-round ratios (other over this),
the median round of each side, and whether both sides built the same NFAs and DFAs.

    python benchmarks/subset_construction_ab.py /work/main Kubernetes---kb_233_Normalized --rounds 10 \\
        --out benchmarks/results/NAME
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stdsl.compiler.automata import determinize as this_determinize  # noqa: E402
from stdsl.compiler.automata import nfa as this_nfa  # noqa: E402
from stdsl.compiler.automata.nfa import NFA  # noqa: E402
from stdsl.compiler.constraint import compile as compile_constraint  # noqa: E402
from stdsl.errors import StdslError  # noqa: E402


def _other(checkout: Path, name: str) -> ModuleType:
    """The other checkout's `automata/<name>.py` as a module of its own (its imports are this checkout's)."""
    spec = importlib.util.spec_from_file_location(f"other_{name}", checkout / "stdsl" / "compiler" / "automata" /
                                                  f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _recorded(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The (IR, budget) of every NFA and the (NFA, budget, alphabet) of every subset construction of one compile
    (those that were not refused)."""
    nfas: list[tuple[Any, ...]] = []
    dfas: list[tuple[Any, ...]] = []
    real_nfa, real_determinize = this_determinize.build_nfa, this_determinize.determinize

    def record_nfa(node: Any, *rest: Any) -> Any:
        built = real_nfa(node, *rest)
        nfas.append((node, *rest))
        return built

    def record_determinize(nfa: Any, *rest: Any) -> Any:
        built = real_determinize(nfa, *rest)
        kept = NFA(eps=list(nfa.eps), edges=list(nfa.edges), byte_sets=nfa.byte_sets, start=nfa.start,
                   accept=nfa.accept)  # `determinize_expression` empties the NFA's lists once it is done
        dfas.append((kept, *rest))
        return built

    this_determinize.build_nfa, this_determinize.determinize = record_nfa, record_determinize  # type: ignore
    try:
        compile_constraint(json.loads(path.read_text())["schema"], max_states=100_000, max_seconds=60, strict=False)
    except StdslError:
        pass
    finally:
        this_determinize.build_nfa, this_determinize.determinize = real_nfa, real_determinize  # type: ignore
    return nfas, dfas


def _round(nfa_module: ModuleType, determinize_module: ModuleType, nfas: list, dfas: list) -> tuple[float, float]:
    """CPU seconds to build every recorded NFA and to determinize every recorded one."""
    start = time.process_time()
    for node, *rest in nfas:
        nfa_module.build_nfa(node, *rest)
    middle = time.process_time()
    for nfa, *rest in dfas:
        determinize_module.determinize(nfa, *rest)
    return middle - start, time.process_time() - middle


def _same(nfa_module: ModuleType, determinize_module: ModuleType, nfas: list, dfas: list) -> bool:
    """Whether the other side's NFAs and DFAs are this side's, state for state."""
    for node, *rest in nfas:
        mine, theirs = this_nfa.build_nfa(node, *rest), nfa_module.build_nfa(node, *rest)
        if (mine.eps, mine.edges, mine.byte_sets, mine.start, mine.accept) != \
                (theirs.eps, theirs.edges, theirs.byte_sets, theirs.start, theirs.accept):
            return False
    for nfa, *rest in dfas:
        mine, theirs = this_determinize.determinize(nfa, *rest), determinize_module.determinize(nfa, *rest)
        if not (np.array_equal(mine.table, theirs.table) and np.array_equal(mine.accepting, theirs.accepting)
                and np.array_equal(mine.byte_class, theirs.byte_class) and mine.in_bfs_order == theirs.in_bfs_order):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", help="the other checkout (its stdsl/ folder's parent)")
    parser.add_argument("files", nargs="+", help="MaskBench file names, with or without .json")
    parser.add_argument("--folder", default=str(REPO / ".." / "shared" / "jsonschemabench" / "maskbench-sample"))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", default=None, help="write OUT.md")
    args = parser.parse_args()
    other_nfa, other_determinize = _other(Path(args.other), "nfa"), _other(Path(args.other), "determinize")
    rows = []
    for name in args.files:
        nfas, dfas = _recorded(Path(args.folder) / (name if name.endswith(".json") else name + ".json"))
        sides = {"other": (other_nfa, other_determinize), "this": (this_nfa, this_determinize)}
        times: dict[str, list[tuple[float, float]]] = {"other": [], "this": []}
        for number in range(args.rounds):
            for side in (("other", "this") if number % 2 == 0 else ("this", "other")):
                times[side].append(_round(*sides[side], nfas, dfas))
        ratio = [statistics.median(o[part] / t[part] for o, t in zip(times["other"], times["this"]) if t[part] > 0)
                 for part in (0, 1)]
        best = {side: [statistics.median(row[part] for row in rounds) * 1e3 for part in (0, 1)]
                for side, rounds in times.items()}
        rows.append(f"| `{name}` | {len(nfas)} / {len(dfas)} | {best['other'][0]:.1f} / {best['this'][0]:.1f} | "
                    f"{ratio[0]:.2f}x | {best['other'][1]:.1f} / {best['this'][1]:.1f} | {ratio[1]:.2f}x | "
                    f"{_same(other_nfa, other_determinize, nfas, dfas)} |")
        print(rows[-1], flush=True)
    text = "\n".join([
        "# Subset construction, two checkouts in one process", "",
        f"Command: `python benchmarks/subset_construction_ab.py {' '.join(sys.argv[1:])}`", "",
        f"Other side: `{args.other}`; {args.rounds} alternating rounds per file, each replaying every `build_nfa` "
        "and `determinize` call the file's compile made (warm: the IR's own caches are filled).  Ratio: median of "
        "the per-round CPU ratios, other over this (above 1: this side faster); ms: the median round.", "",
        "| file | NFAs / DFAs | NFA ms other / this | NFA ratio | DFA ms other / this | DFA ratio | same |",
        "|---|---:|---:|---:|---:|---:|---|", *rows, ""])
    if args.out:
        Path(args.out + ".md").write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
