"""The token table T[q, t] = δ*(q, t) by the level pass of Algorithm 4 (Theorem 18(i)): all states, or one root.

It is the oracle every table-free mask (walk kernel, rows on demand) is tested against, and
the table a controller may store when |Q|·|V| is small enough.  Walks read the automaton in
class form: a step from scaled state s on byte b is `flat[s + byte_class[b]]` (`ScaledTable`),
never a 256-column table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from stdsl.compiler.automata.automaton import canonical_classes
from stdsl.errors import StdslError
from stdsl.kernels.level_pass import level_pass
from stdsl.kernels.vocabulary import Vocabulary

DEAD = -1
STATE_BLOCK = 128


def automaton_arrays(
    automaton: Any, accepting: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """(transitions (Q, 256), accepting (Q,) bool) from an Automaton-like object or two arrays."""
    if accepting is None:
        if not hasattr(automaton, "transitions") or not hasattr(automaton, "accepting"):
            raise StdslError(
                f"expected an automaton with .transitions and .accepting, got {type(automaton).__name__}"
            )
        transitions, accepting = automaton.transitions, automaton.accepting
    else:
        transitions = automaton
    transitions = np.asarray(transitions)
    accepting = np.asarray(accepting, dtype=bool)
    if transitions.ndim != 2 or transitions.shape[1] != 256:
        raise StdslError(
            f"automaton transitions must have shape (num_states, 256), got {transitions.shape}"
        )
    num_states = transitions.shape[0]
    if accepting.shape != (num_states,):
        raise StdslError(
            f"accepting must have shape ({num_states},), got {accepting.shape}"
        )
    if num_states == 0:
        raise StdslError("automaton has no states")
    if transitions.size and (
        transitions.min() < DEAD or transitions.max() >= num_states
    ):
        raise StdslError(f"automaton transitions must lie in [-1, {num_states - 1}]")
    return transitions, accepting


def class_arrays(automaton: Any, accepting: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(class_transitions (Q, C), byte_class (256,), accepting (Q,) bool) of an automaton in class form.

    Objects with `class_transitions` and `byte_class` (an `Automaton`, a `CombinedTable`) are read
    as they are; a (Q, 256) table (or an object with only `.transitions`) is split into its classes.
    """
    if accepting is None and hasattr(automaton, "class_transitions") and hasattr(automaton, "byte_class"):
        table = np.asarray(automaton.class_transitions)
        byte_class = np.asarray(automaton.byte_class)
        accept = np.asarray(automaton.accepting, dtype=bool)
        if table.ndim != 2 or byte_class.shape != (256,) or accept.shape != (table.shape[0],):
            raise StdslError(
                f"automaton class form has inconsistent shapes: table {table.shape}, "
                f"byte_class {byte_class.shape}, accepting {accept.shape}"
            )
        return table, byte_class, accept
    transitions, accept = automaton_arrays(automaton, accepting)
    classes, byte_class = canonical_classes(transitions, np.arange(256))
    return classes, byte_class, accept


def state_dtype(num_states: int) -> np.dtype:
    """Smallest signed dtype holding states 0..num_states-1 and the dead marker -1."""
    return (
        np.dtype(np.int16)
        if num_states <= np.iinfo(np.int16).max
        else np.dtype(np.int32)
    )


def scaled_table(transitions: np.ndarray) -> np.ndarray:
    """Flat int32 table with a dead sink over C columns: entry [s*C + c] = δ(s, c)*C, dead = Q*C.

    Pre-scaling makes one step of a walk a single add and gather: s ← table[s + column].
    With 256 columns the column is the byte; with byte classes it is `byte_class[byte]`.
    """
    num_states, stride = transitions.shape
    sink = num_states * stride
    table = np.full((num_states + 1) * stride, sink, dtype=np.int32)
    body = transitions.astype(np.int32) * stride
    body[transitions < 0] = sink
    table[: num_states * stride] = body.reshape(-1)
    return table


def scaled_split_rows(sole_class: np.ndarray, sole_target: np.ndarray, branch_rows: np.ndarray, stride: int
                      ) -> np.ndarray:
    """`scaled_table` of a table kept split as `Automaton` keeps it (a sole class and target per state, -1 none, or
    `-2 - r` for whole row r of `branch_rows`, the rows in their states' order): the dead fill, then only the live
    entries and the whole rows written, so a reply of many states with one or two moves each costs its states, not a
    pass per step over states × classes."""
    num_states = len(sole_target)
    sink = num_states * stride
    table = np.full((num_states + 1) * stride, sink, dtype=np.int32)
    target = np.asarray(sole_target, dtype=np.int64)
    sole = np.flatnonzero(target >= 0)
    table[sole * stride + np.asarray(sole_class, dtype=np.int64)[sole]] = target[sole] * stride
    branching = np.flatnonzero(target < -1)
    if branching.shape[0]:
        rows = np.asarray(branch_rows, dtype=np.int32)
        scaled = rows * np.int32(stride)
        np.copyto(scaled, np.int32(sink), where=rows < 0)
        table.reshape(-1, stride)[branching] = scaled
    return table


@dataclass(frozen=True)
class ScaledTable:
    """An automaton's class table prepared for walks: `scaled_table` of it, and the byte→class map as int32."""

    flat: np.ndarray
    byte_class: np.ndarray
    stride: int
    translation: bytes

    @staticmethod
    def of(class_transitions: np.ndarray, byte_class: np.ndarray) -> ScaledTable:
        """The scaled form of a (Q, C) class table and its 256-entry byte→class map."""
        return ScaledTable.of_flat(scaled_table(class_transitions), byte_class, int(class_transitions.shape[1]))

    @staticmethod
    def of_flat(flat: np.ndarray, byte_class: np.ndarray, stride: int) -> ScaledTable:
        """A scaled table already laid out (`scaled_table`'s form) with its 256-entry byte→class map."""
        classes = np.asarray(byte_class, dtype=np.int32)
        return ScaledTable(flat, classes, int(stride), bytes(classes.astype(np.uint8).tolist()))

    def columns(self, data: np.ndarray | bytes) -> np.ndarray:
        """The class of each byte of a uint8 array or byte string, as uint8 (a translation: faster than a gather)."""
        raw = data if isinstance(data, bytes) else data.tobytes()
        return np.frombuffer(raw.translate(self.translation), dtype=np.uint8)

    @property
    def sink(self) -> int:
        """The scaled dead state: Q*C."""
        return int(self.flat.shape[0]) - self.stride

    @property
    def nbytes(self) -> int:
        """Bytes held by the scaled table and the byte map."""
        return int(self.flat.nbytes + self.byte_class.nbytes)

    def states_of(self, scaled: np.ndarray) -> np.ndarray:
        """Scaled walk results back to states (the sink to -1)."""
        return np.where(scaled == self.sink, DEAD, scaled // self.stride)


def token_table(automaton: Any, vocab: Vocabulary, accepting: Any = None) -> np.ndarray:
    """All-state token table (num_states, vocab.size): next state per (state, token), -1 dead.

    Specials and eos ids are always -1 (eos is allowed by acceptance, not by a walk). States
    are processed in column blocks of STATE_BLOCK so the level arrays stay small.
    """
    classes, byte_class, _ = class_arrays(automaton, accepting)
    num_states = classes.shape[0]
    table = ScaledTable.of(classes, byte_class)
    out = np.full((num_states, vocab.size), DEAD, dtype=state_dtype(num_states))
    for start in range(0, num_states, STATE_BLOCK):
        stop = min(num_states, start + STATE_BLOCK)
        _level_pass(
            table, np.arange(start, stop, dtype=np.int32), vocab, out[start:stop]
        )
    return out


def token_table_rows(
    automaton: Any, states: Any, vocab: Vocabulary, accepting: Any = None
) -> np.ndarray:
    """Rows T[states, ·] of the token table: Algorithm 4 with only these states as the columns."""
    classes, byte_class, _ = class_arrays(automaton, accepting)
    states = np.asarray(states, dtype=np.int32).reshape(-1)
    if states.size and (states.min() < 0 or states.max() >= classes.shape[0]):
        raise StdslError(
            f"token_table_rows: states must lie in [0, {classes.shape[0] - 1}]"
        )
    out = np.full(
        (states.shape[0], vocab.size), DEAD, dtype=state_dtype(classes.shape[0])
    )
    _level_pass(ScaledTable.of(classes, byte_class), states, vocab, out)
    return out


def _level_pass(
    table: ScaledTable, states: np.ndarray, vocab: Vocabulary, out: np.ndarray
) -> None:
    """Algorithm 4 for the given root states (the columns); writes their rows into `out`."""
    flat, sink = table.flat, table.sink
    rows = (states * table.stride)[None, :]
    parent_row = np.zeros(1, dtype=np.int64)
    for level in vocab.levels:
        prow = level.parents_of(parent_row)
        live = np.flatnonzero(prow >= 0)
        if live.shape[0] == 0:
            break
        columns = table.byte_class[level.byte[live]]
        current = flat[rows[prow[live]] + columns[:, None]]
        alive = (current != sink).any(axis=1)
        row_of_node = np.full(level.size, -1, dtype=np.int64)
        row_of_node[live[alive]] = np.arange(int(alive.sum()))
        current = current[alive]
        ends = level.ends_of(row_of_node)
        hit = ends >= 0
        if hit.any():
            out[:, level.end_tokens[hit]] = table.states_of(current[ends[hit]]).T
        rows, parent_row = current, row_of_node


def _root_levels(table: ScaledTable, state: int, vocab: Vocabulary) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The level pass (`level_pass`) restricted to one root: per level, tokens ending there and their scaled end
    values (`table.sink` dead)."""
    flat, byte_class = table.flat, table.byte_class

    def step_dense(level: Any, above: np.ndarray) -> np.ndarray:
        index = level.parents_of(above)
        index += table.columns(level.byte_string)
        return np.take(flat, index)

    def step_sparse(values: np.ndarray, children_bytes: np.ndarray) -> np.ndarray:
        return flat[values + byte_class[children_bytes]]

    return level_pass(vocab.levels, state * table.stride, table.sink, step_dense, step_sparse)


def root_row_scaled(table: ScaledTable, state: int, vocab: Vocabulary) -> np.ndarray:
    """Row T[state, ·] (V,) int32 as scaled states (`table.sink` dead): the level pass restricted to one root."""
    out = np.full(vocab.size, table.sink, dtype=np.int32)
    for tokens, values in _root_levels(table, state, vocab):
        out[tokens] = values
    return out


def root_row(table: ScaledTable, state: int, vocab: Vocabulary) -> np.ndarray:
    """Row T[state, ·] (V,) int32 by the level pass restricted to one root: -1 dead."""
    return table.states_of(root_row_scaled(table, state, vocab))


def root_row_live(table: ScaledTable, state: int, vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """The live entries of row T[state, ·]: (token ids, next states), unordered, without a (V,) pass."""
    tokens: list[np.ndarray] = []
    states: list[np.ndarray] = []
    for ending, values in _root_levels(table, state, vocab):
        keep = values != table.sink
        tokens.append(ending[keep])
        states.append(values[keep] // table.stride)
    if not tokens:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
    return np.concatenate(tokens), np.concatenate(states)
