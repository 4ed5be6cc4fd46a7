"""Random accepting walks: strings an automaton or pushdown machine accepts, drawn by walking its bytes.

Each step picks a live byte at random; once the walk is long it only takes bytes that bring the
shortest completion closer, so every walk ends accepted.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.pushdown.machine import PushdownMachine


def distances(automaton: Automaton) -> np.ndarray:
    """Bytes from each state to acceptance (a large number where none)."""
    far = np.iinfo(np.int64).max // 4
    dist = np.where(automaton.accepting, 0, far).astype(np.int64)
    table = automaton.transitions
    sources, targets = np.nonzero(table >= 0)
    into: dict[int, list[int]] = {}
    for q, b in zip(sources.tolist(), targets.tolist()):
        into.setdefault(int(table[q, b]), []).append(q)
    queue = deque(np.flatnonzero(automaton.accepting).tolist())
    while queue:
        state = queue.popleft()
        for previous in into.get(state, ()):
            if dist[previous] > dist[state] + 1:
                dist[previous] = dist[state] + 1
                queue.append(previous)
    return dist


def random_accepted(machine: Automaton | PushdownMachine, rng: np.random.Generator, *, stop: float = 0.2,
                    wander: int = 60, dist: np.ndarray | None = None) -> bytes:
    """One accepted byte string: random live bytes for about `wander` steps, then the way to acceptance."""
    if isinstance(machine, PushdownMachine):
        state: Any = machine.start
        row_of, accepts, need = machine.byte_row, machine.config_accepts, machine.need
    else:
        dist = distances(machine) if dist is None else dist
        state = 0
        row_of = machine.transitions.__getitem__
        accepts, need = (lambda q: bool(machine.accepting[q])), (lambda q: int(dist[q]))
    out = bytearray()
    for steps in range(100_000):
        row = np.asarray(row_of(state))
        live = np.flatnonzero(row >= 0)
        if accepts(state) and (steps >= wander or not live.size or rng.random() < stop):
            return bytes(out)
        if steps >= wander:
            here = need(state)
            live = np.array([b for b in live.tolist() if need(int(row[b])) < here], dtype=np.int64)
        byte = int(rng.choice(live))
        out.append(byte)
        state = int(row[byte])
    raise AssertionError("the walk did not end")
