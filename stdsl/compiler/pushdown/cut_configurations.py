"""Cut configurations of a pushdown constraint: where every output passes once, on a fixed stack (D.5).

A state of a nonterminal's body that every run of the body passes through, and no run visits
twice (a single-visit cut of the body's graph, each call read as one edge to its return state), is
met once per call of the body. On the root body (empty stack) that makes (state, []) a cut
configuration; and where a root cut's only way on is one call, the callee's body runs exactly once
there, on the stack [return state], so its own cuts are cut configurations too (and so on down).
An open object's required declared members are separated by such cuts, its optional and undeclared
tail is what follows the last one; a recursive schema's root object is the callee of its root's call.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from stdsl.compiler.automata.automaton import _cut_states
from stdsl.compiler.automata.state_graph import single_visit, successor_lists
from stdsl.compiler.pushdown.grammar import PushdownGrammar


class PushdownMachine(Protocol):
    """What the cuts read of a `machine.PushdownMachine`: its grammar, stack cap and configuration ids."""

    grammar: PushdownGrammar
    max_depth: int

    def config_of(self, state: int, stack: tuple[int, ...]) -> int: ...


def body_cuts(machine: PushdownMachine, nonterminal: int) -> list[int]:
    """Single-visit cut states of a nonterminal's body (grammar state ids), in the order every run meets them.

    The body's graph has its byte moves and one edge per call, to the call's return state; an accepting
    state leads to the end of the body (the caller's return, or the end of the output).
    """
    grammar = machine.grammar
    states = np.flatnonzero(np.asarray(grammar.owner) == nonterminal)
    start = int(grammar.starts[nonterminal])
    order = np.concatenate([[start], states[states != start]]).astype(np.int64)
    local = np.full(grammar.num_states, -1, dtype=np.int64)
    local[order] = np.arange(len(order))
    moves = np.asarray(grammar.own_classes)[order].astype(np.int64)
    byte_targets = np.where(moves >= 0, local[np.maximum(moves, 0)], -1)
    indptr, indices = successor_lists(byte_targets)
    edges: list[list[int]] = [indices[indptr[i] : indptr[i + 1]].tolist() for i in range(len(order))]
    for caller, target in zip(np.asarray(grammar.call_state).tolist(), np.asarray(grammar.call_return).tolist()):
        if local[caller] >= 0:
            edges[int(local[caller])].append(int(local[target]))
    table = np.full((len(order), max(1, max(len(e) for e in edges))), -1, dtype=np.int64)
    for row, targets in enumerate(edges):
        table[row, : len(targets)] = targets
    accepting = np.asarray(grammar.accepting)[order]
    cuts = np.flatnonzero(_cut_states(table, accepting)).tolist()
    return [int(order[c]) for c in single_visit(table, cuts)]


def cut_configurations(machine: PushdownMachine) -> list[int]:
    """Configuration ids every accepted output passes through once, in the order it meets them (start first)."""
    return _spine(machine, 0, ())


def _spine(machine: PushdownMachine, nonterminal: int, stack: tuple[int, ...]) -> list[int]:
    """The cut configurations of one run of `nonterminal`'s body on `stack`, and of the calls it always makes once."""
    grammar = machine.grammar
    final = np.asarray(grammar.accepting) & ~np.asarray(grammar.has_successor)
    callers = np.asarray(grammar.call_state)
    cuts = body_cuts(machine, nonterminal)
    out: list[int] = []
    for here, there in zip(cuts, cuts[1:] + [-1]):
        if not stack or (here != int(grammar.starts[nonterminal]) and not final[here]):
            out.append(machine.config_of(here, stack))
        edges = np.flatnonzero(callers == here)
        sole_call = (len(edges) == 1 and not grammar.accepting[here]
                     and not (np.asarray(grammar.own_classes[here]) >= 0).any()
                     and int(grammar.call_return[edges[0]]) == there and len(stack) + 1 < machine.max_depth)
        if sole_call:
            out += _spine(machine, int(grammar.call_callee[edges[0]]), stack + (there,))
    return out
