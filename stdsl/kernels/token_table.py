"""The token table T[q, t] = δ*(q, t) by the level pass of Algorithm 4 (Theorem 18(i)): all states, or one root.

It is the oracle every table-free mask (walk kernel, rows on demand) is tested against, and
the table a controller may store when |Q|·|V| is small enough.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stdsl.errors import StdslError
from stdsl.kernels.vocabulary import Vocabulary

DEAD = -1
DENSE_FRACTION = 4
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


def state_dtype(num_states: int) -> np.dtype:
    """Smallest signed dtype holding states 0..num_states-1 and the dead marker -1."""
    return (
        np.dtype(np.int16)
        if num_states <= np.iinfo(np.int16).max
        else np.dtype(np.int32)
    )


def scaled_table(transitions: np.ndarray) -> np.ndarray:
    """Flat int32 table with a dead sink: entry [s*256 + b] = δ(s, b)*256, dead = Q*256.

    Pre-scaling makes one step of a walk a single add and gather: s ← table[s + byte].
    """
    num_states = transitions.shape[0]
    sink = num_states * 256
    table = np.full((num_states + 1) * 256, sink, dtype=np.int32)
    body = transitions.astype(np.int32) * 256
    body[transitions < 0] = sink
    table[: num_states * 256] = body.reshape(-1)
    return table


def token_table(automaton: Any, vocab: Vocabulary, accepting: Any = None) -> np.ndarray:
    """All-state token table (num_states, vocab.size): next state per (state, token), -1 dead.

    Specials and eos ids are always -1 (eos is allowed by acceptance, not by a walk). States
    are processed in column blocks of STATE_BLOCK so the level arrays stay small.
    """
    transitions, _ = automaton_arrays(automaton, accepting)
    num_states = transitions.shape[0]
    table = scaled_table(transitions)
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
    transitions, _ = automaton_arrays(automaton, accepting)
    states = np.asarray(states, dtype=np.int32).reshape(-1)
    if states.size and (states.min() < 0 or states.max() >= transitions.shape[0]):
        raise StdslError(
            f"token_table_rows: states must lie in [0, {transitions.shape[0] - 1}]"
        )
    out = np.full(
        (states.shape[0], vocab.size), DEAD, dtype=state_dtype(transitions.shape[0])
    )
    _level_pass(scaled_table(transitions), states, vocab, out)
    return out


def _level_pass(
    table: np.ndarray, states: np.ndarray, vocab: Vocabulary, out: np.ndarray
) -> None:
    """Algorithm 4 for the given root states (the columns); writes their rows into `out`."""
    sink = table.shape[0] - 256
    rows = (states * 256)[None, :]
    parent_row = np.zeros(1, dtype=np.int64)
    for level in vocab.levels:
        prow = parent_row[level.parent]
        live = np.flatnonzero(prow >= 0)
        if live.shape[0] == 0:
            break
        current = table[rows[prow[live]] + level.byte[live].astype(np.int32)[:, None]]
        alive = (current != sink).any(axis=1)
        row_of_node = np.full(level.size, -1, dtype=np.int64)
        row_of_node[live[alive]] = np.arange(int(alive.sum()))
        current = current[alive]
        ends = row_of_node[level.end_nodes]
        hit = ends >= 0
        if hit.any():
            values = current[ends[hit]]
            out[:, level.end_tokens[hit]] = np.where(
                values == sink, DEAD, values >> 8
            ).T
        rows, parent_row = current, row_of_node


def _tokens_by_node(vocab: Vocabulary) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per trie level: (offsets (n+1), token ids) listing the tokens ending at each node, cached."""

    def build() -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for level in vocab.levels:
            order = np.argsort(level.end_nodes, kind="stable")
            first = np.zeros(level.size + 1, dtype=np.int32)
            np.cumsum(np.bincount(level.end_nodes, minlength=level.size), out=first[1:])
            out.append((first, level.end_tokens[order]))
        return out

    return vocab.cached("tokens_by_node", build)


def _expand(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of the ranges [starts[i], starts[i] + counts[i])."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.cumsum(counts) - counts
    return np.repeat(starts.astype(np.int64) - shift, counts) + np.arange(total)


def root_row(scaled: np.ndarray, state: int, vocab: Vocabulary) -> np.ndarray:
    """Row T[state, ·] (V,) int32 by the level pass restricted to one root (`scaled_table` form).

    Levels where most nodes are alive are processed densely (one gather by parent); once few
    are alive only the live nodes' children are expanded, so a structural state costs little.
    """
    sink = scaled.shape[0] - 256
    out = np.full(vocab.size, DEAD, dtype=np.int32)
    by_node = _tokens_by_node(vocab)
    dense: np.ndarray | None = np.full(1, state * 256, dtype=np.int32)
    live = np.zeros(0, dtype=np.int64)
    values = np.zeros(0, dtype=np.int32)
    for depth, level in enumerate(vocab.levels):
        if dense is not None:
            index = np.take(dense, level.parent)
            index += level.byte
            dense = np.take(scaled, index)
            ends = dense[level.end_nodes]
            out[level.end_tokens] = np.where(ends == sink, DEAD, ends >> 8)
            alive = dense != sink
            count = int(np.count_nonzero(alive))
            if count == 0:
                break
            if count * DENSE_FRACTION < level.size:
                live = np.flatnonzero(alive)
                values = dense[live]
                dense = None
        else:
            first_child = vocab.levels[depth - 1].first_child
            starts = first_child[live]
            children = _expand(starts, first_child[live + 1] - starts)
            values = scaled[
                np.repeat(values, first_child[live + 1] - starts) + level.byte[children]
            ]
            keep = values != sink
            live, values = children[keep], values[keep]
            if live.shape[0] == 0:
                break
            first, tokens = by_node[depth]
            token_starts = first[live]
            counts = first[live + 1] - token_starts
            if counts.any():
                out[tokens[_expand(token_starts, counts)]] = np.repeat(
                    values >> 8, counts
                )
    return out
