"""Tables of the configurations a row may reach next, computed ahead while its model pass runs (issue 36, item 4).

A new grammar's first visit of a state walks the token trie for that state's row, computes its boundary
covers and budget masks: milliseconds per new state that a cached grammar does not pay. The controller is
pure, so those tables can be filled before the row needs them: from the configuration the row samples at,
`Lookahead` explores the configurations one sampled token away (one token per distinct next state, the
state most tokens reach first), then theirs, up to `DEPTH` tokens ahead, computing each one's mask and move
through a twin of the row's controller. Only the shared tables warm (rows, covers, plans, budget answers);
the row's own configuration and memo are never touched, so no token changes.

The work is cut into units (one mask or one move each) so its caller, the engine's runner thread, spends only
time it would otherwise wait for the model pass: no other thread touches the tables. A speculative move
that fails (a token the budget refuses, a dead end) only ends that branch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from stdsl.control.controller import Configuration, Controller

DEPTH = 3
"""Sampled tokens ahead of the row's configuration that the lookahead explores."""
BRANCHES = 8
"""Next states explored per configuration: those reached by the most tokens."""
MASKS = 4
"""Masks the lookahead's twin controller keeps (a branch's mask is asked again by its moves)."""


class Lookahead:
    """Warms the tables a row will read next, one unit of work per `step()`, from the configuration it `follow`s."""

    def __init__(self, controller: Controller, depth: int = DEPTH, branches: int = BRANCHES) -> None:
        self.controller = controller.with_masks(MASKS)
        self.depth = depth
        self.branches = branches
        self.units = 0
        """Units of work done (masks and moves computed ahead)."""
        self._expanded: set[tuple[int, bytes]] = set()
        self._at: Configuration | None = None
        self._work: Iterator[None] | None = None

    def follow(self, configuration: Configuration) -> None:
        """Explore from `configuration` next (the row's new sampling configuration); the same one keeps its work."""
        if configuration is not self._at:
            self._at = configuration
            self._work = None if configuration.finished else self._explore(configuration)

    def step(self) -> bool:
        """Do one unit of work; False once nothing is left to do from the configuration followed."""
        if self._work is None:
            return False
        try:
            next(self._work)
        except StopIteration:
            self._work = None
            return False
        self.units += 1
        return True

    def _explore(self, root: Configuration) -> Iterator[None]:
        """Breadth first from `root`: each configuration's mask, then the moves to its likeliest next states."""
        frontier: deque[tuple[Configuration, int]] = deque([(root, 0)])
        while frontier:
            at, depth = frontier.popleft()
            key = (at.state, at.pending)
            if at.finished or depth >= self.depth or key in self._expanded:
                continue
            self._expanded.add(key)
            try:
                allowed = self.controller.mask(at)
            except Exception:  # noqa: BLE001 - a configuration no output continues from has nothing to warm
                continue
            yield
            for token in self._representatives(at.state, allowed):
                try:
                    move = self.controller.advance(at, token)
                except Exception:  # noqa: BLE001 - a token the budget or split refuses ends only this branch
                    continue
                yield
                frontier.append((move.configuration, depth + 1))

    def _representatives(self, state: int, allowed: np.ndarray) -> list[int]:
        """One admitted token per distinct next state, for the `branches` states the most admitted tokens reach."""
        tokens = np.flatnonzero(allowed[: self.controller.vocab.size] & ~self.controller.vocab.eos)
        if tokens.shape[0] == 0:
            return []
        targets: Any = self.controller.rows.next_states(state)[tokens]
        _, first, counts = np.unique(targets, return_index=True, return_counts=True)
        likeliest = np.argsort(-counts, kind="stable")[: self.branches]
        return [int(tokens[first[i]]) for i in likeliest]
