"""What the engine exploits in a compiled automaton: cut states, forced chains, and few-path regions between cuts.

The automaton is read as its byte graph (q -> q' when some byte moves q to q'), with a virtual
accept vertex after every accepting state. Cut states are the vertices on every start-accept walk;
between consecutive cuts, an acyclic region (a key, an enum, a boolean) is a trimmed two-terminal
DAG whose r paths are its byte strings, and Corollary 1 bounds its sampled tokens by c(H) <= r-1.
A cyclic region (free text) is reported as such: Theorem 11 does not apply to it.
Forced chains are listed from every decision point that enters one; chains entered from several
decision points share their tail, so `forced_bytes` (the sum of chain lengths) can exceed `forced_states`.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from stdsl.theory.graph import reachable, reverse, topological_order
from stdsl.theory.structure import (
    TwoTerminalDag,
    block_product,
    block_route,
    branch_kernel,
    dominator_tree,
)

ACCEPT = "accept"
MAX_LISTED_VALUES = 16
READABLE_COUNT = 10**6
"""Path counts from here on are shown by their order of magnitude in the text report (the JSON keeps them)."""
LOG10_2 = 0.30102999566398120


class AutomatonLike(Protocol):
    """The part of `stdsl.compiler.automata.automaton.Automaton` the analysis reads.

    An automaton that also has `class_transitions` and `byte_class` (the compiler's) is read over its byte
    classes, without expanding the 256-column table.
    """

    @property
    def transitions(self) -> np.ndarray: ...

    @property
    def accepting(self) -> np.ndarray: ...


def _text(data: bytes) -> str:
    """Bytes as readable text, undecodable bytes escaped."""
    return data.decode("utf-8", errors="backslashreplace")


def _class_form(automaton: AutomatonLike) -> tuple[np.ndarray, np.ndarray]:
    """The transition table over byte classes and each byte's class: the compiler's own, else one class per byte."""
    if hasattr(automaton, "class_transitions") and hasattr(automaton, "byte_class"):
        return np.asarray(automaton.class_transitions).astype(np.int64), np.asarray(automaton.byte_class)
    return np.asarray(automaton.transitions).astype(np.int64), np.arange(256)


def _forced_chains(
    forced_byte: np.ndarray, forced_target: np.ndarray, states: set[int], predecessors: list[list[int]]
) -> list[dict[str, Any]]:
    """Every maximal forced chain: from each forced state entered from the start or a decision point, to its end."""
    forced, target = forced_byte.tolist(), forced_target.tolist()
    chains = []
    for head in sorted(states):
        if forced[head] < 0 or (head != 0 and all(forced[p] >= 0 for p in predecessors[head])):
            continue
        data = bytearray()
        state, seen = head, set()
        while state >= 0 and forced[state] >= 0 and state not in seen:
            seen.add(state)
            data.append(forced[state])
            state = target[state]
        chains.append({"start": head, "end": state, "length": len(data), "text": _text(bytes(data))})
    return chains


class _ByteGraph:
    """The trimmed byte graph of an automaton plus a virtual accept vertex `sink`, read over byte classes.

    `out[u]` lists u's live successors once each as (v, bytes from u to v), in the order of the last such byte
    (the accept edge last): the byte multigraph with its parallel edges counted instead of listed. `graph` is
    the simple graph (successors sorted), `backward` its reverse.
    """

    def __init__(self, table: np.ndarray, byte_class: np.ndarray, accepting: np.ndarray) -> None:
        self.table, self.byte_class, self.accepting = table, byte_class, accepting
        self.sink = sink = table.shape[0]
        size = np.bincount(byte_class, minlength=table.shape[1])
        last = np.full(table.shape[1], -1, dtype=np.int64)
        np.maximum.at(last, byte_class, np.arange(256))
        tails, columns = np.nonzero((table >= 0) & (size > 0))
        keys = tails * (sink + 1) + table[tails, columns]
        unique, position = np.unique(keys, return_inverse=True)
        weights = np.bincount(position, weights=size[columns], minlength=len(unique)).astype(np.int64)
        last_byte = np.full(len(unique), -1, dtype=np.int64)
        np.maximum.at(last_byte, position, last[columns])
        accepted = np.flatnonzero(accepting)
        edge_tails = np.concatenate([unique // (sink + 1), accepted])
        edge_heads = np.concatenate([unique % (sink + 1), np.full(len(accepted), sink)])
        edge_weights = np.concatenate([weights, np.ones(len(accepted), dtype=np.int64)])
        order = np.lexsort((np.concatenate([last_byte, np.full(len(accepted), 256)]), edge_tails))
        simple: list[list[int]] = [[] for _ in range(sink + 1)]
        weighted: list[list[tuple[int, int]]] = [[] for _ in range(sink + 1)]
        for u, v, count in zip(edge_tails[order].tolist(), edge_heads[order].tolist(), edge_weights[order].tolist()):
            simple[u].append(v)
            weighted[u].append((v, count))
        self.live = reachable(simple, [0]) & reachable(reverse(simple), [sink])
        live = self.live
        self.out = [[(v, c) for v, c in weighted[u] if v in live] if u in live else [] for u in range(sink + 1)]
        self.graph = [sorted(v for v, _ in successors) for successors in self.out]
        self.out_bytes = [sum(c for _, c in successors) for successors in self.out]
        self.backward = reverse(self.graph)
        self.regions: dict[tuple[int, int], dict[str, Any] | None] = {}
        byte_count = (table >= 0).astype(np.int64) @ size
        forced = ~accepting & (byte_count == 1)
        sole = np.argmax(table >= 0, axis=1)
        self.forced_byte = np.where(forced, last[sole], -1)
        self.forced_target = np.where(forced, table[np.arange(sink), sole], -1)

    def row(self, state: int) -> np.ndarray:
        """The next state of `state` on each of the 256 bytes (-1 dead)."""
        return self.table[state][self.byte_class]

    def inside(self, entry: int, exit_: int) -> set[int]:
        """The states on the walks from `entry` until they first reach `exit_` (both included)."""
        ahead = reachable(self.graph, [entry], blocked=[exit_])
        inside = {exit_}
        queue = [exit_]
        while queue:
            for u in self.backward[queue.pop()]:
                if u in ahead and u not in inside:
                    inside.add(u)
                    queue.append(u)
        return inside

    def reaches_cycle(self, entry: int, exit_: int, known: dict[int, tuple[set[int], set[int]]]) -> bool:
        """Whether a walk from `entry` that never enters `exit_` can repeat a state: whether its region is cyclic.

        A depth-first search that stops at the first cycle. `known[exit_]` carries over, between the searches
        that avoid the same exit, the states known to reach a cycle (those on the search path when one was
        found) and those known not to (finished without finding one), so a region nested in another is not
        searched again: the many decision states of one long loop share their search.
        """
        cyclic, acyclic = known.setdefault(exit_, (set(), set()))
        if entry in cyclic or entry in acyclic:
            return entry in cyclic
        graph = self.graph
        path = {entry}
        stack = [(entry, iter(graph[entry]))]
        found = False
        while stack and not found:
            state, pending = stack[-1]
            for target in pending:
                if target == exit_ or target in acyclic:
                    continue
                if target in path or target in cyclic:
                    found = True
                else:
                    path.add(target)
                    stack.append((target, iter(graph[target])))
                break
            else:
                stack.pop()
                path.discard(state)
                acyclic.add(state)
        if found:
            cyclic.update(path)
        return found

    def region(self, entry: int, exit_: int, inside: set[int] | None = None) -> dict[str, Any] | None:
        """The walks from `entry` until they first reach `exit_` (through `inside`, computed when not given): a
        finite (acyclic) or cyclic region; None for one byte. Kept per (entry, exit): a region between cut states
        is often also a decision state's local region."""
        if (entry, exit_) not in self.regions:
            walked = self.inside(entry, exit_) if inside is None else inside
            self.regions[entry, exit_] = self._region(entry, exit_, walked)
        return self.regions[entry, exit_]

    def _region(self, entry: int, exit_: int, inside: set[int]) -> dict[str, Any] | None:
        edges: list[tuple[int, int]] = []
        multiplicities: list[int] = []
        for u in sorted(inside):
            if u != exit_:
                for v, count in self.out[u]:
                    if v in inside:
                        edges.append((u, v))
                        multiplicities.append(count)
        if len(inside) == 2 and sum(multiplicities) == 1:
            return None
        exit_name: int | str = ACCEPT if exit_ == self.sink else exit_
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
        dag = TwoTerminalDag(entry, exit_, tuple(labels[i] for i in order), tuple(edges), tuple(multiplicities))
        kernel = branch_kernel(dag)
        blocks = block_product(dag)
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
        if r <= MAX_LISTED_VALUES:
            report["values"] = self._values(entry, exit_name, inside - {self.sink})
        report["_inside"] = inside
        return report

    def _values(self, entry: int, exit_: int | str, region: set[int]) -> list[str]:
        """The byte strings of a finite region from entry to exit (only called when there are few)."""
        values: list[str] = []
        stack: list[tuple[int, bytes]] = [(entry, b"")]
        while stack:
            state, data = stack.pop()
            if state == exit_ and data:
                values.append(_text(data))
                continue
            if exit_ == ACCEPT and self.accepting[state]:
                values.append(_text(data))
            row = self.row(state)
            for byte in np.flatnonzero(row >= 0).tolist():
                target = int(row[byte])
                if target in region and target != entry:
                    stack.append((target, data + bytes([byte])))
        return sorted(values)


def _local_finite_regions(byte_graph: _ByteGraph) -> list[dict[str, Any]]:
    """Corollary 1 with local cuts: from each decision state to its immediate post-dominator, the maximal acyclic
    regions.

    These include finite fields inside loops (an enum in every item of an array), which no global cut isolates.
    Each decision state's region is first only tested for cycles (a search that stops at the first); the path
    counts, kernel and block product (linear in the region's state edges) are computed for the maximal finite
    regions alone, so the nested ones inside them (thousands in a schema with formats and bounded strings) cost no
    analysis.
    """
    post_dominator = dominator_tree(byte_graph.backward, byte_graph.sink)
    finite: list[tuple[int, set[int]]] = []
    interior: set[int] = set()
    known: dict[int, tuple[set[int], set[int]]] = {}
    for entry in sorted(byte_graph.live - {byte_graph.sink}):
        if byte_graph.out_bytes[entry] < 2 or entry in interior:
            continue  # not a decision, or inside a finite region found already: never maximal
        exit_ = post_dominator[entry]
        if not byte_graph.reaches_cycle(entry, exit_, known):
            inside = byte_graph.inside(entry, exit_)
            finite.append((entry, inside))
            interior |= inside - {entry, exit_}
    maximal = [(entry, inside) for entry, inside in finite if entry not in interior]
    regions = [byte_graph.region(entry, post_dominator[entry], inside) for entry, inside in maximal]
    return [r for r in regions if r is not None]


def _public(region: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in region.items() if not key.startswith("_")}


def analyze_automaton(automaton: AutomatonLike) -> dict[str, Any]:
    """Report cut states, forced chains and the few-path regions of a byte automaton, as plain JSON data.

    Cut states are recomputed (dominators of the accept vertex, and the block-route cut vertices of
    Theorem 12) and compared with the automaton's own `cut_states` and `forced_chain` when it has them.
    """
    table, byte_class = _class_form(automaton)
    accepting = np.asarray(automaton.accepting, dtype=bool)
    byte_graph = _ByteGraph(table, byte_class, accepting)
    sink, live, graph = byte_graph.sink, byte_graph.live, byte_graph.graph
    report: dict[str, Any] = {
        "states": int(table.shape[0]),
        "accepting_states": int(accepting.sum()),
        "live_states": len(live - {sink}),
        "byte_edges": sum(byte_graph.out_bytes[:sink]),
        "graph_edges": sum(len(successors) for successors in graph[:sink]),
    }
    if sink not in live:
        report.update(empty=True, cut_states=[], forced_chains=[], regions=[], local_finite_regions=[])
        return report
    dominator = dominator_tree(graph, 0)
    chain = [sink]
    while chain[-1] != 0:
        chain.append(dominator[chain[-1]])
    chain.reverse()
    cuts = chain[:-1]
    edges = tuple((u, v) for u in sorted(live) for v in graph[u])
    block_cuts = [entry for entry, _, _ in block_route(tuple(sorted(live)), edges, 0, sink)]
    acyclic = topological_order(graph) is not None
    report.update(
        empty=False,
        acyclic=acyclic,
        cut_states=cuts,
        block_cut_states=block_cuts,
        block_cuts_are_cut_states=set(block_cuts) <= set(cuts) and (not acyclic or block_cuts == cuts),
    )
    if hasattr(automaton, "cut_states"):
        theirs = np.flatnonzero(np.asarray(automaton.cut_states)).tolist()
        report["automaton_cut_states_match"] = sorted(theirs) == sorted(cuts)
    if hasattr(automaton, "min_bytes_to_accept"):
        report["min_bytes_to_accept"] = int(np.asarray(automaton.min_bytes_to_accept)[0])
    forced = byte_graph.forced_byte
    chains = _forced_chains(forced, byte_graph.forced_target, live - {sink}, byte_graph.backward)
    report["forced_chains"] = chains
    if hasattr(automaton, "forced_chain"):
        report["automaton_forced_chains_match"] = all(
            _text(automaton.forced_chain(c["start"])) == c["text"] for c in chains
        )
    regions = [r for r in (byte_graph.region(a, b) for a, b in pairwise(chain)) if r is not None]
    report["regions"] = [_public(r) for r in regions]
    local = _local_finite_regions(byte_graph)
    report["local_finite_regions"] = [_public(r) for r in local]
    finite = [r for r in regions if r["kind"] == "finite"]
    report["summary"] = {
        "cut_states": len(cuts),
        "forced_chains": len(chains),
        "forced_states": int(sum(1 for q in live - {sink} if forced[q] >= 0)),
        "forced_bytes": sum(c["length"] for c in chains),
        "longest_chain": max((c["length"] for c in chains), default=0),
        "single_byte_steps": len(chain) - 1 - len(regions),
        "finite_regions": len(finite),
        "cyclic_regions": len(regions) - len(finite),
        "local_finite_regions": len(local),
        "sampling_points_in_finite_regions": sum(r["sampling_points"] for r in local),
        "all_finite_regions_within_bound": all(r["within_bound"] and r["block_product_holds"] for r in local + finite),
    }
    return report


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    return [_row(header, widths), _row(["-" * w for w in widths], widths), *(_row(row, widths) for row in rows)]


def _clip(text: str, width: int = 48) -> str:
    shown = repr(text)[1:-1]
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def readable_count(count: int) -> str:
    """A path count as people read it: exact up to a million, else its order of magnitude (`≥ 10^k`).

    The exponent is found without writing the number out in decimal, which Python refuses past 4,300 digits.
    """
    if count < READABLE_COUNT:
        return str(count)
    exponent = int((count.bit_length() - 1) * LOG10_2)
    while 10 ** (exponent + 1) <= count:
        exponent += 1
    while 10**exponent > count:
        exponent -= 1
    return f"≥ 10^{exponent}"


def _finite_row(r: dict[str, Any]) -> list[str]:
    values = "|".join(r.get("values", [])) or "-"
    ok = "yes" if r["within_bound"] and r["block_product_holds"] else "NO"
    return [
        str(r["entry"]),
        str(r["exit"]),
        "finite",
        str(r["states"]),
        readable_count(r["paths"]),
        str(r["sampling_points"]),
        f"{readable_count(r['bound'])} {ok}",
        _clip(values, 40),
    ]


def render_analysis(report: dict[str, Any]) -> str:
    """The analysis as readable text: a summary, the forced chains and the regions between cut states."""
    lines = [
        (
            f"states {report['states']} (live {report['live_states']}, accepting {report['accepting_states']}), "
            f"byte edges {report['byte_edges']}, state edges {report['graph_edges']}"
        )
    ]
    if report["empty"]:
        return "\n".join([*lines, "the automaton accepts nothing"])
    summary = report["summary"]
    lines.append(
        f"cut states {summary['cut_states']}, forced chains {summary['forced_chains']} "
        f"({summary['forced_bytes']} bytes, longest {summary['longest_chain']}), "
        f"finite regions {summary['finite_regions']}, cyclic regions {summary['cyclic_regions']}"
    )
    checks = [
        ("cut states = automaton's", report.get("automaton_cut_states_match")),
        ("block-route cuts on every run", report["block_cuts_are_cut_states"]),
        ("forced chains = automaton's", report.get("automaton_forced_chains_match")),
        ("every finite region within r-1", summary["all_finite_regions_within_bound"]),
    ]
    lines.append("checks: " + ", ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in checks if ok is not None))
    if report["forced_chains"]:
        lines += ["", "forced chains (no model pass):"]
        rows = [[str(c["start"]), str(c["end"]), str(c["length"]), _clip(c["text"])] for c in report["forced_chains"]]
        lines += _table(["from", "to", "bytes", "text"], rows)
    if report["regions"]:
        lines += ["", "regions between consecutive cut states:"]
        rows = []
        for r in report["regions"]:
            if r["kind"] == "cyclic":
                rows.append([str(r["entry"]), str(r["exit"]), "cyclic", str(r["states"]), "-", "-", "-", "-"])
                continue
            rows.append(_finite_row(r))
        lines += _table(["from", "to", "kind", "states", "r", "sampling", "r-1", "values"], rows)
    on_chain = {(r["entry"], r["exit"]) for r in report["regions"]}
    nested = [r for r in report["local_finite_regions"] if (r["entry"], r["exit"]) not in on_chain]
    listed = [r for r in nested if "values" in r and all(len(v.encode()) >= 2 for v in r["values"])]
    if listed:
        lines += ["", "finite regions inside loops or optional parts (decision state to its post-dominator):"]
        lines += _table(
            ["from", "to", "kind", "states", "r", "sampling", "r-1", "values"], [_finite_row(r) for r in listed]
        )
    if len(listed) < len(nested):
        lines.append(
            f"(and {len(nested) - len(listed)} more finite regions inside loops: character classes, escapes, formats; "
            "see --json)"
        )
    return "\n".join(lines)
