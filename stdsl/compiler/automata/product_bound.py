"""A proven lower bound on the pairs a product construction will reach, from the pairs it has met so far.

`ops.intersect` refuses a product past its state budget only once its breadth-first search has numbered that many
pairs; a string pattern beside a long length bound (MaskBench o21053: `(\\S+\\s+){0,99}\\S+` within 1,000
characters, 3.2 million product states) met 200,000 pairs, a byte level at a time, before its refusal.  Most of
them repeat one shape, which is counted here without being searched:

- a met pair (l, r) whose left state `l` a byte class `c` keeps in place reaches (l, r') for every state r' on
  r's walk by `c` in the right automaton (a word's letters, one more each time); while that walk neither dies nor
  comes back to a state, its states are distinct;
- a word `v` that leads `l` to a left state `x` leads each such (l, r') to (x, r' read by `v`): as many distinct
  pairs with left state `x` as the walk's states give distinct live states by `v` (counted, not assumed).

Per left state the most pairs one such image gives (or the met pairs, if more) are summed: pairs of distinct left
states are distinct pairs.  The words `v` are searched a few bytes deep from each kept state, one class per
distinct left target.
"""

from __future__ import annotations

import numpy as np

BOUND_FROM_SHARE = 32
BOUND_GROWTH = 4
"""`intersect` asks for the bound once its search has met a 32nd of its budget, then at each fourfold count:
o21053's first 6,250 pairs prove its refusal."""
MAX_LOOP_CLASSES = 3
"""The classes whose walks are measured, each keeping in place the most met states no class before it keeps: a walk
costs a few numpy passes over the right automaton's states."""
MAX_DEPTH = 8
"""How many bytes deep the words `v` are searched from a kept state (a `\\uXXXX` escape is six)."""
MAX_IMAGES = 2048
"""The images (a left state reached, its right states counted) one bound computes before it gives up."""


def walk_lengths(moves: np.ndarray) -> np.ndarray:
    """Per state, how many live moves its walk along `moves` (a state's one successor, -1 dead) makes before it
    dies; -1 where the walk never dies (it enters a cycle).  Pointer doubling: a round doubles the moves looked at."""
    count = len(moves)
    ahead = moves.astype(np.int64)
    steps = (ahead >= 0).astype(np.int64)
    looked = 1
    while looked <= count:
        live = np.flatnonzero(ahead >= 0)
        if not len(live):
            return steps
        targets = ahead[live]
        further = steps.copy()
        further[live] += steps[targets]
        jumped = np.full(count, -1, dtype=np.int64)
        jumped[live] = ahead[targets]
        steps, ahead = further, jumped
        looked *= 2
    return np.where(ahead >= 0, -1, steps)


def reaches_more_than(left: np.ndarray, right: np.ndarray, width: int, met: np.ndarray, limit: int) -> bool:
    """Whether the product of two class tables over common classes (`left`, `right`: rows are states, -1 dead)
    reaches more than `limit` pairs, proven from the distinct pairs `met` so far (numbered `l * width + r`).
    False means "not proven", never "within the limit"."""
    lefts, rights = met // width, met % width
    states, position = np.unique(lefts, return_inverse=True)
    position = position.reshape(-1)
    kept = left[states] == states[:, None]
    if not kept.any() or len(met) + len(left) * len(right) <= limit:
        return False
    best = np.zeros(len(left), dtype=np.int64)
    best[states] = np.bincount(position, minlength=len(states))
    proven = _Proven(best, limit, len(right))
    for state, column, start, length in sorted(_walks(kept, position, rights, right), key=lambda s: -s[3]):
        walk = _walk(right, start, column, length)
        if proven.raise_to(int(states[state]), len(walk)) or _images(left, right, int(states[state]), walk, proven):
            return True
    return False


class _Proven:
    """The pairs proven per left state and their sum, against the limit."""

    def __init__(self, best: np.ndarray, limit: int, right_states: int) -> None:
        self.best, self.limit = best, limit
        self.total = int(best.sum())
        self.images = 0
        self.stamps = np.zeros(right_states, dtype=np.int64)

    def distinct(self, states: np.ndarray) -> np.ndarray:
        """The live states among `states`, each once (in order of last occurrence; no sort: one numpy pass each)."""
        states = states[states >= 0]
        order = np.arange(len(states))
        self.stamps[states] = order
        return states[self.stamps[states] == order]

    def raise_to(self, state: int, pairs: int) -> bool:
        """At least `pairs` pairs with left state `state`; True once the sum passes the limit."""
        if pairs > self.best[state]:
            self.total += pairs - int(self.best[state])
            self.best[state] = pairs
        return self.total > self.limit


def _walks(kept: np.ndarray, position: np.ndarray, rights: np.ndarray, right: np.ndarray
           ) -> list[tuple[int, int, int, int]]:
    """Per met left state kept in place by a measured class: (its index among the met states, the class, the met
    right state whose walk by it is longest, that walk's live moves)."""
    longest: dict[int, tuple[int, int, int]] = {}
    covered = np.zeros(kept.shape[0], dtype=bool)
    for _ in range(MAX_LOOP_CLASSES):
        gains = kept[~covered].sum(axis=0)
        column = int(gains.argmax())
        if not gains[column]:
            break
        covered |= kept[:, column]
        lengths = walk_lengths(right[:, column])
        looping = np.flatnonzero(kept[position, column])
        reach = lengths[rights[looping]]
        for index, state, length in zip(looping.tolist(), position[looping].tolist(), reach.tolist()):
            if length > longest.get(state, (0, 0, -1))[2]:
                longest[state] = (column, int(rights[index]), length)
    return [(state, column, start, length) for state, (column, start, length) in longest.items()]


def _walk(right: np.ndarray, start: int, column: int, length: int) -> np.ndarray:
    """The states of `start`'s walk by class `column`: `start` and the `length` states its live moves reach."""
    walk = np.empty(length + 1, dtype=np.int64)
    walk[0] = state = start
    moves = right[:, column].tolist()
    for step in range(1, length + 1):
        state = moves[state]
        walk[step] = state
    return walk


def _images(left: np.ndarray, right: np.ndarray, source: int, walk: np.ndarray, proven: _Proven) -> bool:
    """Raise the pairs `proven` per left state by the images of `source`'s pairs with the `walk` states, searched
    `MAX_DEPTH` bytes deep; True once they sum past the limit."""
    frontier = [(source, walk)]
    seen = {source}
    for _ in range(MAX_DEPTH):
        following = []
        for state, image in frontier:
            firsts: dict[int, int] = {}
            for column, target in enumerate(left[state].tolist()):
                if target >= 0 and target not in seen:
                    firsts.setdefault(target, column)
            for target, column in firsts.items():
                proven.images += 1
                if proven.images > MAX_IMAGES:
                    return False
                moved = proven.distinct(right[image, column])
                if not len(moved):
                    continue
                seen.add(target)
                if proven.raise_to(target, len(moved)):
                    return True
                following.append((target, moved))
        frontier = following
    return False
