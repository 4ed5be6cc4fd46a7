"""The byte automaton every constraint compiles to, and the derived tables the runtime reads.

An `Automaton` is a DFA over bytes stored over byte equivalence classes: `byte_class[b]` is the
class of byte `b`, and each state's row over the classes gives the next state on any byte of a
class (-1 dead); the start is state 0.  Classes are the distinct columns of the 256-column table,
numbered in the order of their first byte, so equal automata have equal tables.  Most states of a
schema's automaton (key literals, punctuation) have one live class, so only the rows of states
with two or more are stored whole; the others keep their one (class, target).  `class_transitions`
expands the dense states × classes table for the kernels and the products that index it.  Derived
tables (live bytes, forced bytes and chains, cut states, shortest accepted suffix) are computed on
first use and cached.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from stdsl.compiler.automata.state_graph import bfs_distances, predecessor_lists, single_visit, successor_lists
from stdsl.compiler.automata.table_blocks import converted, in_row_blocks
from stdsl.compiler.deadline import check_deadline

INT16_MAX_STATES = 32767
COMPARED_CELLS = 1 << 17
"""Table cells whose columns `canonical_classes` compares at a time: a block small enough (0.5-1 MB) to come from
the allocator's heap and the cache rather than fresh pages, large enough that its Python step per column is cheap."""


def canonical_classes(class_table: np.ndarray, byte_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same 256-column table as `(class_table, byte_class)` with one class per distinct column.

    Returns `(classes, byte_class)` where classes are numbered by their first byte, so that the
    result depends only on the expanded table; `classes` is `class_table` itself where its columns are distinct,
    all used and so numbered already (a large table is not copied only to be read).  Columns are compared by their
    bytes (exact), a block of rows at a time: two columns equal on every block are equal, and no transposed copy
    of a large table is made (its fresh pages cost more than the comparison).
    """
    byte_class = np.asarray(byte_class)
    ordered = list(dict.fromkeys(byte_class.tolist()))
    labels = [0] * len(ordered)
    step = max(1, COMPARED_CELLS // max(1, len(ordered)))
    for lo in range(0, len(class_table), step):
        check_deadline("merging equal byte classes")
        columns = class_table[lo:lo + step].T[ordered].tobytes()
        width = len(columns) // len(ordered)
        keys: dict[tuple[int, bytes], int] = {}
        labels = [keys.setdefault((label, columns[at:at + width]), len(keys))
                  for label, at in zip(labels, range(0, len(columns), width))]
    chosen: list[int] = []
    for column, label in zip(ordered, labels):
        if label == len(chosen):
            chosen.append(column)
    label_of_column = np.zeros(max(ordered) + 1, dtype=np.uint8)
    label_of_column[ordered] = labels
    if chosen == list(range(class_table.shape[1])):
        return class_table, label_of_column[byte_class]
    return columns_taken(class_table, chosen, "merging equal byte classes"), label_of_column[byte_class]


def columns_taken(table: np.ndarray, columns: np.ndarray | list[int], stage: str) -> np.ndarray:
    """`table[:, columns]`, a block of rows at a time with a deadline check between blocks: a product's 126,000
    states expanded to 256 bytes took 0.15 s at once on a loaded machine."""
    return in_row_blocks(len(table), len(columns), table.dtype, lambda lo, hi: table[lo:hi, columns], stage)


class ByteClassTable(ABC):
    """Reads shared by every transition table stored over byte classes (`class_transitions`, `byte_class`)."""

    byte_class: np.ndarray

    @property
    @abstractmethod
    def class_transitions(self) -> np.ndarray:
        """The dense (num_states, num_classes) table, -1 dead."""

    @property
    @abstractmethod
    def num_states(self) -> int:
        """Number of states (rows of the table)."""

    @property
    @abstractmethod
    def num_classes(self) -> int:
        """Number of byte classes (columns of the table)."""

    @property
    def transitions(self) -> np.ndarray:
        """The (num_states, 256) table, expanded afresh on each call: for tests and oracles, not hot paths."""
        return columns_taken(self.class_transitions, self.byte_class, "expanding byte classes")


class BlockKey:
    """A block's rows and byte classes (read-only arrays) as the key of tables derived from it: equal keys, equal
    blocks.  Hashed from the arrays' bytes when first asked, compared by the arrays: most replies never ask (budget
    tables do), and a SHA-256 digest of every block cost more than its layout (issue 36).  In memory only."""

    __slots__ = ("table", "byte_class", "_hash")

    def __init__(self, table: np.ndarray, byte_class: np.ndarray) -> None:
        self.table, self.byte_class = table, byte_class
        self._hash: int | None = None

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self.table.shape, self.table.dtype.str, self.table.tobytes(),
                               self.byte_class.dtype.str, self.byte_class.tobytes()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockKey):
            return NotImplemented
        return self is other or (hash(self) == hash(other) and _same_array(self.table, other.table)
                                 and _same_array(self.byte_class, other.byte_class))


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


@dataclass(frozen=True)
class BlockSpan:
    """States `start`..`start + size - 1` of a reply laid out from cached calls (`substitution.blocks`): one call's
    block, whose moves stay inside it but for those into `back` (the front state its call returns to), named by `key`
    (its rows) so that tables derived from a block are computed once per block, not per reply."""

    start: int
    size: int
    back: int
    key: BlockKey


class Automaton(ByteClassTable):
    """A DFA over bytes with start state 0: a byte-class map, its rows over the classes and an accepting mask.

    A state with at most one live class keeps that class and its target (`sole_class[q]`,
    `sole_target[q]`; -1 when it has none); a state with two or more keeps its whole row `r` of
    `branch_rows`, marked by `sole_target[q] = -2 - r`.  States are int16 when they fit (≤ 32767),
    else int32; -1 is the dead state.
    `Automaton(transitions, accepting)` takes a (num_states, 256) table and finds the classes;
    `Automaton.from_classes(class_table, accepting, byte_class)` takes the class form directly.
    """

    NBYTES_FIXED = True
    """Its arrays are set once, when built: `stdsl.caches` measures it once."""
    start: int = 0
    blocks: tuple[BlockSpan, ...] = ()
    """Where the automaton is a front then blocks laid out at offsets, those blocks (after the front, in order)."""

    def __init__(self, transitions: np.ndarray, accepting: np.ndarray) -> None:
        table = np.asarray(transitions)
        if table.ndim != 2 or table.shape[1] != 256 or table.shape[0] < 1:
            raise ValueError(f"transitions must have shape (num_states >= 1, 256), got {table.shape}")
        self._store(table, accepting, np.arange(256))

    @classmethod
    def from_classes(cls, class_table: np.ndarray, accepting: np.ndarray, byte_class: np.ndarray) -> Automaton:
        """The automaton whose 256-column table is `class_table[:, byte_class]`.

        `class_table` is (num_states, num_classes); `byte_class` gives each of the 256 bytes a
        column.  Equal columns are merged and unused ones dropped.
        """
        table = np.asarray(class_table)
        classes = np.asarray(byte_class)
        if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
            raise ValueError(f"class_table must have shape (num_states >= 1, num_classes >= 1), got {table.shape}")
        if classes.shape != (256,) or not np.issubdtype(classes.dtype, np.integer):
            raise ValueError(f"byte_class must be 256 integers, got shape {classes.shape} of {classes.dtype}")
        if int(classes.min()) < 0 or int(classes.max()) >= table.shape[1]:
            raise ValueError(f"byte_class entries must lie in 0..{table.shape[1] - 1}")
        automaton = cls.__new__(cls)
        automaton._store(table, accepting, classes)
        return automaton

    @classmethod
    def from_rows(cls, sole_class: np.ndarray, sole_target: np.ndarray, branch_rows: np.ndarray,
                  byte_class: np.ndarray, accepting: np.ndarray) -> Automaton:
        """The automaton of its stored form (see the class), for a builder that guarantees it: every class used and
        its column distinct, numbered by first byte, targets within the states.  It skips the checks and the merge,
        each a pass over the whole dense table (a reply laid out from cached calls, where those passes would be most
        of the work)."""
        automaton = cls.__new__(cls)
        dtype = np.int16 if len(accepting) <= INT16_MAX_STATES else np.int32
        automaton.branch_rows = np.ascontiguousarray(branch_rows, dtype=dtype)
        automaton.sole_class = np.asarray(sole_class, dtype=np.uint8)
        automaton.sole_target = np.asarray(sole_target, dtype=dtype)
        automaton.byte_class = np.asarray(byte_class, dtype=np.uint8)
        automaton.accepting = np.array(accepting, dtype=bool)
        for array in (automaton.branch_rows, automaton.sole_class, automaton.sole_target, automaton.byte_class,
                      automaton.accepting):
            array.setflags(write=False)
        return automaton

    def _store(self, table: np.ndarray, accepting: np.ndarray, byte_class: np.ndarray) -> None:
        """Validate, merge equal columns and keep the read-only class form."""
        if not np.issubdtype(table.dtype, np.integer):
            raise TypeError(f"transitions must be integers, got {table.dtype}")
        num_states = table.shape[0]
        low, high = int(table.min()), int(table.max())
        if low < -1 or high >= num_states:
            raise ValueError(f"transition targets must lie in -1..{num_states - 1}, got {low}..{high}")
        accept = np.asarray(accepting)
        if accept.shape != (num_states,):
            raise ValueError(f"accepting must have shape ({num_states},), got {accept.shape}")
        classes, canonical_byte_class = canonical_classes(table, byte_class)
        dtype = np.int16 if num_states <= INT16_MAX_STATES else np.int32
        self._keep_rows(converted(classes, dtype, "storing the automaton"))
        self.byte_class: np.ndarray = canonical_byte_class
        self.accepting: np.ndarray = np.array(accept, dtype=bool)
        for array in (self.branch_rows, self.sole_class, self.sole_target, self.byte_class, self.accepting):
            array.setflags(write=False)

    def _keep_rows(self, classes: np.ndarray) -> None:
        """Split the dense class table into whole rows (two or more live classes) and sole transitions."""
        live = classes >= 0
        live_classes = live.sum(axis=1)
        check_deadline("storing the automaton")
        branching = live_classes >= 2
        self.branch_rows: np.ndarray = classes[branching]
        sole = live_classes == 1
        first_live = live.argmax(axis=1)
        self.sole_class: np.ndarray = (first_live * sole).astype(np.uint8)
        self.sole_target: np.ndarray = np.where(sole, classes[np.arange(len(classes)), first_live],
                                                classes.dtype.type(-1))
        self.sole_target[branching] = np.arange(-2, -2 - len(self.branch_rows), -1, dtype=classes.dtype)

    @property
    def num_states(self) -> int:
        """Number of states."""
        return int(self.accepting.shape[0])

    @property
    def num_classes(self) -> int:
        """Number of byte classes."""
        return int(self.branch_rows.shape[1])

    @property
    def class_transitions(self) -> np.ndarray:
        """The dense (num_states, num_classes) table (read-only), expanded afresh on each call.

        For the kernels, which build their own tables from it once, and for products and oracles;
        a single state's row is `class_row`.
        """
        out = np.full((self.num_states, self.num_classes), -1, dtype=self.sole_target.dtype)
        out[self.sole_target < -1] = self.branch_rows
        sole = np.flatnonzero(self.sole_target >= 0)
        out[sole, self.sole_class[sole]] = self.sole_target[sole]
        out.setflags(write=False)
        return out

    def class_row(self, state: int) -> np.ndarray:
        """The next state per class from `state` (-1 dead); read-only when it is a stored row."""
        target = int(self.sole_target[state])
        if target < -1:
            return self.branch_rows[-2 - target]
        out = np.full(self.num_classes, -1, dtype=self.sole_target.dtype)
        out[self.sole_class[state]] = target
        return out

    def byte_row(self, state: int) -> np.ndarray:
        """The next state on each of the 256 bytes from `state` (-1 dead): its class row read through `byte_class`."""
        return self.class_row(int(state))[self.byte_class]

    def next_states(self, states: np.ndarray, classes: np.ndarray) -> np.ndarray:
        """Per pair: the next state from `states[i]` on class `classes[i]` (-1 dead); states must be live."""
        states, classes = np.asarray(states), np.asarray(classes)
        targets = self.sole_target[states]
        out = np.where(classes == self.sole_class[states], targets, -1)
        whole = targets < -1
        out[whole] = self.branch_rows[-2 - targets[whole], classes[whole]]
        return out

    @cached_property
    def class_size(self) -> np.ndarray:
        """Number of bytes in each class."""
        return np.bincount(self.byte_class, minlength=self.num_classes)

    @cached_property
    def class_first_byte(self) -> np.ndarray:
        """The smallest byte of each class (increasing, since classes are numbered by first byte)."""
        return np.unique(self.byte_class, return_index=True)[1]

    @property
    def nbytes(self) -> int:
        """Bytes held by the whole rows, the sole transitions, the byte-class map and the accepting mask."""
        arrays = (self.branch_rows, self.sole_class, self.sole_target, self.byte_class, self.accepting)
        return sum(int(array.nbytes) for array in arrays)

    def __repr__(self) -> str:
        return f"Automaton(states={self.num_states}, bytes={self.nbytes})"

    def next_state(self, state: int, byte: int) -> int:
        """The state after reading one byte from a live `state` (-1 dead)."""
        return self._next(state, int(self.byte_class[byte]))

    def _next(self, state: int, column: int) -> int:
        """The state after one byte of class `column` from a live `state` (-1 dead)."""
        target = int(self.sole_target[state])
        if target < -1:
            return int(self.branch_rows[-2 - target, column])
        return target if column == int(self.sole_class[state]) else -1

    def step(self, state: int, data: bytes) -> int:
        """The state after reading `data` from `state` (-1 once dead)."""
        columns = data.translate(self._translation)
        for column in columns:
            if state < 0:
                return -1
            state = self._next(state, column)
        return state

    @cached_property
    def _translation(self) -> bytes:
        """`byte_class` as a translation table for `bytes.translate`."""
        return bytes(self.byte_class.tolist())

    def accepts(self, data: bytes) -> bool:
        """Whether `data` is in the language."""
        state = self.step(self.start, data)
        return state >= 0 and bool(self.accepting[state])

    @cached_property
    def live_count(self) -> np.ndarray:
        """Number of bytes with a live (non-dead) transition, per state."""
        counts = self.class_size[self.sole_class] * (self.sole_target >= 0)
        counts[self.sole_target < -1] = (self.branch_rows >= 0).astype(np.int64) @ self.class_size
        return counts

    def live_bytes(self, state: int) -> bytes:
        """The bytes with a live transition from `state`, in increasing order."""
        return bytes(np.flatnonzero(self.class_row(state)[self.byte_class] >= 0).tolist())

    @cached_property
    def forced_byte(self) -> np.ndarray:
        """Per state: the unique live byte if the state is forced (not accepting, one live byte), else -1."""
        forced = ~self.accepting & (self.live_count == 1)
        return np.where(forced, self.class_first_byte[self.sole_class], -1).astype(np.int16)

    @cached_property
    def forces_nothing(self) -> bool:
        """Whether no state forces a byte (`forced_byte`), so every forced chain is empty (all text, say)."""
        return bool((self.forced_byte < 0).all())

    def _follow_forced(self, state: int) -> tuple[bytes, int]:
        """Read forced bytes from `state` until a decision point (or a repeated state)."""
        out = bytearray()
        seen: set[int] = set()
        forced, step = self._forced_steps
        while state >= 0 and forced[state] >= 0 and state not in seen:
            seen.add(state)
            out.append(forced[state])
            state = step[state]
        return bytes(out), state

    @cached_property
    def _forced_steps(self) -> tuple[list[int], list[int]]:
        """`forced_byte` and each state's sole target (where a forced state's one byte leads) as lists, for walks
        of forced chains one byte at a time."""
        return self.forced_byte.tolist(), self.sole_target.tolist()

    def forced_chain(self, state: int) -> bytes:
        """chain(state) (Definition 7): the bytes read following the unique live byte while forced."""
        return self._follow_forced(state)[0]

    def chain_end(self, state: int) -> int:
        """The state reached after `forced_chain(state)`: a decision point when the automaton is trim."""
        return self._follow_forced(state)[1]

    @cached_property
    def min_bytes_to_accept(self) -> np.ndarray:
        """Per state: the length of the shortest accepted suffix in bytes (-1 if none exists)."""
        indptr, indices = predecessor_lists(self.class_transitions)
        return bfs_distances(indptr, indices, np.flatnonzero(self.accepting)).astype(np.int32)

    def single_visit_cuts(self) -> list[int]:
        """Cut states no accepting run visits twice, in the order every run meets them."""
        cuts = np.flatnonzero(np.asarray(self.cut_states)).tolist()
        return single_visit(self.class_transitions, cuts) if cuts else []

    def shortest_completion(self, state: int) -> int:
        """Bytes of the shortest accepted completion from `state` (`min_bytes_to_accept`)."""
        return int(self.min_bytes_to_accept[state])

    def is_trim(self) -> bool:
        """Whether every state is reachable from the start and can reach an accepting state."""
        forward = bfs_distances(*successor_lists(self.class_transitions), np.array([self.start]))
        return bool((forward >= 0).all() and (self.min_bytes_to_accept >= 0).all())

    @cached_property
    def cut_states(self) -> np.ndarray:
        """States every accepting run from the start passes through (Lemma 12).

        A state is cut iff it dominates a virtual sink placed after every accepting state;
        dominators are computed with the Cooper–Harvey–Kennedy iteration.  A cut state on a
        cycle may be visited more than once; Lemma 12's factorization needs single visits.
        """
        return _cut_states(self.class_transitions, self.accepting)


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
