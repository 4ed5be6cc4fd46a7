"""The theory as a library: total few-path reachability (Theorem 8), walk counts, branch kernels and block products.

`stcon_sf(adjacency, s, t, k)` decides whether a graph is k-strongly few and s reaches t, on any input.
`analyze_automaton` reads these structures off a compiled byte automaton (the `stcon analyze` command).
"""

from stdsl.theory.analyze import analyze_automaton, render_analysis
from stdsl.theory.graph import GraphError
from stdsl.theory.stcon_sf import (
    Decision,
    capped_traversal,
    decide_pair_budget,
    decide_root_budget,
    decide_stcon_sf,
    pair_budget,
    root_budget,
    stcon_sf,
    universal_source,
)
from stdsl.theory.structure import (
    BlockProduct,
    BranchKernel,
    TwoTerminalDag,
    block_product,
    branch_kernel,
    contract_forced_chains,
    immediate_dominators,
    on_every_path,
    path_count,
    trim_two_terminal,
)
from stdsl.theory.walk_counts import (
    adjacency_matrix,
    bounded_fixed_point,
    bounded_walk_counts,
    dag_walk_counts,
    is_bounded_fixed_point,
    walk_counts,
)

__all__ = [
    "BlockProduct",
    "BranchKernel",
    "Decision",
    "GraphError",
    "TwoTerminalDag",
    "adjacency_matrix",
    "analyze_automaton",
    "block_product",
    "bounded_fixed_point",
    "bounded_walk_counts",
    "branch_kernel",
    "capped_traversal",
    "contract_forced_chains",
    "dag_walk_counts",
    "decide_pair_budget",
    "decide_root_budget",
    "decide_stcon_sf",
    "immediate_dominators",
    "is_bounded_fixed_point",
    "on_every_path",
    "pair_budget",
    "path_count",
    "render_analysis",
    "root_budget",
    "stcon_sf",
    "trim_two_terminal",
    "universal_source",
    "walk_counts",
]
