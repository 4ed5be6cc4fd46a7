"""The level pass from a symbolic pushdown configuration over a step table that grows as it is read (issue 36).

A symbolic configuration (a known top of the stack over an unknown or empty rest, Theorem 22) steps like a
DFA state once its steps are known, so the walk over the vocabulary's trie is `kernels.token_table`'s
level pass: one gather per level from a flat table of scaled next nodes (`flat[row * C + class]`), dead
(row 0) and needs-a-deeper-stack (row 1) absorbing, and once few nodes are alive only their children are
stepped.  Unlike a DFA's, the table is filled on demand: an entry not yet stepped is UNKNOWN, and a level
steps its distinct unknown (node, class) pairs in Python (C.12's machine, `SymbolicStepper._consume`)
before its gather is read again.  A new grammar's free row thus costs numpy gathers over the trie plus one
Python step per distinct pair first met, not Python work per level and trie node.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from stdsl.compiler.pushdown.call_rows import classes_read_alike
from stdsl.compiler.pushdown.machine import DEAD, PushdownMachine, listed_row
from stdsl.kernels.level_pass import WalkedLevel, level_pass

NEEDS_STACK = -2
UNKNOWN = -1
"""A step table entry not stepped yet (every stepped entry is a scaled row, >= 0)."""
MAX_SYMBOLIC_STEPS = 1_000_000
MAX_STEP_TABLE_BYTES = 64 << 20
"""Bytes of step table past which the stepper forgets its nodes at the next walk's start."""
FIRST_ROWS = 64

Node = tuple[int, tuple[int, ...], tuple[int, ...], bool, int, int, bool]
Outcome = tuple[int, tuple[int, ...], int, int]
"""(symbols popped from the stack, return states pushed (bottom first), state before eager returns, peak height)."""


class SymbolicStepper:
    """C.12's machine on symbolic configurations: a known top of the stack over an unknown (or empty) rest.

    A node is (state, known original symbols left, symbols the token pushed, whether the stack ends
    below the known ones, real pops, peak height above the start, pending eager returns into the
    unknown rest); nodes are interned as ints and their steps kept in a flat table of scaled rows
    (node n at row n + 2; row 0 DEAD, row 1 NEEDS_STACK).  A step that must read a symbol below the
    known ones gives NEEDS_STACK.
    """

    def __init__(self, machine: PushdownMachine) -> None:
        grammar = machine.grammar
        own, calls, byte_class = classes_read_alike(np.asarray(grammar.own_classes), grammar.calls,
                                                    grammar.byte_class)
        self.byte_class = byte_class.astype(np.uint8)
        self.num_classes = int(own.shape[1])
        self._own, self._calls = own, calls
        self._own_rows: list[list[int] | None] = [None] * len(own)
        self._call_rows: list[list[int] | None] = [None] * len(own)
        self._accepting = grammar.accepting.tolist()
        self._final = (grammar.accepting & ~grammar.has_successor).tolist()
        self._starts = grammar.starts.tolist()
        self._callee = grammar.call_callee.tolist()
        self._return = grammar.call_return.tolist()
        self._forget()

    def _forget(self) -> None:
        """Drop every node and step: rows 0 (dead) and 1 (needs a deeper stack) absorb, the rest unknown."""
        width = self.num_classes
        self._nodes: list[Node] = []
        self._node_ids: dict[Node, int] = {}
        self._steps = 0
        self.flat = np.full((FIRST_ROWS + 2) * width, UNKNOWN, dtype=np.int32)
        """Scaled next rows: `flat[row * C + class]` is the row after a byte of that class, UNKNOWN not stepped yet."""
        self.flat[:width] = 0
        self.flat[width : 2 * width] = width

    def start(self, state: int, known: tuple[int, ...], below_empty: bool) -> int:
        """The node at a (settled) configuration's state with `known` top symbols (bottom first)."""
        if self._steps >= MAX_SYMBOLIC_STEPS or self.flat.nbytes > MAX_STEP_TABLE_BYTES:
            self._forget()
        return self._intern((state, known, (), below_empty, 0, 0, False))

    def _intern(self, node: Node) -> int:
        found = self._node_ids.get(node)
        if found is None:
            found = self._node_ids[node] = len(self._nodes)
            self._nodes.append(node)
            needed = (found + 3) * self.num_classes
            if needed > self.flat.shape[0]:
                grown = np.full(2 * self.flat.shape[0], UNKNOWN, dtype=np.int32)
                grown[: self.flat.shape[0]] = self.flat
                self.flat = grown
        return found

    def outcome(self, node: int) -> Outcome:
        """What a token ending at `node` did: pops, pushed symbols, final state, peak height."""
        state, _, pushed, _, pops, peak, _ = self._nodes[node]
        return pops, pushed, state, peak

    def scaled(self, node: int) -> int:
        """A node (or DEAD, NEEDS_STACK) as its scaled row in `flat`."""
        return (node + 2 if node >= 0 else (0 if node == DEAD else 1)) * self.num_classes

    def node_of(self, scaled: int) -> int:
        """The node (or DEAD, NEEDS_STACK) of a scaled row."""
        row = scaled // self.num_classes
        return row - 2 if row >= 2 else (DEAD if row == 0 else NEEDS_STACK)

    def step_class(self, node: int, column: int) -> int:
        """The node after any byte of class `column` (bytes of a class step alike; steps are kept per class)."""
        key = self.scaled(node) + column
        found = int(self.flat[key])
        if found == UNKNOWN:
            found = self._fill(key)
        return self.node_of(found)

    def step(self, node: int, byte: int) -> int:
        """The node after one byte: DEAD if refused on every stack, NEEDS_STACK if it reads below the known top."""
        return self.step_class(node, int(self.byte_class[byte]))

    def _fill(self, key: int) -> int:
        """Step the table entry `key` (a scaled node row plus a class) and store it; its scaled row."""
        width = self.num_classes
        value = self.scaled(self._consume(key // width - 2, key % width))
        self.flat[key] = value
        self._steps += 1
        return value

    def resolve(self, index: np.ndarray, values: np.ndarray) -> np.ndarray:
        """`values` (`flat[index]`) with its UNKNOWN entries stepped and read again."""
        unknown = np.flatnonzero(values == UNKNOWN)
        if unknown.size:
            for key in np.unique(index[unknown]).tolist():
                self._fill(key)
            values[unknown] = self.flat[index[unknown]]
        return values

    def _consume(self, node: int, column: int) -> int:
        state, known, pushed, below_empty, pops, peak, pending = self._nodes[node]
        if pending:
            return NEEDS_STACK
        while True:
            target = (self._own_rows[state] or listed_row(self._own_rows, self._own, state))[column]
            if target >= 0:
                state = target
                break
            edge = (self._call_rows[state] or listed_row(self._call_rows, self._calls, state))[column]
            if edge >= 0:
                pushed = pushed + (self._return[edge],)
                peak = max(peak, len(pushed) - pops)
                state = self._starts[self._callee[edge]]
                continue
            if not self._accepting[state]:
                return DEAD
            if pushed:
                state, pushed = pushed[-1], pushed[:-1]
            elif known:
                state, known, pops = known[-1], known[:-1], pops + 1
            else:
                return DEAD if below_empty else NEEDS_STACK
        while self._final[state]:
            if pushed:
                state, pushed = pushed[-1], pushed[:-1]
            elif known:
                state, known, pops = known[-1], known[:-1], pops + 1
            else:
                pending = not below_empty
                break
        return self._intern((state, known, pushed, below_empty, pops, peak, pending))

    @property
    def nodes(self) -> list[Node]:
        """The nodes met so far (node n is `nodes[n]`)."""
        return self._nodes

    def __len__(self) -> int:
        return self._steps


def _levels(stepper: SymbolicStepper, levels: Sequence[WalkedLevel], start: int
            ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The level pass (`level_pass`) from a symbolic node: per level, tokens ending there and their scaled rows (0
    marking dead ones)."""
    classes = stepper.byte_class

    def step_dense(level: WalkedLevel, above: np.ndarray) -> np.ndarray:
        index = level.parents_of(above) + classes[level.byte]
        return stepper.resolve(index, np.take(stepper.flat, index))

    def step_sparse(values: np.ndarray, children_bytes: np.ndarray) -> np.ndarray:
        index = values + classes[children_bytes]
        return stepper.resolve(index, np.take(stepper.flat, index))

    return level_pass(levels, stepper.scaled(start), 0, step_dense, step_sparse)


def symbolic_walk(stepper: SymbolicStepper, levels: Sequence[WalkedLevel], start: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The level pass from a symbolic node: (token ids, index per token, nodes), a token's node `nodes[index]`.

    `nodes[0]` is DEAD and `nodes[1]` NEEDS_STACK (a NEEDS_STACK prefix makes its whole subtree NEEDS_STACK);
    tokens not listed are dead.
    """
    tokens: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    for ending, scaled in _levels(stepper, levels, start):
        tokens.append(ending)
        rows.append(scaled)
    head = np.array([DEAD, NEEDS_STACK], dtype=np.int64)
    if not tokens:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64), head
    row = np.concatenate(rows) // stepper.num_classes
    seen = np.zeros(len(stepper.nodes) + 2, dtype=bool)
    seen[row] = True
    seen[:2] = False
    reached = np.flatnonzero(seen)
    position = np.arange(seen.size, dtype=np.int64)
    position[reached] = np.arange(2, 2 + reached.size)
    return np.concatenate(tokens).astype(np.int32), position[row], np.concatenate([head, reached - 2])
