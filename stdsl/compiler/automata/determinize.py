"""Subset construction over byte equivalence classes, with a state budget.

Bytes that no byte set of the NFA tells apart form one class, so the DFA is built over
the (usually few dozen) classes instead of 256 bytes.  A DFA state is the set of
"important" NFA states (those with a byte edge, and the accepting state) in an epsilon
closure; closures are memoized per NFA state and per kernel (set of move targets).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stdsl.compiler.automata.nfa import NFA
from stdsl.compiler.deadline import check_deadline
from stdsl.errors import StateBudgetError

DEFAULT_MAX_STATES = 200_000


@dataclass
class ClassDFA:
    """A DFA over byte classes: `table[q, c]` is the next state on class `c` (-1 dead), start 0.

    `byte_class[b]` is the class of byte `b`; classes are numbered in order of their smallest byte.
    """

    table: np.ndarray
    accepting: np.ndarray
    byte_class: np.ndarray

    def byte_table(self) -> np.ndarray:
        """The same transitions indexed by byte: shape (num_states, 256)."""
        return self.table[:, self.byte_class]


def byte_classes(
    byte_sets: list[tuple[tuple[int, int], ...]], alphabet: int = 256
) -> tuple[np.ndarray, list[list[int]]]:
    """Partition the symbols 0..alphabet-1 (bytes, then any call symbols) into the coarsest classes no set splits.

    Returns the class of each symbol (numbered by smallest member) and, for each byte set,
    the sorted list of classes it contains.
    """
    if not byte_sets:
        return np.zeros(alphabet, dtype=np.int64), []
    membership = np.zeros((len(byte_sets), alphabet), dtype=bool)
    for index, ranges in enumerate(byte_sets):
        for lo, hi in ranges:
            membership[index, lo:hi + 1] = True
    _, first_byte, inverse = np.unique(membership.T, axis=0, return_index=True, return_inverse=True)
    rank = np.empty(len(first_byte), dtype=np.int64)
    rank[np.argsort(first_byte)] = np.arange(len(first_byte))
    byte_class = rank[inverse.reshape(-1)]
    set_classes = [np.unique(byte_class[row]).tolist() for row in membership]
    return byte_class, set_classes


def _closure(nfa: NFA, state: int, memo: list[frozenset[int] | None]) -> frozenset[int]:
    """The important states (with byte edges, or accepting) in the epsilon closure of `state`, memoized."""
    cached = memo[state]
    if cached is not None:
        return cached
    seen = {state}
    stack = [state]
    found: list[int] = []
    eps, edges, accept = nfa.eps, nfa.edges, nfa.accept
    while stack:
        current = stack.pop()
        if edges[current] or current == accept:
            found.append(current)
        for target in eps[current]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    result = frozenset(found)
    memo[state] = result
    return result


def determinize(nfa: NFA, max_states: int = DEFAULT_MAX_STATES, alphabet: int = 256) -> ClassDFA:
    """The subset-construction DFA of `nfa` over symbol classes (`alphabet` > 256 adds call symbols).

    Raises `StateBudgetError` as soon as more than `max_states` DFA states would be needed.
    """
    byte_class, set_classes = byte_classes(nfa.byte_sets, alphabet)
    num_classes = int(byte_class.max()) + 1
    memo: list[frozenset[int] | None] = [None] * nfa.num_states
    class_moves: list[list[tuple[int, int]] | None] = [None] * nfa.num_states
    start = _closure(nfa, nfa.start, memo)
    state_ids: dict[frozenset[int], int] = {start: 0}
    kernel_ids: dict[frozenset[int], int] = {}
    states: list[frozenset[int]] = [start]
    rows: list[list[int]] = []
    index = 0
    while index < len(states):
        if index & 255 == 0:
            check_deadline("determinization")
        moves: dict[int, list[int]] = {}
        for nfa_state in states[index]:
            pairs = class_moves[nfa_state]
            if pairs is None:
                pairs = [(cls, target) for set_index, target in nfa.edges[nfa_state]
                         for cls in set_classes[set_index]]
                class_moves[nfa_state] = pairs
            for cls, target in pairs:
                moves.setdefault(cls, []).append(target)
        row = [-1] * num_classes
        for cls, targets in moves.items():
            kernel = frozenset(targets)
            dfa_state = kernel_ids.get(kernel)
            if dfa_state is None:
                closed = frozenset().union(*(_closure(nfa, t, memo) for t in kernel))
                dfa_state = state_ids.get(closed)
                if dfa_state is None:
                    dfa_state = len(states)
                    if dfa_state >= max_states:
                        raise StateBudgetError(
                            f"determinization needs more than {max_states:,} DFA states (the budget); "
                            "the constraint is too large to enforce as a DFA: bound or simplify "
                            "repetitions (e.g. a fixed-length suffix after an unbounded loop), "
                            "or raise max_states")
                    state_ids[closed] = dfa_state
                    states.append(closed)
                kernel_ids[kernel] = dfa_state
            row[cls] = dfa_state
        rows.append(row)
        index += 1
    table = np.array(rows, dtype=np.int32).reshape(len(rows), num_classes)
    accepting = np.array([nfa.accept in state for state in states], dtype=bool)
    return ClassDFA(table, accepting, byte_class)
