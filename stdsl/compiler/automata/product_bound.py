"""A proven lower bound on the pairs a product construction will reach, from the pairs it has met so far.

`ops.intersect` refuses a product past its state budget only once its breadth-first search has numbered that many
pairs; a string pattern beside a long length bound (MaskBench o21053: `(\\S+\\s+){0,99}\\S+` within 1,000
characters, 3.2 million product states) met 200,000 pairs, a byte level at a time, before its refusal.  Most of
them repeat one shape, which is counted here without being searched:

- a met pair (l, r) whose left state `l` a byte class `c` keeps in place reaches (l, r') for every state r' on
  r's walk by `c` in the right automaton (a word's letters, one more each time); until that walk dies or comes
  back to a state, its states are distinct;
- a word `v` that leads `l` to a left state `x` leads each such (l, r') to (x, r' read by `v`): as many distinct
  pairs with left state `x` as the walk's states give distinct live states by `v` (counted, not assumed).

Per left state the most pairs one such image gives (or the met pairs, if more) are summed: pairs of distinct left
states are distinct pairs.  The words `v` are searched a few bytes deep from each kept state, one class per
distinct left target.
"""

from __future__ import annotations

import numpy as np

BOUND_FROM_SHARE = 32
BOUND_FROM_PAIRS = 2048
BOUND_GROWTH = 4
"""`intersect` asks for the bound once its search has met a 32nd of its budget (and at least 2,048 pairs, so that a
small budget's search is not slowed by it), then at each fourfold count: o21053's first 6,757 pairs prove its
refusal."""
MAX_WALK_STEPS = 1 << 16
"""The moves all walks of one bound take together (each a Python step)."""
MAX_DEPTH = 8
"""How many bytes deep the words `v` are searched from a kept state (a `\\uXXXX` escape is six)."""
MAX_IMAGES = 1024
"""The images (a left state reached, its right states counted) one bound computes before it gives up."""


def first_bound_at(limit: int) -> int:
    """The pairs met at which `intersect` first asks for the bound under a budget of `limit`."""
    return max(limit // BOUND_FROM_SHARE, BOUND_FROM_PAIRS)


def reaches_more_than(left: np.ndarray, right: np.ndarray, width: int, met: np.ndarray, limit: int) -> bool:
    """Whether the product of two class tables over common classes (`left`, `right`: rows are states, -1 dead)
    reaches more than `limit` pairs, proven from the distinct pairs `met` so far (numbered `l * width + r`, level by
    level as met: a left state's first pair is one of its earliest, whose walk is longest where a walk counts).
    False means "not proven", never "within the limit"."""
    lefts, rights = met // width, met % width
    states, first, position = np.unique(lefts, return_index=True, return_inverse=True)
    kept = left[states] == states[:, None]
    if not kept.any() or len(met) + len(left) * len(right) <= limit:
        return False
    best = np.zeros(len(left), dtype=np.int64)
    best[states] = np.bincount(position.reshape(-1), minlength=len(states))
    proven = _Proven(best, limit, len(right))
    for index in np.flatnonzero(kept.any(axis=1)).tolist():
        state, start = int(states[index]), int(rights[first[index]])
        columns = np.flatnonzero(kept[index])
        live = columns[right[start, columns] >= 0]
        walk = _walk(proven.column(right, int(live[0] if len(live) else columns[0])), start, proven)
        if proven.raise_to(state, len(walk)) or _images(left, right, state, np.array(walk), proven):
            return True
        if proven.steps > MAX_WALK_STEPS or proven.images > MAX_IMAGES:
            return False
    return False


class _Proven:
    """The pairs proven per left state and their sum against the limit, and the work the bound has done."""

    def __init__(self, best: np.ndarray, limit: int, right_states: int) -> None:
        self.best, self.limit = best, limit
        self.total = int(best.sum())
        self.images = self.steps = 0
        self.stamps = np.zeros(right_states, dtype=np.int64)
        self.columns: dict[int, list[int]] = {}

    def column(self, right: np.ndarray, column: int) -> list[int]:
        """A column of the right table as a list, made once per bound."""
        if column not in self.columns:
            self.columns[column] = right[:, column].tolist()
        return self.columns[column]

    def raise_to(self, state: int, pairs: int) -> bool:
        """At least `pairs` pairs with left state `state`; True once the sum passes the limit."""
        if pairs > self.best[state]:
            self.total += pairs - int(self.best[state])
            self.best[state] = pairs
        return self.total > self.limit

    def distinct(self, states: np.ndarray) -> np.ndarray:
        """The live states among `states`, each once (one numpy pass each, no sort): every position writes its
        index at its state, and the one index a state keeps marks its one copy."""
        states = states[states >= 0]
        order = np.arange(len(states))
        self.stamps[states] = order
        return states[self.stamps[states] == order]


def _walk(moves: list[int], start: int, proven: _Proven) -> list[int]:
    """The distinct states of `start`'s walk along `moves` (a column of the right table): `start` and the states
    its live moves reach until one dies or comes back to a state (or the steps allowed run out)."""
    walk, seen, state = [start], {start}, start
    while proven.steps <= MAX_WALK_STEPS:
        proven.steps += 1
        state = moves[state]
        if state < 0 or state in seen:
            break
        seen.add(state)
        walk.append(state)
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
