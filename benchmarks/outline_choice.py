"""What outlining a large pushdown at once (`recursive.outline_pays`) costs and saves: compile CPU and decode masks.

For each MaskBench schema the grammar `stdsl.compile` built before the choice (plain, outlined when that passed
the state budget) and the chosen one (`outline=None`, what it builds now) are compiled in a forked child with every
`stdsl.caches` entry cleared (process CPU seconds, best of `--repeats`); then both are walked along the same random
accepted documents (drawn from each machine, each accepted by both, or the run stops) tokenized by Qwen3.5, timing
the full-vocabulary mask per step (`PushdownRows.mask`) cold (fresh tables) and warm (the same documents again).
Writes benchmarks/results/NAME.{md,json}.

    python benchmarks/outline_choice.py --out benchmarks/results/outline_choice
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import stdsl.caches  # noqa: E402
from stdsl.compiler.json_schema.pushdown_constraint import compile_free_form  # noqa: E402
from stdsl.compiler.pushdown.constraint import PushdownConstraint  # noqa: E402
from stdsl.errors import StateBudgetError  # noqa: E402
from stdsl.kernels.pushdown.rows import PushdownRows  # noqa: E402
from stdsl.kernels.vocab_sources import qwen_tiktoken_encoding, qwen_vocabulary  # noqa: E402
from tests.compiler.accepting_walks import random_accepted  # noqa: E402

FOLDER = REPO.parent / "shared" / "jsonschemabench" / "maskbench-sample"
FILES = ["Github_ultra---o6366.json", "Github_hard---o84330.json", "Kubernetes---kb_233_Normalized.json",
         "Kubernetes---kb_741_Normalized.json", "Github_hard---o84200.json", "Github_hard---o48094.json",
         "Kubernetes---kb_684_Normalized.json", "Github_ultra---o79009.json"]


def compiled(schema: dict, outline: bool | None) -> PushdownConstraint:
    """The chosen grammar (`outline=None`), or with `outline=False` what `stdsl.compile` built before the choice:
    the plain grammar, outlined when that passed the state budget."""
    try:
        built = compile_free_form(schema, outline=outline, strict=False, max_states=100_000)
    except StateBudgetError:
        if outline is not False:
            raise
        built = compile_free_form(schema, outline=True, strict=False, max_states=100_000)
    assert isinstance(built, PushdownConstraint)
    return built


def forked_cpu(schema: dict, outline: bool | None) -> tuple[float, int, int]:
    """Process CPU seconds of one compile in a fork with `stdsl.caches` cleared, its states and nonterminals."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(read)
            stdsl.caches.clear()
            clock = time.process_time()
            built = compiled(schema, outline)
            found = [time.process_time() - clock, built.num_states, len(built.grammar.names)]
            os.write(write, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        cpu, states, names = json.loads(pipe.read())
    os.waitpid(child, 0)
    return cpu, states, names


def mask_times(constraint: PushdownConstraint, documents: list[list[int]], vocab: Any) -> dict[str, float]:
    """Median and mean ms per step of the mask along the documents, cold (fresh tables) then warm."""
    rows = PushdownRows(constraint.machine, vocab)
    out: dict[str, float] = {}
    for label in ("cold", "warm"):
        times = []
        for ids in documents:
            config = rows.machine.start
            for token in ids:
                tick = time.perf_counter()
                allowed = rows.mask(config)
                times.append(time.perf_counter() - tick)
                assert allowed[token]
                config = int(rows.next_states(config)[token])
            assert rows.mask(config)[vocab.eos_ids].all()
        out[f"{label}_median_ms"] = 1000 * float(np.median(times))
        out[f"{label}_mean_ms"] = 1000 * float(np.mean(times))
    out["steps"] = len(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", default=FILES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--documents", type=int, default=3, help="random documents from each machine")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "outline_choice"))
    args = parser.parse_args()
    vocab, encoding = qwen_vocabulary(), qwen_tiktoken_encoding()
    rows = []
    for name in args.files:
        schema = json.loads((FOLDER / name).read_text())["schema"]
        cpu = {}
        for label, outline in (("plain", False), ("chosen", None)):
            runs = [forked_cpu(schema, outline) for _ in range(args.repeats)]
            cpu[label] = (min(run[0] for run in runs), runs[0][1], runs[0][2])
        plain, chosen = compiled(schema, False), compiled(schema, None)
        rng = np.random.default_rng(0)
        texts = [random_accepted(machine.machine, rng, wander=400) for machine in (plain, chosen)
                 for _ in range(args.documents)]
        for text in texts:
            assert plain.accepts(text) and chosen.accepts(text), text
        documents = [encoding.encode(text.decode("utf-8"), allowed_special=set()) for text in texts]
        masks = {"plain": mask_times(plain, documents, vocab), "chosen": mask_times(chosen, documents, vocab)}
        rows.append({"file": name, "cpu_s": {k: v[0] for k, v in cpu.items()},
                     "states": {k: v[1] for k, v in cpu.items()}, "nonterminals": {k: v[2] for k, v in cpu.items()},
                     "masks": masks})
        print(json.dumps(rows[-1]), flush=True)
    load = os.getloadavg()
    command = "python benchmarks/" + " ".join(shlex.quote(a) for a in [Path(__file__).name, *sys.argv[1:]])
    lines = [
        "# Outlining a large pushdown at once: compile CPU and decode masks",
        "",
        f"Command: `{command}`; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end (a shared "
        "2-core machine: CPU times inflate with load, both sides alike).",
        "",
        "plain: what `stdsl.compile` built before the choice (`outline=False`, then `outline=True` when that passed "
        "the state budget: the Kubernetes schemas); chosen: `outline=None` (what it builds now). Compile: process "
        "CPU s of one compile in a fork with `stdsl.caches` cleared, best of "
        f"{args.repeats}. Masks: ms per step of the full Qwen3.5 mask (`PushdownRows.mask`) along "
        f"{2 * args.documents} random accepted documents (each accepted by both grammars), cold then warm.",
        "",
        "| schema | compile plain | compile chosen | states plain / chosen | nonterminals | mask cold plain / chosen "
        "(median, mean ms) | mask warm plain / chosen (median, mean ms) | steps |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        p, c = row["masks"]["plain"], row["masks"]["chosen"]
        lines.append(
            f"| `{row['file']}` | {row['cpu_s']['plain']:.3f} | {row['cpu_s']['chosen']:.3f} | "
            f"{row['states']['plain']:,} / {row['states']['chosen']:,} | {row['nonterminals']['plain']} / "
            f"{row['nonterminals']['chosen']} | {p['cold_median_ms']:.2f}, {p['cold_mean_ms']:.2f} / "
            f"{c['cold_median_ms']:.2f}, {c['cold_mean_ms']:.2f} | "
            f"{p['warm_median_ms']:.3f}, {p['warm_mean_ms']:.3f} / "
            f"{c['warm_median_ms']:.3f}, {c['warm_mean_ms']:.3f} | {p['steps']} |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    Path(args.out + ".json").write_text(json.dumps({"command": command, "load": load, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
