"""Theorem 11 (branch kernel) and Theorem 12 (block product) hold on random trimmed two-terminal DAGs, checked by
path enumeration."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stdsl.theory import (
    GraphError,
    block_product,
    branch_kernel,
    contract_forced_chains,
    on_every_path,
    path_count,
    trim_two_terminal,
)


@st.composite
def two_terminal_dags(draw: st.DrawFn) -> tuple[list[list[int]], int, int]:
    """A random DAG on 2..9 vertices (edges forward in index order, parallel edges allowed), s = 0, t = n-1."""
    n = draw(st.integers(2, 9))
    density = draw(st.sampled_from([0.2, 0.35, 0.5]))
    graph: list[list[int]] = [[] for _ in range(n)]
    for u, v in itertools.combinations(range(n), 2):
        if draw(st.floats(0, 1)) < density:
            graph[u] += [v] * draw(st.sampled_from([1, 1, 1, 1, 2]))
    if draw(st.booleans()):
        graph[0].append(n - 1)
    return graph, 0, n - 1


def brute_paths(graph: list[list[int]], s: int, t: int) -> list[list[tuple[int, int]]]:
    """Every s-t path of a DAG as its list of (edge position) pairs, parallel edges distinguished."""
    paths: list[list[tuple[int, int]]] = []

    def explore(v: int, trail: list[tuple[int, int]]) -> None:
        if v == t:
            paths.append(list(trail))
            return
        for position, w in enumerate(graph[v]):
            trail.append((v, position))
            explore(w, trail)
            trail.pop()

    explore(s, [])
    return paths


def path_vertices(graph: list[list[int]], path: list[tuple[int, int]], s: int) -> list[int]:
    return [s] + [graph[v][position] for v, position in path]


@settings(max_examples=300, deadline=None)
@given(two_terminal_dags())
def test_branch_kernel_bounds_of_theorem_11(case: tuple[list[list[int]], int, int]) -> None:
    graph, s, t = case
    paths = brute_paths(graph, s, t)
    assume(paths)
    dag = trim_two_terminal(graph, s, t)
    on_paths = {v for p in paths for v in path_vertices(graph, p, s)}
    assert set(dag.vertices) == on_paths
    assert len(dag.edges) == len({edge for p in paths for edge in p})
    kernel = branch_kernel(dag)
    r, c = len(paths), kernel.cyclomatic
    assert kernel.paths == path_count(dag) == r
    assert kernel.bound_violations() == []
    assert c + 1 <= r <= 2**c
    assert len(kernel.branch_vertices) <= c <= r - 1
    assert len(kernel.vertices) <= 2 * c + 2 <= 2 * r
    assert len(kernel.edges) <= 3 * c + 1


@settings(max_examples=300, deadline=None)
@given(two_terminal_dags())
def test_forced_chain_contraction_keeps_the_paths(case: tuple[list[list[int]], int, int]) -> None:
    graph, s, t = case
    assume(brute_paths(graph, s, t))
    dag = trim_two_terminal(graph, s, t)
    vertices, edges = contract_forced_chains(dag)
    kernel_graph: dict[int, list[int]] = {v: [] for v in vertices}
    for edge in edges:
        kernel_graph[edge.tail].append(edge.head)
    index = {v: i for i, v in enumerate(vertices)}
    relabelled = [[index[w] for w in kernel_graph[v]] for v in vertices]
    assert len(brute_paths(relabelled, index[s], index[t])) == path_count(dag)
    in_degree = dag.in_degree()
    out_degree = dag.out_degree()
    for v in vertices:
        assert v in (s, t) or in_degree[v] != 1 or out_degree[v] != 1
    suppressed = [v for edge in edges for v in edge.chain]
    assert sorted(suppressed + list(vertices)) == sorted(dag.vertices)


@settings(max_examples=300, deadline=None)
@given(two_terminal_dags())
def test_block_product_of_theorem_12(case: tuple[list[list[int]], int, int]) -> None:
    graph, s, t = case
    paths = brute_paths(graph, s, t)
    assume(paths)
    dag = trim_two_terminal(graph, s, t)
    product = block_product(dag)
    r = len(paths)
    assert product.paths == r
    assert product.cyclomatic == branch_kernel(dag).cyclomatic
    assert product.cut_vertices[0] == s and product.cut_vertices[-1] == t
    every_path = set.intersection(*(set(path_vertices(graph, p, s)) for p in paths))
    assert set(product.cut_vertices) == every_path
    assert on_every_path(graph, s, t) == list(product.cut_vertices)
    # A path is an independent choice of one a_i-b_i path per block: its segments lie in the blocks, in order.
    for p in paths:
        vertices = path_vertices(graph, p, s)
        cuts_on_path = [v for v in vertices if v in every_path]
        assert cuts_on_path == list(product.cut_vertices)
        for block in product.blocks:
            start, end = vertices.index(block.entry), vertices.index(block.exit)
            segment = list(zip(vertices[start:end], vertices[start + 1 : end + 1]))
            assert all(edge in block.edges for edge in segment)
    multi_path_blocks = sum(1 for block in product.blocks if block.paths > 1)
    assert 2**multi_path_blocks <= r


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 7), st.data())
def test_on_every_path_matches_vertex_deletion_on_cyclic_graphs(n: int, data: st.DataObject) -> None:
    graph = [data.draw(st.lists(st.integers(0, n - 1), max_size=3)) for _ in range(n)]
    s, t = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))

    def reaches(blocked: int | None) -> bool:
        seen, stack = {s}, [s]
        while stack:
            v = stack.pop()
            if v == t:
                return True
            for w in graph[v]:
                if w != blocked and w not in seen:
                    seen.add(w)
                    stack.append(w)
        return False

    assume(reaches(None))
    expected = {s, t} | {x for x in range(n) if x not in (s, t) and not reaches(x)}
    chain = on_every_path(graph, s, t)
    assert set(chain) == expected
    assert chain[0] == s and chain[-1] == t


def test_chain_of_diamonds() -> None:
    graph = [[1, 2], [3], [3], [4, 5], [6], [6], [7], []]
    dag = trim_two_terminal(graph, 0, 7)
    kernel = branch_kernel(dag)
    assert (kernel.paths, kernel.cyclomatic, kernel.branch_vertices) == (4, 2, (0, 3))
    assert kernel.vertices == (0, 3, 6, 7)
    product = block_product(dag)
    assert product.cut_vertices == (0, 3, 6, 7)
    assert [block.paths for block in product.blocks] == [2, 2, 1]


def test_trim_refuses_cycles_and_unreachable_targets() -> None:
    with pytest.raises(GraphError, match="directed cycle"):
        trim_two_terminal([[1], [2, 0], []], 0, 2)
    with pytest.raises(GraphError, match="not reachable"):
        trim_two_terminal([[1], [], []], 0, 2)
    # A cycle off every s-t path is trimmed away.
    dag = trim_two_terminal([[1, 2], [], [2]], 0, 1)
    assert dag.vertices == (0, 1) and dag.edges == ((0, 1),)
