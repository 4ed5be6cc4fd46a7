"""The byte automaton every constraint compiles to, and the derived tables the runtime reads.

An `Automaton` is a DFA over bytes: `transitions[q, b]` is the next state (-1 dead), the
start is state 0.  Derived tables (live bytes, forced bytes and chains, cut states, shortest
accepted suffix) are computed on first use and cached.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from stdsl.compiler.automata.minimize import bfs_distances, predecessor_lists, successor_lists

INT16_MAX_STATES = 32767


class Automaton:
    """A DFA over bytes with start state 0; built from a (num_states, 256) table and an accepting mask.

    The table is stored as int16 when the states fit (≤ 32767), else int32; -1 is the dead state.
    """

    start: int = 0

    def __init__(self, transitions: np.ndarray, accepting: np.ndarray) -> None:
        table = np.asarray(transitions)
        if table.ndim != 2 or table.shape[1] != 256 or table.shape[0] < 1:
            raise ValueError(f"transitions must have shape (num_states >= 1, 256), got {table.shape}")
        if not np.issubdtype(table.dtype, np.integer):
            raise TypeError(f"transitions must be integers, got {table.dtype}")
        num_states = table.shape[0]
        low, high = int(table.min()), int(table.max())
        if low < -1 or high >= num_states:
            raise ValueError(f"transition targets must lie in -1..{num_states - 1}, got {low}..{high}")
        accept = np.asarray(accepting)
        if accept.shape != (num_states,):
            raise ValueError(f"accepting must have shape ({num_states},), got {accept.shape}")
        dtype = np.int16 if num_states <= INT16_MAX_STATES else np.int32
        self.transitions: np.ndarray = np.array(table, dtype=dtype, order="C")
        self.accepting: np.ndarray = np.array(accept, dtype=bool)
        self.transitions.setflags(write=False)
        self.accepting.setflags(write=False)

    @property
    def num_states(self) -> int:
        """Number of states (rows of the table)."""
        return int(self.transitions.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by the transition table and the accepting mask."""
        return int(self.transitions.nbytes + self.accepting.nbytes)

    def __repr__(self) -> str:
        return f"Automaton(states={self.num_states}, bytes={self.nbytes})"

    def step(self, state: int, data: bytes) -> int:
        """The state after reading `data` from `state` (-1 once dead)."""
        table = self.transitions
        for byte in data:
            if state < 0:
                return -1
            state = int(table[state, byte])
        return state

    def accepts(self, data: bytes) -> bool:
        """Whether `data` is in the language."""
        state = self.step(self.start, data)
        return state >= 0 and bool(self.accepting[state])

    @cached_property
    def live_count(self) -> np.ndarray:
        """Number of bytes with a live (non-dead) transition, per state."""
        return np.count_nonzero(self.transitions >= 0, axis=1)

    def live_bytes(self, state: int) -> bytes:
        """The bytes with a live transition from `state`, in increasing order."""
        return bytes(np.flatnonzero(self.transitions[state] >= 0).tolist())

    @cached_property
    def forced_byte(self) -> np.ndarray:
        """Per state: the unique live byte if the state is forced (not accepting, one live byte), else -1."""
        forced = ~self.accepting & (self.live_count == 1)
        first_live = np.argmax(self.transitions >= 0, axis=1)
        return np.where(forced, first_live, -1).astype(np.int16)

    def _follow_forced(self, state: int) -> tuple[bytes, int]:
        """Read forced bytes from `state` until a decision point (or a repeated state)."""
        out = bytearray()
        seen: set[int] = set()
        forced = self.forced_byte
        while state >= 0 and forced[state] >= 0 and state not in seen:
            seen.add(state)
            byte = int(forced[state])
            out.append(byte)
            state = int(self.transitions[state, byte])
        return bytes(out), state

    def forced_chain(self, state: int) -> bytes:
        """chain(state) (Definition 7): the bytes read following the unique live byte while forced."""
        return self._follow_forced(state)[0]

    def chain_end(self, state: int) -> int:
        """The state reached after `forced_chain(state)`: a decision point when the automaton is trim."""
        return self._follow_forced(state)[1]

    @cached_property
    def min_bytes_to_accept(self) -> np.ndarray:
        """Per state: the length of the shortest accepted suffix in bytes (-1 if none exists)."""
        indptr, indices = predecessor_lists(self.transitions)
        return bfs_distances(indptr, indices, np.flatnonzero(self.accepting)).astype(np.int32)

    def is_trim(self) -> bool:
        """Whether every state is reachable from the start and can reach an accepting state."""
        forward = bfs_distances(*successor_lists(self.transitions), np.array([self.start]))
        return bool((forward >= 0).all() and (self.min_bytes_to_accept >= 0).all())

    @cached_property
    def cut_states(self) -> np.ndarray:
        """States every accepting run from the start passes through (Lemma 12).

        A state is cut iff it dominates a virtual sink placed after every accepting state;
        dominators are computed with the Cooper–Harvey–Kennedy iteration.  A cut state on a
        cycle may be visited more than once; Lemma 12's factorization needs single visits.
        """
        return _cut_states(self.transitions, self.accepting)


def _cut_states(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Dominators of the virtual sink (node `num_states`) in the graph reachable from state 0."""
    num_states = len(table)
    sink = num_states
    indptr_array, indices_array = successor_lists(table)
    indptr, indices = indptr_array.tolist(), indices_array.tolist()
    accept = accepting.tolist()

    def successors(node: int) -> list[int]:
        if node == sink:
            return []
        out = indices[indptr[node]:indptr[node + 1]]
        return out + [sink] if accept[node] else out

    postorder: list[int] = []
    visited = [False] * (num_states + 1)
    visited[0] = True
    stack: list[tuple[int, list[int], int]] = [(0, successors(0), 0)]
    while stack:
        node, succ, position = stack[-1]
        if position < len(succ):
            stack[-1] = (node, succ, position + 1)
            child = succ[position]
            if not visited[child]:
                visited[child] = True
                stack.append((child, successors(child), 0))
        else:
            stack.pop()
            postorder.append(node)
    cut = np.zeros(num_states, dtype=bool)
    if not visited[sink]:
        return cut
    rank = [0] * (num_states + 1)
    for position, node in enumerate(postorder):
        rank[node] = position
    predecessors: list[list[int]] = [[] for _ in range(num_states + 1)]
    for node in postorder:
        for child in successors(node):
            predecessors[child].append(node)
    idom = [-1] * (num_states + 1)
    idom[0] = 0
    reverse_postorder = postorder[::-1][1:]
    changed = True
    while changed:
        changed = False
        for node in reverse_postorder:
            new_idom = -1
            for pred in predecessors[node]:
                if idom[pred] < 0:
                    continue
                if new_idom < 0:
                    new_idom = pred
                    continue
                a, b = pred, new_idom
                while a != b:
                    while rank[a] < rank[b]:
                        a = idom[a]
                    while rank[b] < rank[a]:
                        b = idom[b]
                new_idom = a
            if idom[node] != new_idom:
                idom[node] = new_idom
                changed = True
    node = idom[sink]
    while True:
        cut[node] = True
        if node == 0:
            return cut
        node = idom[node]
