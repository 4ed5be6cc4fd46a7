"""Operations on compiled automata: intersection, step edges, and the exact "ends before this literal" language.

A template field followed by literal text L must end exactly where L begins.  The strings
f for which L first occurs in f·L at |f| form a regular language (Proposition 3 of the paper
generalizes to any literal through the Knuth–Morris–Pratt automaton of L); intersecting a
field with it bounds the field exactly, without losing any string that could be read back.
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.minimize import minimize
from stdsl.compiler.deadline import check_deadline


def _kmp_failure(literal: bytes) -> list[int]:
    fail = [0] * len(literal)
    k = 0
    for i in range(1, len(literal)):
        while k and literal[i] != literal[k]:
            k = fail[k - 1]
        if literal[i] == literal[k]:
            k += 1
        fail[i] = k
    return fail


def _kmp_table(literal: bytes) -> np.ndarray:
    """table[k, b]: longest prefix of `literal` that is a suffix after reading b in state k (len = full match)."""
    fail = _kmp_failure(literal)
    n = len(literal)
    table = np.zeros((n, 256), dtype=np.int64)
    for k in range(n):
        for b in range(256):
            j = k
            while j and literal[j] != b:
                j = fail[j - 1]
            table[k, b] = j + 1 if literal[j] == b else 0
    return table


def ends_before(literal: bytes) -> Automaton:
    """The strings f such that `literal` occurs in f·literal first at position |f|.

    These are exactly the field values that can be followed by `literal` and read back
    unambiguously: the first occurrence of `literal` after the field's start marks its end.
    """
    if not literal:
        raise ValueError("ends_before needs a non-empty literal")
    kmp = _kmp_table(literal)
    n = len(literal)
    accepting = np.zeros(n, dtype=bool)
    for k in range(n):
        state, early = k, False
        for step, byte in enumerate(literal):
            state = int(kmp[state, byte])
            if state == n and step < n - 1:
                early = True
                break
        accepting[k] = not early
    table = np.where(kmp == n, -1, kmp)
    return Automaton(*minimize(table, accepting))


def intersect(a: Automaton, b: Automaton, max_states: int | None = None) -> Automaton:
    """The minimal automaton of L(a) ∩ L(b) (product construction over reachable pairs).

    Raises StateBudgetError when more than `max_states` pairs are reachable.
    """
    from stdsl.errors import StateBudgetError

    ta, tb = a.transitions.astype(np.int64), b.transitions.astype(np.int64)
    width = max(b.num_states, 1)
    index: dict[int, int] = {0: 0}
    pairs = [0]
    rows: list[np.ndarray] = []
    head = 0
    while head < len(pairs):
        key = pairs[head]
        head += 1
        na, nb = ta[key // width], tb[key % width]
        live = np.flatnonzero((na >= 0) & (nb >= 0))
        row = np.full(256, -1, dtype=np.int64)
        if live.size:
            keys, inverse = np.unique(na[live] * width + nb[live], return_inverse=True)
            targets = []
            for pair in keys.tolist():
                target = index.get(pair)
                if target is None:
                    target = index[pair] = len(pairs)
                    pairs.append(pair)
                targets.append(target)
            row[live] = np.asarray(targets, dtype=np.int64)[inverse.reshape(-1)]
        rows.append(row)
        if head & 1023 == 0:
            check_deadline("intersection")
        if max_states is not None and len(pairs) > max_states:
            raise StateBudgetError(f"the intersection needs more than {max_states:,} product states")
    accepting = np.array([bool(a.accepting[k // width] and b.accepting[k % width]) for k in pairs])
    return Automaton(*minimize(np.vstack(rows), accepting))


def step_edges(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (state, next state) pairs of a (num_states, k) step table with -1 for dead steps.

    Shortest-path rounds over these cost the number of edges, not states x k.
    """
    num_states = table.shape[0]
    rows, _ = np.nonzero(table >= 0)
    pairs = np.unique(rows.astype(np.int64) * num_states + table[table >= 0].astype(np.int64))
    return pairs // max(num_states, 1), pairs % max(num_states, 1)


def is_prefix_free(a: Automaton) -> bool:
    """Whether no accepted string is a proper prefix of another (no accepting state of the trim automaton reads on)."""
    return not bool((a.live_count[a.accepting] > 0).any())
