"""The shape of few-path graphs: trimmed two-terminal DAGs, the branch kernel (Theorem 11) and the block product
(Theorem 12).

Vertices keep the labels of the graph they came from, so reports can name automaton states directly.
Parallel edges are kept: in a byte automaton two bytes into the same state are two strings. They may be
listed one by one or as one edge with a multiplicity (a byte class of 26 letters is 26 edges in one), so a
byte automaton is read in the size of its state graph rather than of its byte edges.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property
from math import prod

from stdsl.theory.graph import (
    Adjacency,
    GraphError,
    reachable,
    reverse,
    topological_order,
    validate_adjacency,
    validate_vertex,
)


@dataclass(frozen=True)
class TwoTerminalDag:
    """A DAG whose every vertex and edge lies on a source-sink path; `vertices` are in topological order.

    `multiplicities[i]` is how many parallel edges `edges[i]` stands for; empty means one each.
    """

    source: int
    sink: int
    vertices: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    multiplicities: tuple[int, ...] = ()

    def edge_multiplicities(self) -> tuple[int, ...]:
        """How many parallel edges each entry of `edges` stands for."""
        return self.multiplicities or (1,) * len(self.edges)

    def out_edges(self) -> dict[int, list[tuple[int, int]]]:
        """Each vertex's outgoing entries as (head, multiplicity), in the order of `edges` (built once; read only)."""
        return self._tables[0]

    def out_degree(self) -> dict[int, int]:
        """Each vertex's number of outgoing edges (parallel edges counted; built once, read only)."""
        return self._tables[1]

    def in_degree(self) -> dict[int, int]:
        """Each vertex's number of incoming edges (parallel edges counted; built once, read only)."""
        return self._tables[2]

    @cached_property
    def _tables(self) -> tuple[dict[int, list[tuple[int, int]]], dict[int, int], dict[int, int]]:
        """Outgoing entries, out-degrees and in-degrees in one pass over the edges: the kernel, the path count
        and the block product all read them."""
        out_edges: dict[int, list[tuple[int, int]]] = {v: [] for v in self.vertices}
        out_degree = dict.fromkeys(self.vertices, 0)
        in_degree = dict.fromkeys(self.vertices, 0)
        for (u, v), count in zip(self.edges, self.edge_multiplicities()):
            out_edges[u].append((v, count))
            out_degree[u] += count
            in_degree[v] += count
        return out_edges, out_degree, in_degree


def trim_two_terminal(adjacency: Adjacency, s: int, t: int) -> TwoTerminalDag:
    """Restrict a graph to the vertices and edges on some s-t path; GraphError if t is unreachable or a cycle
    remains."""
    graph = validate_adjacency(adjacency)
    n = len(graph)
    s = validate_vertex("s", s, n)
    t = validate_vertex("t", t, n)
    kept = reachable(graph, [s]) & reachable(reverse(graph), [t])
    if s not in kept:
        raise GraphError(f"{t} is not reachable from {s}")
    sub = [[v for v in graph[u] if v in kept] if u in kept else [] for u in range(n)]
    order = topological_order(sub)
    if order is None:
        raise GraphError(f"the s-t walks from {s} to {t} pass through a directed cycle")
    return TwoTerminalDag(s, t, tuple(v for v in order if v in kept), tuple((u, v) for u in range(n) for v in sub[u]))


def path_count(dag: TwoTerminalDag) -> int:
    """r = N_H(s, t), the number of source-sink paths (parallel edges counted separately)."""
    out_edges = dag.out_edges()
    count = {dag.sink: 1}
    for u in reversed(dag.vertices):
        if u != dag.sink:
            count[u] = sum(multiplicity * count[v] for v, multiplicity in out_edges[u])
    return count[dag.source]


def cyclomatic_number(dag: TwoTerminalDag) -> int:
    """c(H) = |E| - |V| + 1, parallel edges counted."""
    return sum(dag.edge_multiplicities()) - len(dag.vertices) + 1


@dataclass(frozen=True)
class KernelEdge:
    """An edge of the branch kernel; `chain` lists the suppressed forced vertices it replaces, in order, and
    `multiplicity` how many parallel edges it stands for."""

    tail: int
    head: int
    chain: tuple[int, ...]
    multiplicity: int = 1


@dataclass(frozen=True)
class BranchKernel:
    """Theorem 11's data: r paths, cyclomatic number c, branch and merge vertices, and the contracted multigraph."""

    paths: int
    cyclomatic: int
    branch_vertices: tuple[int, ...]
    merge_vertices: tuple[int, ...]
    vertices: tuple[int, ...]
    edges: tuple[KernelEdge, ...]

    def bound_violations(self) -> list[str]:
        """The statements of Theorem 11 this kernel breaks (empty on every trimmed two-terminal DAG)."""
        c, r = self.cyclomatic, self.paths
        checks = {
            "c(H)+1 <= r": c + 1 <= r,
            "r <= 2^c(H)": r <= 2**c,
            "branch vertices <= c(H)": len(self.branch_vertices) <= c,
            "merge vertices <= c(H)": len(self.merge_vertices) <= c,
            "c(H) <= r-1": c <= r - 1,
            "kernel vertices <= 2c(H)+2": len(self.vertices) <= 2 * c + 2,
            "kernel vertices <= 2r": len(self.vertices) <= 2 * r,
            "kernel edges <= 3c(H)+1": sum(edge.multiplicity for edge in self.edges) <= 3 * c + 1,
        }
        return [name for name, holds in checks.items() if not holds]


def contract_forced_chains(dag: TwoTerminalDag) -> tuple[tuple[int, ...], tuple[KernelEdge, ...]]:
    """Suppress every internal vertex with in- and out-degree one; the multigraph keeps the same terminal paths.

    A kernel edge stands for as many parallel edges as the first edge of its chain (the rest are single).
    """
    out_edges = dag.out_edges()
    indegree = dag.in_degree()
    outdegree = dag.out_degree()
    forced = {v for v in dag.vertices if v not in (dag.source, dag.sink) and indegree[v] == 1 and outdegree[v] == 1}
    kept = tuple(v for v in dag.vertices if v not in forced)
    edges: list[KernelEdge] = []
    for u in kept:
        for v, multiplicity in out_edges[u]:
            chain: list[int] = []
            while v in forced:
                chain.append(v)
                v = out_edges[v][0][0]
            edges.append(KernelEdge(u, v, tuple(chain), multiplicity))
    return kept, tuple(edges)


def branch_kernel(dag: TwoTerminalDag) -> BranchKernel:
    """Theorem 11: the path count, c(H), the branch (out-degree >= 2) and merge vertices, and the contracted kernel."""
    out_degree = dag.out_degree()
    in_degree = dag.in_degree()
    vertices, edges = contract_forced_chains(dag)
    return BranchKernel(
        paths=path_count(dag),
        cyclomatic=cyclomatic_number(dag),
        branch_vertices=tuple(v for v in dag.vertices if out_degree[v] >= 2),
        merge_vertices=tuple(v for v in dag.vertices if in_degree[v] >= 2),
        vertices=vertices,
        edges=edges,
    )


def biconnected_blocks(vertices: tuple[int, ...], edges: tuple[tuple[int, int], ...]) -> list[list[int]]:
    """The biconnected blocks of the underlying undirected multigraph, each a list of edge indices (iterative Tarjan).

    Vertices are numbered by their position in `vertices` for the search, so its tables are lists.
    """
    position = {v: i for i, v in enumerate(vertices)}
    neighbours: list[list[tuple[int, int]]] = [[] for _ in vertices]
    for index, (u, v) in enumerate(edges):
        iu, iv = position[u], position[v]
        neighbours[iu].append((iv, index))
        neighbours[iv].append((iu, index))
    discovered = [-1] * len(vertices)
    low = [0] * len(vertices)
    found = 0
    blocks: list[list[int]] = []
    edge_stack: list[int] = []
    for root in range(len(vertices)):
        if discovered[root] >= 0:
            continue
        discovered[root] = low[root] = found
        found += 1
        stack = [(root, -1, iter(neighbours[root]))]
        while stack:
            v, parent_edge, pending = stack[-1]
            descended = False
            for w, index in pending:
                if index == parent_edge:
                    continue
                if discovered[w] < 0:
                    edge_stack.append(index)
                    discovered[w] = low[w] = found
                    found += 1
                    stack.append((w, index, iter(neighbours[w])))
                    descended = True
                    break
                if discovered[w] < discovered[v]:
                    edge_stack.append(index)
                    low[v] = min(low[v], discovered[w])
            if descended:
                continue
            stack.pop()
            if stack:
                u = stack[-1][0]
                low[u] = min(low[u], low[v])
                if low[v] >= discovered[u]:
                    block: list[int] = []
                    while True:
                        index = edge_stack.pop()
                        block.append(index)
                        if index == parent_edge:
                            break
                    blocks.append(block)
    return blocks


@dataclass(frozen=True)
class RouteBlock:
    """A biconnected block on the s-t route: entry a_i, exit b_i, its vertices and edges, paths a_i -> b_i and
    c(B_i)."""

    entry: int
    exit: int
    vertices: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    paths: int
    cyclomatic: int


@dataclass(frozen=True)
class BlockProduct:
    """Theorem 12's data: the route blocks, the cut vertices s = a_1, b_1 = a_2, ..., b_q = t, and the product of
    path counts."""

    blocks: tuple[RouteBlock, ...]
    cut_vertices: tuple[int, ...]
    paths: int
    cyclomatic: int


def block_route(
    vertices: tuple[int, ...], edges: tuple[tuple[int, int], ...], s: int, t: int
) -> list[tuple[int, int, list[int]]]:
    """The blocks on the s-t route of the block-cut tree as (entry, exit, edge indices); the graph must connect s
    and t."""
    if s == t:
        return []
    blocks = biconnected_blocks(vertices, edges)
    members = [sorted({x for index in block for x in edges[index]}) for block in blocks]
    blocks_of: dict[int, list[int]] = {v: [] for v in vertices}
    for b, block_vertices in enumerate(members):
        for v in block_vertices:
            blocks_of[v].append(b)
    # Walk the bipartite block-vertex graph (the block-cut tree with every vertex attached) from s to t.
    parent: dict[tuple[str, int], tuple[str, int] | None] = {("v", s): None}
    queue = deque([("v", s)])
    while queue and ("v", t) not in parent:
        kind, x = queue.popleft()
        following = [("b", b) for b in blocks_of[x]] if kind == "v" else [("v", v) for v in members[x]]
        for neighbour in following:
            if neighbour not in parent:
                parent[neighbour] = (kind, x)
                queue.append(neighbour)
    if ("v", t) not in parent:
        raise GraphError(f"{s} and {t} are not connected")
    path: list[tuple[str, int]] = []
    node: tuple[str, int] | None = ("v", t)
    while node is not None:
        path.append(node)
        node = parent[node]
    path.reverse()
    return [(path[i - 1][1], path[i + 1][1], blocks[path[i][1]]) for i in range(1, len(path) - 1, 2)]


def block_product(dag: TwoTerminalDag) -> BlockProduct:
    """Theorem 12: split H at the cut vertices of its block route; r is the product of per-block path counts."""
    blocks: list[RouteBlock] = []
    for entry, exit_, indices in block_route(dag.vertices, dag.edges, dag.source, dag.sink):
        ordered = sorted(indices)
        block_edges = tuple(dag.edges[i] for i in ordered)
        multiplicities = tuple(dag.multiplicities[i] for i in ordered) if dag.multiplicities else ()
        block_vertices = {x for edge in block_edges for x in edge}
        sub = TwoTerminalDag(
            entry, exit_, tuple(v for v in dag.vertices if v in block_vertices), block_edges, multiplicities
        )
        blocks.append(RouteBlock(entry, exit_, sub.vertices, block_edges, path_count(sub), cyclomatic_number(sub)))
    cuts = (dag.source,) + tuple(block.exit for block in blocks)
    return BlockProduct(tuple(blocks), cuts, prod(block.paths for block in blocks), sum(b.cyclomatic for b in blocks))


def immediate_dominators(adjacency: Adjacency, root: int) -> dict[int, int]:
    """The immediate dominator of every vertex reachable from `root` (the root maps to itself).

    x dominates v when every root-v walk visits x; iterative algorithm of Cooper, Harvey and Kennedy.
    """
    graph = validate_adjacency(adjacency)
    return dominator_tree(graph, validate_vertex("root", root, len(graph)))


def dominator_tree(graph: list[list[int]], root: int) -> dict[int, int]:
    """`immediate_dominators` on successor lists already known to be well formed (no copy, no checks).

    Each vertex's predecessors are met deepest first (lowest postorder rank), so that the running intersection
    only climbs: a vertex entered from a long chain of states costs the chain once, not once per state.
    """
    postorder: list[int] = []
    seen = {root}
    stack = [(root, iter(graph[root]))]
    while stack:
        v, pending = stack[-1]
        for w in pending:
            if w not in seen:
                seen.add(w)
                stack.append((w, iter(graph[w])))
                break
        else:
            stack.pop()
            postorder.append(v)
    rank = [-1] * len(graph)
    for i, v in enumerate(postorder):
        rank[v] = i
    predecessors: list[list[int]] = [[] for _ in graph]
    for u in postorder:
        for w in graph[u]:
            predecessors[w].append(u)
    for incoming in predecessors:
        incoming.sort(key=rank.__getitem__)
    idom = [-1] * len(graph)
    idom[root] = root

    def intersect(a: int, b: int) -> int:
        while a != b:
            while rank[a] < rank[b]:
                a = idom[a]
            while rank[b] < rank[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for v in reversed(postorder):
            if v == root:
                continue
            processed = [p for p in predecessors[v] if idom[p] >= 0]
            new = processed[0]
            for p in processed[1:]:
                new = intersect(p, new)
            if idom[v] != new:
                idom[v] = new
                changed = True
    return {v: idom[v] for v in postorder}


def on_every_path(adjacency: Adjacency, s: int, t: int) -> list[int]:
    """The vertices every s-t walk visits (the dominators of t), ordered from s to t; works on cyclic graphs too."""
    graph = validate_adjacency(adjacency)
    t = validate_vertex("t", t, len(graph))
    idom = dominator_tree(graph, validate_vertex("s", s, len(graph)))
    if t not in idom:
        raise GraphError(f"{t} is not reachable from {s}")
    chain = [t]
    while chain[-1] != s:
        chain.append(idom[chain[-1]])
    return chain[::-1]
