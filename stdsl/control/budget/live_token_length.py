"""The longest token a recursive grammar's outputs can hold, for a lower bound on need in tokens.

Every token emitted under a grammar (sampled, forced or healed) spells bytes of one valid output, so
each pair of its adjacent bytes is a pair some output holds. The pairs are over-approximated on the
grammar's states without their stack: after byte a comes any byte some state entered on a reads (its
own moves and calls) or, where that state accepts, any byte a return state reads. No token longer
than the longest one whose pairs all pass spells part of an output, so a completion of n bytes takes
at least ceil(n / that length) tokens (the heuristic of the exact pushdown budget).
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler.pushdown.grammar import PushdownGrammar
from stdsl.kernels.vocabulary import Vocabulary


def adjacent_bytes(grammar: PushdownGrammar) -> tuple[np.ndarray, np.ndarray]:
    """(readable (256,), follows (256, 256)): bytes some state reads, and which byte may follow which in an output
    (an over-approximation: the stack is forgotten and any return state may be popped to)."""
    table = np.asarray(grammar.own_classes)
    moves = table >= 0
    direct = moves.copy()
    direct[grammar.calls.states] |= grammar.calls.rows >= 0
    returns = np.unique(np.asarray(grammar.call_return, dtype=np.int64))
    after_return = np.asarray(direct[returns].any(axis=0) if returns.size else np.zeros(table.shape[1], dtype=bool))
    accepting = np.asarray(grammar.accepting, dtype=bool)
    reads = direct | (accepting[:, None] & after_return[None, :])
    follows = np.zeros((table.shape[1], table.shape[1]), dtype=bool)
    for column in np.flatnonzero(moves.any(axis=0)).tolist():
        entered = np.unique(table[:, column][table[:, column] >= 0])
        follows[column] = reads[entered].any(axis=0)
    byte_class = grammar.byte_class
    return np.asarray(reads.any(axis=0))[byte_class], follows[byte_class][:, byte_class]


def longest_live_token(grammar: PushdownGrammar, vocab: Vocabulary) -> int:
    """The most bytes of a token whose every byte is read and every adjacent pair may follow in an output (at
    least 1): no token longer than this is ever emitted under `grammar`."""
    readable, follows = adjacent_bytes(grammar)
    offsets = np.asarray(vocab.offsets, dtype=np.int64)
    data = np.asarray(vocab.data, dtype=np.int64)
    lengths = np.diff(offsets)
    if data.size == 0:
        return 1
    bad_byte = ~readable[data]
    bad_pair = np.zeros(data.size, dtype=bool)
    bad_pair[1:] = ~follows[data[:-1], data[1:]]
    bad_pair[offsets[:-1][lengths > 0]] = False
    bad = np.concatenate([[0], np.cumsum(bad_byte | bad_pair)])
    live = (lengths > 0) & (bad[offsets[1:]] == bad[offsets[:-1]]) & ~np.asarray(vocab.eos, dtype=bool)
    return max(1, int(lengths[live].max(initial=1)))
