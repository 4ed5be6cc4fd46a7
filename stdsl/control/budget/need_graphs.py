"""The step graphs need is counted over, from the automaton and the packed vocabulary (no all-state token table).

Exact: a state's successors are the distinct states its live tokens reach, read from its row on
demand (one level pass from that root, Theorem 18), only for the states a budget question
reaches. Every budget also starts with a cheap upper bound on need over the byte moves whose byte
is a token on its own, counting each forced chain's bytes as its tokens (a chain of n bytes is
never split into more than n tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.ops import step_edges
from stdsl.compiler.special_tokens import SPECIAL_MARK
from stdsl.control.budget.automaton_budget import (
    UNREACHABLE,
    NeedBound,
    Successors,
    distinct_states,
    relax,
)
from stdsl.kernels.rows import row_next_states
from stdsl.kernels.vocabulary import Vocabulary

MARK = bytes([SPECIAL_MARK])


def single_byte_tokens(vocab: Vocabulary) -> np.ndarray:
    """bool (256,): bytes that are a token on their own (eos and specials never are), once per vocabulary; the mark
    of special tokens' spellings counts as one where the vocabulary spells some (a spelling's bytes bound its one
    token from above)."""

    def build() -> np.ndarray:
        ones = np.flatnonzero(vocab.walk_lengths == 1).tolist()
        out = np.zeros(256, dtype=bool)
        out[[vocab.bytes_of(i)[0] for i in ones]] = True
        out[SPECIAL_MARK] = any(b is not None and b[:1] == MARK for b in vocab.token_bytes)
        return out

    return vocab.cached("single_byte_tokens", build)


def byte_token_steps(automaton: Any, vocab: Vocabulary) -> np.ndarray:
    """(num_states, k) next states over the byte classes that hold a single-byte token (-1 dead)."""
    byte_class = np.asarray(automaton.byte_class)
    classes = np.unique(byte_class[single_byte_tokens(vocab)])
    return np.asarray(automaton.class_transitions)[:, classes]


def row_successors(automaton: Any, vocab: Vocabulary) -> Successors:
    """Successors over every token: the distinct live entries of the state's row, computed on demand."""
    num_states = int(automaton.num_states)

    def successors(state: int) -> np.ndarray:
        row = row_next_states(automaton, state, vocab)
        return distinct_states(row[row >= 0], num_states)

    return successors


def forced_steps(automaton: Any) -> tuple[np.ndarray, np.ndarray]:
    """(forced, step) per state: whether it is forced (not accepting, one live byte) and where that byte leads.

    The mark that opens or closes a special token's spelling is never forced (as the planner's chains stop there).
    Read from an `Automaton`'s stored rows (its forced states have one live class), else from its 256-column table.
    """
    accepting = np.asarray(automaton.accepting, dtype=bool)
    states = np.arange(accepting.shape[0])
    if isinstance(automaton, Automaton):
        forced_byte = np.asarray(automaton.forced_byte, dtype=np.int64)
        forced = (forced_byte >= 0) & (forced_byte != SPECIAL_MARK)
        step = automaton.next_states(states, automaton.byte_class[np.maximum(forced_byte, 0)])
    else:
        transitions = np.asarray(automaton.transitions)
        live = transitions >= 0
        forced = ~accepting & (live.sum(axis=1) == 1) & ~live[:, SPECIAL_MARK]
        step = transitions[states, live.argmax(axis=1)]
    return forced, np.where(forced, step, -1).astype(np.int64)


def forced_chains(automaton: Any, chain_of: Callable[[int], tuple[bytes, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per state: the end of its forced chain and the chain's length in bytes, for all states at once.

    Chains are followed one byte per round for every state together. A chain that is still forced
    after as many rounds as there are states runs into a forced cycle (an untrimmed automaton);
    `chain_of` gives those.
    """
    forced, step = forced_steps(automaton)
    num_states = forced.shape[0]
    end = np.arange(num_states, dtype=np.int64)
    length = np.zeros(num_states, dtype=np.int64)
    active = forced.copy()
    for _ in range(num_states):
        if not active.any():
            break
        end[active] = step[end[active]]
        length[active] += 1
        active &= forced[end]
    for state in np.flatnonzero(active).tolist():
        chain, end[state] = chain_of(state)
        length[state] = len(chain)
    return end, length


def chain_bound(automaton: Any, vocab: Vocabulary, chain_end: np.ndarray, chain_bytes: np.ndarray,
                chain_count: Callable[[int], int]) -> NeedBound:
    """An upper bound on need for every state: shortest paths over single-byte tokens.

    A forced chain counts as its tokens (`chain_count`) where a decision state's byte enters it (the
    chains a shortest path pays for: a few per grammar), elsewhere as its bytes, which bound its tokens.
    """
    accepting = np.asarray(automaton.accepting, dtype=bool)
    counts = np.asarray(chain_bytes, dtype=np.int64).copy()
    forced, _ = forced_steps(automaton)
    source, after = step_edges(byte_token_steps(automaton, vocab))
    deciding = ~accepting & ~forced
    for state in np.unique(after[deciding[source] & (counts[after] > 0)]).tolist():
        counts[state] = chain_count(state)
    keep = ~accepting[source]
    need = np.where(accepting, 0, UNREACHABLE).astype(np.int64)
    relax(need, np.flatnonzero(~accepting), source[keep], chain_end[after[keep]], 1 + counts[after[keep]])
    through = np.minimum(1 + counts + need[chain_end], UNREACHABLE)
    return NeedBound(need, through)
