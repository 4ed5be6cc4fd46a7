"""Language equality of two byte automata: a shortest text one accepts and the other does not, by a breadth-first
search of their product (the oracle for constructions that must accept exactly what another does)."""

from __future__ import annotations

from collections import deque

import numpy as np

from stdsl.compiler.automata.automaton import Automaton
from tests.compiler.accepting_walks import random_accepted


def _joint(a: Automaton, b: Automaton) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both tables over the classes that refine both automata's byte classes."""
    pairs = np.stack([a.byte_class, b.byte_class], axis=1)
    _, first = np.unique(pairs, axis=0, return_index=True)
    return a.class_transitions[:, a.byte_class[first]], b.class_transitions[:, b.byte_class[first]], first


def difference(a: Automaton, b: Automaton) -> bytes | None:
    """A shortest text one automaton accepts and the other does not (None: the languages are equal)."""
    ta, tb, first = _joint(a, b)
    seen = {(0, 0): b""}
    queue = deque([(0, 0)])
    while queue:
        pa, pb = queue.popleft()
        text = seen[(pa, pb)]
        if (pa >= 0 and a.accepting[pa]) != (pb >= 0 and b.accepting[pb]):
            return text
        for column, byte in enumerate(first.tolist()):
            na = int(ta[pa, column]) if pa >= 0 else -1
            nb = int(tb[pb, column]) if pb >= 0 else -1
            if (na, nb) != (-1, -1) and (na, nb) not in seen:
                seen[(na, nb)] = text + bytes([byte])
                queue.append((na, nb))
    return None


def accepts(automaton: Automaton, text: bytes) -> bool:
    state = 0
    for byte in text:
        state = int(automaton.transitions[state, byte]) if state >= 0 else -1
    return state >= 0 and bool(automaton.accepting[state])


def assert_agree_on_walks(a: Automaton, b: Automaton, rng: np.random.Generator, walks: int = 3) -> None:
    """Each automaton accepts the other's random accepted texts, and they agree on each text with one byte changed."""
    for machine, other in ((a, b), (b, a)):
        for _ in range(walks):
            text = random_accepted(machine, rng)
            assert accepts(other, text)
            if text:
                cut = int(rng.integers(len(text)))
                mutated = text[:cut] + bytes([int(rng.integers(256))]) + text[cut + 1:]
                assert accepts(machine, mutated) == accepts(other, mutated)
