"""Prefixes that rows admitted together share (the same chat template, system prompt and instructions), found so
that each is prefilled once and every row that shares it starts from a copy of its state.

A stem is such a prefix: `length` tokens that its `riders` all begin with, prefilled once from its start (the
stem it extends, or the longest prompt-cache hit among its riders, or nothing) in a pass of its own, before the
rows. Stems nest: rows that share a longer prefix inside a stem get a stem of their own, which starts from the outer
one's state. The state after exactly `length` positions is what every layer kind holds for those tokens (attention
keys and values depend only on the tokens up to theirs, a recurrent state is cut exactly there, a sliding-window
layer keeps every position while a row is prefilled), so a row started from it decodes as one prefilled alone.

A stem is made only where it pays: the positions it saves (each rider would otherwise prefill it from its own
start) must outweigh the fixed cost of the pass it adds, one in `1 / token_cost` positions (the drip rule's cost).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Stem:
    """A shared prefix of `length` tokens, prefilled once for `riders` (row indices); it starts from stem `parent`
    (an index into the plan), else from row `hit_of`'s prompt-cache hit, else from nothing; `base` is the number of
    positions that start holds, `level` how many stems it extends."""

    length: int
    riders: tuple[int, ...]
    parent: int | None
    hit_of: int | None
    base: int
    level: int


def plan_stems(queries: Sequence[Sequence[int]], hits: Sequence[int], token_cost: float) -> list[Stem]:
    """The stems worth prefilling for rows whose reusable tokens are `queries` (each row's sequence but its last
    token, which is always fed) and whose prompt-cache hits hold `hits` positions; parents before their children."""
    stems: list[Stem] = []
    _split(queries, hits, token_cost, stems, list(range(len(queries))), 0, None)
    return stems


def _split(queries: Sequence[Sequence[int]], hits: Sequence[int], token_cost: float, stems: list[Stem],
           members: list[int], depth: int, parent: int | None) -> None:
    """Find stems among `members`, which share their first `depth` tokens (inside stem `parent`, if any), appending
    them to `stems`.  A module function, not a closure that calls itself (a reference cycle per plan)."""
    groups: dict[int, list[int]] = {}
    for i in members:
        if len(queries[i]) > depth:
            groups.setdefault(queries[i][depth], []).append(i)
    outer = stems[parent].length if parent is not None else 0
    for group in groups.values():
        if len(group) < 2:
            continue
        length = _common_length(queries, group, depth)
        riders = [i for i in group if hits[i] < length]
        if len(riders) < 2:
            _split(queries, hits, token_cost, stems, group, length, parent)
            continue
        deepest = max(riders, key=lambda i: hits[i])
        hit_of = deepest if hits[deepest] > outer else None
        base = hits[deepest] if hit_of is not None else outer
        saved = sum(length - max(hits[i], outer) for i in riders) - (length - base)
        if saved * token_cost < 1:
            _split(queries, hits, token_cost, stems, group, length, parent)
            continue
        level = stems[parent].level + 1 if parent is not None else 0
        stems.append(Stem(length, tuple(riders), parent if hit_of is None else None, hit_of, base, level))
        _split(queries, hits, token_cost, stems, riders, length, len(stems) - 1)


def deepest_stems(stems: Sequence[Stem], rows: int) -> list[int | None]:
    """For each of `rows` rows, the longest stem it rides (an index into `stems`), None where it rides none."""
    chosen: list[int | None] = [None] * rows
    for index, stem in enumerate(stems):
        for i in stem.riders:
            best = chosen[i]
            if best is None or stems[best].length < stem.length:
                chosen[i] = index
    return chosen


def common_prefix(left: Sequence[int], right: Sequence[int], known: int = 0) -> int:
    """How many leading tokens two sequences share, given that they share their first `known`."""
    k, end = known, min(len(left), len(right))
    while k < end and left[k] == right[k]:
        k += 1
    return k


def _common_length(queries: Sequence[Sequence[int]], group: Sequence[int], depth: int) -> int:
    """How many leading tokens every query in `group` shares (they share at least their first `depth` + 1)."""
    first = queries[group[0]]
    return min(common_prefix(first, queries[i], depth) for i in group[1:])
