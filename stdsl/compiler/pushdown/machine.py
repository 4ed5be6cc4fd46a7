"""The pushdown machine of C.12 on interned configurations: (state, stack) pairs numbered as they are met.

A configuration id is an int, so everything built for DFAs (the forced planner, the budget
mask, rows of next states over the vocabulary) reads a pushdown the way it reads an automaton:
`step`, `accepting[c]`, `transitions[c]` (the 256 next configurations), `live_count[c]`,
`forced_chain`, `chain_end`.  Stacks are persistent linked lists, shared between configurations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stdsl.compiler.pushdown.call_rows import CallRows, classes_read_alike
from stdsl.compiler.pushdown.completion_graph import UNREACHABLE
from stdsl.compiler.pushdown.cut_configurations import cut_configurations
from stdsl.compiler.pushdown.grammar import PushdownGrammar

DEAD = -1
EMPTY_STACK = 0
MAX_MEMOIZED_STEPS = 1_000_000


def listed_row(rows: list[list[int] | None], table: np.ndarray | CallRows, state: int) -> list[int]:
    """Row `state` of `table` as a list, kept in `rows` (made on first use: a grammar of 40,000 states would
    otherwise hold ten million list entries per table before its first step)."""
    row = rows[state] = table[state].tolist()
    return row


class _ByRow:
    """A read-only view `view[c]` computed per configuration by a function (what planners index)."""

    def __init__(self, compute: Any) -> None:
        self._compute = compute

    def __getitem__(self, config: Any) -> Any:
        return self._compute(int(config))


class PushdownMachine:
    """Configurations of a `PushdownGrammar` with lazy and eager returns and the stack capped at `max_depth`.

    Interned configurations and stacks are kept for the machine's life (ids stay valid); the step
    memo and byte rows are dropped when the memo passes `MAX_MEMOIZED_STEPS` entries.

    Byte b at (q, σ): q's own move; else the call whose callee starts with b (push the return
    state; refused when the stack is full); else, if q accepts, pop and retry b at the return
    state (lazy).  After a move, while the state accepts with no successor and σ is not empty,
    pop (eager).  A configuration accepts when its state and every return state on σ accept.
    A move into a configuration that cannot complete within the cap (need+ unreachable) is refused too,
    so at the cap only continuations that can still close are admitted.
    """

    start: int = 0

    def __init__(self, grammar: PushdownGrammar) -> None:
        self.grammar = grammar
        self.max_depth = grammar.max_depth
        self._class_of_byte = grammar.byte_class.tolist()
        self._byte_rows: list[list[int] | None] = [None] * grammar.num_states
        self._call_rows: list[list[int] | None] = [None] * grammar.num_states
        self._accepting = grammar.accepting.tolist()
        self._final = (grammar.accepting & ~grammar.has_successor).tolist()
        self._bn_within = grammar.bn_within.tolist()
        self._starts = grammar.starts.tolist()
        self._callee = grammar.call_callee.tolist()
        self._return = grammar.call_return.tolist()
        self._stack_top = [DEAD]
        self._stack_rest = [DEAD]
        self._stack_depth = [0]
        self._stack_need = [0]
        self._stack_accepts = [True]
        self._stack_ids: dict[tuple[int, int], int] = {}
        self._config_state: list[int] = []
        self._config_stack: list[int] = []
        self._config_ids: dict[tuple[int, int], int] = {}
        self._steps: dict[int, int] = {}
        self._rows: dict[int, np.ndarray] = {}
        self._need = np.zeros(0, dtype=np.int64)
        self._classes: tuple[list[int], np.ndarray] | None = None
        self._class_sizes: list[int] = []
        self._state_classes: dict[int, list[int]] = {}
        self._last_forced: tuple[int, tuple[bytes, int]] = (DEAD, (b"", DEAD))
        self._settle(int(grammar.starts[0]), EMPTY_STACK)

    @property
    def accepting(self) -> _ByRow:
        """Whether each configuration accepts, indexed like an automaton's mask.  The views are made per access,
        not kept: a view kept on the machine holds the machine's bound method, a reference cycle that would keep
        the grammar's tables after the caches drop the machine, until the collector ran."""
        return _ByRow(self.config_accepts)

    @property
    def transitions(self) -> _ByRow:
        """Each configuration's byte row (256 successors, -1 dead)."""
        return _ByRow(self.byte_row)

    @property
    def live_count(self) -> _ByRow:
        """How many bytes each configuration can read."""
        return _ByRow(self._live_bytes)

    def _live_bytes(self, config: int) -> int:
        return int(np.count_nonzero(self.byte_row(config) >= 0))

    # ------------------------------------------------------------------ interning

    def _push(self, stack: int, state: int) -> int:
        key = (state, stack)
        found = self._stack_ids.get(key)
        if found is None:
            found = len(self._stack_top)
            self._stack_ids[key] = found
            self._stack_top.append(state)
            self._stack_rest.append(stack)
            self._stack_depth.append(self._stack_depth[stack] + 1)
            room = self.max_depth - self._stack_depth[stack]
            self._stack_need.append(min(self._stack_need[stack] + self._bn_at(room, state), UNREACHABLE))
            self._stack_accepts.append(self._stack_accepts[stack] and self._accepting[state])
        return found

    def _intern(self, state: int, stack: int) -> int:
        key = (state, stack)
        found = self._config_ids.get(key)
        if found is None:
            found = len(self._config_state)
            self._config_ids[key] = found
            self._config_state.append(state)
            self._config_stack.append(stack)
        return found

    def _settle(self, state: int, stack: int) -> int:
        """Eager returns from (state, stack), then the configuration's id."""
        while self._final[state] and stack != EMPTY_STACK:
            state, stack = self._stack_top[stack], self._stack_rest[stack]
        return self._intern(state, stack)

    # ------------------------------------------------------------------ queries

    @property
    def num_configurations(self) -> int:
        """Configurations met so far."""
        return len(self._config_state)

    def configuration(self, config: int) -> tuple[int, tuple[int, ...]]:
        """(state, stack) of a configuration id; the stack lists return states bottom first."""
        stack = self._config_stack[config]
        items: list[int] = []
        while stack != EMPTY_STACK:
            items.append(self._stack_top[stack])
            stack = self._stack_rest[stack]
        return self._config_state[config], tuple(reversed(items))

    def config_of(self, state: int, stack: tuple[int, ...]) -> int:
        """The id of (state, stack) (stack bottom first), after eager returns."""
        node = EMPTY_STACK
        for item in stack:
            node = self._push(node, item)
        return self._settle(state, node)

    def depth(self, config: int) -> int:
        """Stack depth of a configuration."""
        return self._stack_depth[self._config_stack[config]]

    def state_of(self, config: int) -> int:
        """The automaton state of a configuration."""
        return self._config_state[config]

    def stack_id(self, config: int) -> int:
        """The interned id of a configuration's stack: configurations with equal stacks share it."""
        return self._config_stack[config]

    def room(self, config: int) -> int:
        """How many more return states the stack takes before the cap refuses a call."""
        return self.max_depth - self.depth(config)

    def stack_top(self, config: int, count: int) -> tuple[tuple[int, ...], bool]:
        """The top `count` return states (bottom first) and whether nothing lies below them on the stack."""
        stack = self._config_stack[config]
        items: list[int] = []
        while stack != EMPTY_STACK and len(items) < count:
            items.append(self._stack_top[stack])
            stack = self._stack_rest[stack]
        return tuple(reversed(items)), stack == EMPTY_STACK

    def resume(self, config: int, pops: int, pushed: tuple[int, ...], state: int) -> int:
        """The configuration at `state` on config's stack less its top `pops` symbols plus `pushed`, settled.

        This composes a run computed on a symbolic stack (Theorem 22) with a concrete one; the caller
        checks the cap (the run's peak height against `room`).
        """
        stack = self._config_stack[config]
        for _ in range(pops):
            if stack == EMPTY_STACK:
                raise ValueError(f"resume: cannot pop {pops} symbols from configuration {config}")
            stack = self._stack_rest[stack]
        for item in pushed:
            stack = self._push(stack, item)
        return self._alive(self._settle(state, stack))

    def config_accepts(self, config: int) -> bool:
        """Whether the output may end at this configuration."""
        return self._accepting[self._config_state[config]] and self._stack_accepts[self._config_stack[config]]

    def _bn_at(self, room: int, state: int) -> int:
        """bn of `state` for completions nesting at most `room` calls deeper."""
        return self._bn_within[min(room, len(self._bn_within) - 1)][state]

    def need(self, config: int) -> int:
        """need+(c) of Proposition 2 under the cap: the shortest byte completion of `config` (UNREACHABLE: none).

        bn of the state with the room left above the stack, plus, for each return state, its bn with the
        room it will have once popped.
        """
        stack = self._config_stack[config]
        own = self._bn_at(self.max_depth - self._stack_depth[stack], self._config_state[config])
        return min(own + self._stack_need[stack], UNREACHABLE)

    def _alive(self, config: int) -> int:
        """`config`, or DEAD when it cannot complete within the cap."""
        return config if config >= 0 and self.need(config) < UNREACHABLE else DEAD

    def needs(self, configs: np.ndarray) -> np.ndarray:
        """need+ for an array of configuration ids (DEAD entries give 0)."""
        known = len(self._need)
        if known < self.num_configurations:
            extra = [self.need(c) for c in range(known, self.num_configurations)]
            self._need = np.concatenate([self._need, np.array(extra, dtype=np.int64)])
        return self._need[np.where(configs < 0, 0, configs)]

    @property
    def nbytes(self) -> int:
        """Approximate bytes held by interned configurations, stacks, memoized steps and byte rows."""
        per_entry = 8 * 2 + 72
        return (self.grammar.nbytes + per_entry * (len(self._config_state) + len(self._stack_top) + len(self._steps))
                + sum(r.nbytes for r in self._rows.values()) + int(self._need.nbytes))

    # ------------------------------------------------------------------ moves

    def step_byte(self, config: int, byte: int) -> int:
        """The configuration after one byte (DEAD if the byte is not admissible or the stack would overflow)."""
        key = config * 256 + byte
        found = self._steps.get(key)
        if found is None:
            found = self._alive(self._consume(self._config_state[config], self._config_stack[config], byte))
            if len(self._steps) >= MAX_MEMOIZED_STEPS:
                self._steps.clear()
                self._rows.clear()
            self._steps[key] = found
        return found

    def _consume(self, state: int, stack: int, byte: int) -> int:
        column = self._class_of_byte[byte]
        while True:
            target = (self._byte_rows[state] or listed_row(self._byte_rows, self.grammar.own_classes, state))[column]
            if target >= 0:
                return self._settle(target, stack)
            edge = (self._call_rows[state] or listed_row(self._call_rows, self.grammar.calls, state))[column]
            if edge >= 0:
                if self._stack_depth[stack] >= self.max_depth:
                    return DEAD
                stack = self._push(stack, self._return[edge])
                state = self._starts[self._callee[edge]]
                continue
            if self._accepting[state] and stack != EMPTY_STACK:
                state, stack = self._stack_top[stack], self._stack_rest[stack]
                continue
            return DEAD

    def step(self, config: int, data: bytes) -> int:
        """The configuration after reading `data` (DEAD once dead)."""
        for byte in data:
            if config < 0:
                return DEAD
            config = self.step_byte(config, byte)
        return config

    def accepts(self, data: bytes) -> bool:
        """Whether `data` is a complete output."""
        config = self.step(self.start, data)
        return config >= 0 and self.config_accepts(config)

    def _byte_classes(self) -> tuple[list[int], np.ndarray]:
        """One byte per class of bytes every state reads alike (own moves and calls), and each byte's class:
        bytes of a class step every configuration to the same one, so a row steps one byte per class."""
        if self._classes is None:
            grammar = self.grammar
            _, _, byte_class = classes_read_alike(grammar.own_classes, grammar.calls, grammar.byte_class)
            first = [int(np.flatnonzero(byte_class == c)[0]) for c in range(int(byte_class.max()) + 1)]
            self._classes = (first, byte_class.astype(np.int64))
            self._class_sizes = np.bincount(byte_class, minlength=len(first)).tolist()
        return self._classes

    def byte_row(self, config: int) -> np.ndarray:
        """The next configuration on each of the 256 bytes (read-only, DEAD where refused)."""
        row = self._rows.get(config)
        if row is None:
            first, byte_class = self._byte_classes()
            row = np.array([self.step_byte(config, b) for b in first], dtype=np.int64)[byte_class]
            row.flags.writeable = False
            self._rows[config] = row
        return row

    def next_state(self, config: int, byte: int) -> int:
        """The configuration after one byte (DEAD where refused)."""
        return self.step_byte(config, byte)

    def live_bytes(self, config: int) -> bytes:
        """The bytes a configuration admits, in increasing order."""
        return bytes(np.flatnonzero(self.byte_row(config) >= 0).tolist())

    def single_visit_cuts(self) -> list[int]:
        """Configurations every accepted output passes through once, in the order it meets them (start first)."""
        return cut_configurations(self)

    def shortest_completion(self, config: int) -> int:
        """Bytes of the shortest accepted completion from `config` (`need`)."""
        return int(self.need(config))

    def _read_classes(self, state: int) -> list[int]:
        """The byte classes `state` reads itself (an own move or a call), in class order; kept per state."""
        found = self._state_classes.get(state)
        if found is None:
            first, _ = self._byte_classes()
            grammar = self.grammar
            columns = grammar.byte_class[first]
            reads = (grammar.own_classes[state, columns] >= 0) | (grammar.calls[state][columns] >= 0)
            found = self._state_classes[state] = np.flatnonzero(reads).tolist()
        return found

    def only_byte(self, config: int) -> int:
        """The one admissible byte of `config`, or -1 where it admits none or several (stepping one byte per class
        and stopping at the second live one: most configurations decide, and need no 256-byte row)."""
        first, _ = self._byte_classes()
        sizes = self._class_sizes
        state = self._config_state[config]
        classes: Any = range(len(first))
        if not (self._accepting[state] and self._config_stack[config] != EMPTY_STACK):
            classes = self._read_classes(state)  # no pop to retry at: a byte the state does not read is refused
        found = -1
        for index in classes:
            byte = first[index]
            if self.step_byte(config, byte) >= 0:
                if found >= 0 or sizes[index] > 1:
                    return -1
                found = byte
        return found

    def _follow_forced(self, config: int) -> tuple[bytes, int]:
        """Forced bytes from `config` (not accepting, one admissible byte) until a decision point or a repeat.

        The last answer is kept: `forced_chain` and `chain_end` ask for the same configuration in turn."""
        if self._last_forced[0] == config:
            return self._last_forced[1]
        start = config
        out = bytearray()
        seen: set[int] = set()
        while config >= 0 and not self.config_accepts(config) and config not in seen:
            byte = self.only_byte(config)
            if byte < 0:
                break
            seen.add(config)
            out.append(byte)
            config = self.step_byte(config, byte)
        found = (bytes(out), config)
        self._last_forced = (start, found)
        return found

    def forced_chain(self, config: int) -> bytes:
        """The forced bytes from `config`, across calls and returns."""
        return self._follow_forced(config)[0]

    def chain_end(self, config: int) -> int:
        """The configuration after `forced_chain(config)`."""
        return self._follow_forced(config)[1]
