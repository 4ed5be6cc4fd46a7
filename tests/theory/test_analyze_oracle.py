"""`analyze_automaton` reads an automaton over its byte classes and reports exactly what a walk over its single
bytes reports, and costs at most a few times what compiling it does.

The oracle below is the straightforward analysis, as `stcon analyze` did it before it read byte classes: the
byte multigraph with one edge per live byte, every decision state's region tested on its own, and the branch
kernel and block product of each finite region computed on its parallel edges listed one by one (the
unweighted structure functions, themselves checked against path enumeration in test_structure.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl.caches
from stdsl.compiler.automata.build import compile_regex
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.theory import analyze_automaton, render_analysis
from stdsl.theory.analyze import readable_count
from stdsl.theory.graph import reachable, reverse, topological_order
from stdsl.theory.structure import (
    TwoTerminalDag,
    block_product,
    block_route,
    branch_kernel,
    immediate_dominators,
    on_every_path,
)
from tests.data_files import EXTRACTION
from tests.theory.test_analyze import TableAutomaton, small_dfas

ROOT = Path(__file__).resolve().parents[2]


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")


class ByteMultigraph:
    """One edge per live byte (the accept vertex after every accepting state), trimmed to the live states."""

    def __init__(self, transitions: np.ndarray, accepting: np.ndarray) -> None:
        self.transitions, self.accepting = transitions, accepting
        self.sink = sink = len(transitions)
        every = [transitions[q][transitions[q] >= 0].tolist() + ([sink] if accepting[q] else []) for q in range(sink)]
        every.append([])
        simple = [sorted(set(successors)) for successors in every]
        self.live = reachable(simple, [0]) & reachable(reverse(simple), [sink])
        self.graph = [[v for v in simple[u] if v in self.live] if u in self.live else [] for u in range(sink + 1)]
        self.multigraph = [[v for v in every[u] if v in self.live] if u in self.live else [] for u in range(sink + 1)]
        self.backward = reverse(self.graph)

    def inside(self, entry: int, exit_: int) -> set[int]:
        """The states reachable from `entry` before `exit_` that reach `exit_`."""
        ahead = reachable(self.graph, [entry], blocked=[exit_])
        return ahead & reachable(self.backward, [exit_], blocked=set(range(self.sink + 1)) - ahead)

    def region(self, entry: int, exit_: int) -> dict[str, Any] | None:
        inside = self.inside(entry, exit_)
        edges = tuple((u, v) for u in sorted(inside) if u != exit_ for v in self.multigraph[u] if v in inside)
        if len(inside) == 2 and len(edges) == 1:
            return None
        exit_name: int | str = "accept" if exit_ == self.sink else exit_
        report: dict[str, Any] = {"entry": entry, "exit": exit_name, "states": len(inside) - (exit_ == self.sink)}
        labels = sorted(inside)
        local = {v: i for i, v in enumerate(labels)}
        sub: list[list[int]] = [[] for _ in labels]
        for u, v in edges:
            sub[local[u]].append(local[v])
        order = topological_order(sub)
        if order is None:
            report["kind"] = "cyclic"
            return report
        dag = TwoTerminalDag(entry, exit_, tuple(labels[i] for i in order), edges)
        kernel, blocks = branch_kernel(dag), block_product(dag)
        r = kernel.paths
        report.update(
            kind="finite",
            paths=r,
            cyclomatic=kernel.cyclomatic,
            sampling_points=len(kernel.branch_vertices),
            branch_states=list(kernel.branch_vertices),
            bound=r - 1,
            within_bound=len(kernel.branch_vertices) <= kernel.cyclomatic <= r - 1 and not kernel.bound_violations(),
            kernel_states=len(kernel.vertices),
            block_product=blocks.paths,
            block_product_holds=blocks.paths == r and blocks.cyclomatic == kernel.cyclomatic,
        )
        if r <= 16:
            report["values"] = self.values(entry, exit_name, inside - {self.sink})
        return report

    def values(self, entry: int, exit_: int | str, region: set[int]) -> list[str]:
        found: list[str] = []
        stack: list[tuple[int, bytes]] = [(entry, b"")]
        while stack:
            state, data = stack.pop()
            if state == exit_ and data:
                found.append(_text(data))
                continue
            if exit_ == "accept" and self.accepting[state]:
                found.append(_text(data))
            for byte in np.flatnonzero(self.transitions[state] >= 0).tolist():
                target = int(self.transitions[state, byte])
                if target in region and target != entry:
                    stack.append((target, data + bytes([byte])))
        return sorted(found)


def byte_walk_report(automaton: Any) -> dict[str, Any]:
    """The report of `analyze_automaton`, computed over single bytes with no shortcut."""
    transitions = np.asarray(automaton.transitions).astype(np.int64)
    accepting = np.asarray(automaton.accepting, dtype=bool)
    g = ByteMultigraph(transitions, accepting)
    sink, live = g.sink, g.live
    report: dict[str, Any] = {
        "states": len(transitions),
        "accepting_states": int(accepting.sum()),
        "live_states": len(live - {sink}),
        "byte_edges": sum(len(successors) for successors in g.multigraph[:sink]),
        "graph_edges": sum(len(successors) for successors in g.graph[:sink]),
    }
    if sink not in live:
        return {**report, "empty": True, "cut_states": [], "forced_chains": [], "regions": [],
                "local_finite_regions": []}
    chain = on_every_path(g.graph, 0, sink)
    edges = tuple((u, v) for u in sorted(live) for v in g.graph[u])
    block_cuts = [entry for entry, _, _ in block_route(tuple(sorted(live)), edges, 0, sink)]
    acyclic = topological_order(g.graph) is not None
    report.update(empty=False, acyclic=acyclic, cut_states=chain[:-1], block_cut_states=block_cuts,
                  block_cuts_are_cut_states=set(block_cuts) <= set(chain) and (not acyclic or block_cuts == chain[:-1]))
    if hasattr(automaton, "cut_states"):
        report["automaton_cut_states_match"] = sorted(np.flatnonzero(automaton.cut_states).tolist()) == chain[:-1]
    if hasattr(automaton, "min_bytes_to_accept"):
        report["min_bytes_to_accept"] = int(automaton.min_bytes_to_accept[0])
    live_bytes = transitions >= 0
    forced = np.where(~accepting & (live_bytes.sum(axis=1) == 1), np.argmax(live_bytes, axis=1), -1)
    chains = []
    for head in sorted(live - {sink}):
        if forced[head] < 0 or (head != 0 and all(forced[p] >= 0 for p in g.backward[head])):
            continue
        data, state, seen = bytearray(), head, set()
        while state >= 0 and forced[state] >= 0 and state not in seen:
            seen.add(state)
            data.append(int(forced[state]))
            state = int(transitions[state, forced[state]])
        chains.append({"start": head, "end": state, "length": len(data), "text": _text(bytes(data))})
    report["forced_chains"] = chains
    if hasattr(automaton, "forced_chain"):
        report["automaton_forced_chains_match"] = all(
            _text(automaton.forced_chain(c["start"])) == c["text"] for c in chains
        )
    regions = [r for r in (g.region(a, b) for a, b in pairwise(chain)) if r is not None]
    post = immediate_dominators(g.backward, sink)
    every = {e: g.region(e, post[e]) for e in sorted(live - {sink}) if len(g.multigraph[e]) >= 2}
    finite = {e: r for e, r in every.items() if r is not None and r["kind"] == "finite"}
    interior = set().union(set(), *(g.inside(e, post[e]) - {e, post[e]} for e in finite))
    local = [r for e, r in finite.items() if e not in interior]
    report["regions"], report["local_finite_regions"] = regions, local
    between = [r for r in regions if r["kind"] == "finite"]
    report["summary"] = {
        "cut_states": len(chain) - 1,
        "forced_chains": len(chains),
        "forced_states": sum(1 for q in live - {sink} if forced[q] >= 0),
        "forced_bytes": sum(c["length"] for c in chains),
        "longest_chain": max((c["length"] for c in chains), default=0),
        "single_byte_steps": len(chain) - 1 - len(regions),
        "finite_regions": len(between),
        "cyclic_regions": len(regions) - len(between),
        "local_finite_regions": len(local),
        "sampling_points_in_finite_regions": sum(r["sampling_points"] for r in local),
        "all_finite_regions_within_bound": all(r["within_bound"] and r["block_product_holds"]
                                               for r in local + between),
    }
    return report


ATOMS = ["a", "b", "c", "ab", "[ab]", "[a-c]", "[^a]", ".", r"\d", "é", "[a-zé]", r"\{"]


def _regexes() -> st.SearchStrategy[str]:
    """Small patterns over a few letters, classes (one byte and multi-byte UTF-8), alternation and repetition."""

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        quantified = st.tuples(inner, st.sampled_from(["?", "*", "+", "{2}", "{0,3}", "{1,2}"])).map(
            lambda p: f"(?:{p[0]}){p[1]}"
        )
        joined = st.lists(inner, min_size=2, max_size=3).map("".join)
        either = st.lists(inner, min_size=2, max_size=3).map(lambda parts: "(?:" + "|".join(parts) + ")")
        return quantified | joined | either

    return st.recursive(st.sampled_from(ATOMS), extend, max_leaves=8)


@settings(max_examples=120, deadline=None)
@given(_regexes())
def test_random_regexes_report_as_the_byte_walk_does(pattern: str) -> None:
    automaton = compile_regex(pattern)
    expected = byte_walk_report(automaton)
    assert analyze_automaton(automaton) == expected, pattern
    # The same table without its byte classes (one class per byte): the same report, less the automaton's checks.
    bare = TableAutomaton(automaton.transitions, automaton.accepting)
    assert analyze_automaton(bare) == byte_walk_report(bare)


@settings(max_examples=200, deadline=None)
@given(small_dfas())
def test_random_tables_report_as_the_byte_walk_does(automaton: TableAutomaton) -> None:
    assert analyze_automaton(automaton) == byte_walk_report(automaton)


@pytest.mark.parametrize("name", ["contact_card", "event", "person", "product"])
def test_extraction_schemas_report_as_the_byte_walk_does(name: str) -> None:
    schema = json.loads((EXTRACTION / f"{name}.json").read_text())["schema"]
    automaton = compile_constraint(schema).automaton
    assert analyze_automaton(automaton) == byte_walk_report(automaton)


def _least_cpu_seconds(run: Any, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        stdsl.caches.clear()
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def test_analyze_costs_at_most_six_compiles() -> None:
    """A loose guard against a blowup (the analysis once took 83 s here; the claim, 2x in a fresh process, is
    measured by benchmarks/analyze_speed.py): compile plus the analysis and its report, against compile alone, in
    CPU seconds, best of three, on the largest example schema. The bound was 4x when this compile took 0.15 s;
    the compiler's later speedups (0.07 s) moved the ratio to about 4 with the analysis unchanged."""
    schema = json.loads((ROOT / "examples" / "person.schema.json").read_text())
    compile_constraint(schema)  # imports and tables built once per process
    compiled = _least_cpu_seconds(lambda: compile_constraint(schema))
    analyzed = _least_cpu_seconds(lambda: render_analysis(analyze_automaton(compile_constraint(schema).automaton)))
    assert analyzed <= 6 * compiled, (analyzed, compiled)


def test_counts_past_python_decimal_limit_are_shown_and_kept() -> None:
    """3,101 letters, each optional from its position on: about 10^4386 strings, past the 4,300 digits Python
    writes by default; the text report gives the magnitude and the JSON the exact count."""
    assert [readable_count(n) for n in (10**5000 - 1, 10**5000, 2**20000)] == ["≥ 10^4999", "≥ 10^5000", "≥ 10^6020"]
    command = [sys.executable, "-m", "stdsl.cli", "analyze", "--regex", "[a-z]{0,3100}"]
    text = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "≥ 10^4386" in text
    out = subprocess.run([*command, "--json"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        region = json.loads(out)["regions"][0]
        assert region["paths"] == sum(26**k for k in range(3101))
    finally:
        sys.set_int_max_str_digits(limit)
