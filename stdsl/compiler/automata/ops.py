"""Operations on compiled automata: intersection, concatenation, step edges, and the exact "ends before this
literal" language.

A template field followed by literal text L must end exactly where L begins.  The strings
f for which L first occurs in f·L at |f| form a regular language (Proposition 3 of the paper
generalizes to any literal through the Knuth–Morris–Pratt automaton of L); intersecting a
field with it bounds the field exactly, without losing any string that could be read back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.minimization.minimize import minimize, trim
from stdsl.compiler.automata.product_bound import BOUND_GROWTH, first_bound_at, reaches_more_than
from stdsl.compiler.automata.state_graph import distinct_values
from stdsl.compiler.automata.table_blocks import BLOCK_CELLS, dead_table, taken
from stdsl.compiler.deadline import check_deadline
from stdsl.errors import StateBudgetError


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


def common_classes(a: Automaton, b: Automaton) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The byte classes of a product: one per distinct pair (class in `a`, class in `b`), numbered by first byte (so
    a minimal product table is numbered as one built byte by byte would be).

    Returns each byte's product class and, per product class, its column in `a` and in `b`.
    """
    pairs = a.byte_class.astype(np.int64) * b.num_classes + b.byte_class
    unique_pairs, first_byte, byte_class = np.unique(pairs, return_index=True, return_inverse=True)
    order = np.argsort(first_byte)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    ordered = unique_pairs[order]
    return rank[byte_class.reshape(-1)], ordered // b.num_classes, ordered % b.num_classes


def intersect(a: Automaton, b: Automaton, max_states: int | None = None) -> Automaton:
    """The minimal automaton of L(a) ∩ L(b) (product construction over reachable pairs, on their common classes).

    Pairs are expanded a breadth-first level at a time with numpy.  Raises StateBudgetError when more
    than `max_states` pairs are reachable.  A level keeps its live moves only (most of a product's cells are dead;
    int32 under a budget that bounds them), and the table is written once the search ends; the tables are read at
    their stored width: a fresh or forked process pays a page fault for each 4 KB it first writes, and the int64
    copies of the tables and of every level's row block were 23,500 minor faults of a refused intersection
    (MaskBench o21053, forked: 0.22 s of user+system CPU, 0.14 s now).  Past a share of the budget the pairs met
    are checked against it by `product_bound.reaches_more_than`, which proves such a refusal before its search.
    """
    byte_class, column_a, column_b = common_classes(a, b)
    ta, tb = a.class_transitions[:, column_a], b.class_transitions[:, column_b]
    width = np.int64(max(b.num_states, 1))
    classes = len(column_a)
    level = np.zeros(1, dtype=np.int64)
    levels: list[np.ndarray] = []
    numbering = _PairNumbering(a.num_states * int(width))
    cells: list[np.ndarray] = []
    moves: list[np.ndarray] = []
    first_cell = 0
    narrow = max_states is not None and (max_states + 1) * max(classes, 1) < np.iinfo(np.int32).max
    index_type = np.int32 if narrow else np.int64
    bound_at = first_bound_at(max_states or 0)
    while len(level):
        check_deadline("intersection")
        levels.append(level)
        na, nb = ta[level // width].reshape(-1), tb[level % width].reshape(-1)
        live = np.flatnonzero((na >= 0) & (nb >= 0))
        ids, level = numbering.numbered_moves(na[live] * width + nb[live])
        if max_states is not None and numbering.count > min(bound_at, max_states):
            if numbering.count > max_states or reaches_more_than(ta, tb, int(width), np.concatenate([*levels, level]),
                                                                 max_states):
                raise StateBudgetError(f"the intersection needs more than {max_states:,} product states")
            bound_at *= BOUND_GROWTH
        cells.append((live + first_cell).astype(index_type))
        moves.append(ids.astype(index_type))
        first_cell += len(na)
    keys = np.concatenate(levels)
    accepting = a.accepting[keys // width] & b.accepting[keys % width]
    table = _written_table(len(keys), classes, cells, moves)
    check_deadline("intersection")
    table, accepting = minimize(table, accepting, all_reachable=True)
    return Automaton.from_classes(table, accepting, byte_class)


def _written_table(states: int, classes: int, cells: list[np.ndarray], moves: list[np.ndarray]) -> np.ndarray:
    """The product's (states, classes) table: dead but for each level's live cells (flat indices) and their moves,
    written `BLOCK_CELLS` at a time with a deadline check between (a 0.47 s stretch at once for MaskBench
    sourcery_yaml's refused product on a loaded machine)."""
    table = dead_table((states, classes), np.int64, "intersection")
    flat = table.reshape(-1)
    written = 0
    for level_cells, level_moves in zip(cells, moves):
        flat[level_cells] = level_moves
        written += len(level_cells)
        if written >= BLOCK_CELLS:
            check_deadline("intersection")
            written = 0
    return table


DENSE_PAIRS_UP_TO = 1 << 22
"""A product of at most this many pairs numbers them in an array indexed by pair (`_PairNumbering`), past it in
sorted arrays: 4M pairs is 32 MB of int64, filled in a few milliseconds."""


class _PairNumbering:
    """Numbers for the product pairs a breadth-first search meets, a level's new pairs after every pair met before
    (pair 0, both starts, is number 0; within a level in ascending order where the pairs are sorted).  A level is
    numbered with numpy calls, in a dense array of the `pairs` possible or, for a large product, by a search in the
    sorted pairs met so far; a Python loop per pair took a third of a refused string intersection's time
    (MaskBench o21053: 200,000 pairs, 1.4 million pairs met again).  The sorted pairs are two runs, the older and
    the recent ones: a level's new pairs go into the recent run, which joins the older one once it holds half as
    many, so most levels copy the recent run and not every pair met (inserting into one run, a fresh array per
    level, was 0.06 s of o21053's 0.33 s in a fresh process, 0.04 s this way: the page faults of the fresh arrays
    were most of it)."""

    def __init__(self, pairs: int) -> None:
        self.count = 1
        self.dense: np.ndarray | None = None
        self.keys = np.zeros(1, dtype=np.int64)
        self.numbers = np.zeros(1, dtype=np.int64)
        self.recent_keys = np.zeros(0, dtype=np.int64)
        self.recent_numbers = np.zeros(0, dtype=np.int64)
        if pairs <= DENSE_PAIRS_UP_TO:
            self.dense = dead_table((max(pairs, 1), 1), np.int64, "intersection").reshape(-1)
            self.dense[0] = 0

    def numbered_moves(self, moves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The number of the pair of each of a level's `moves` (pairs repeat; new ones numbered now) and the new
        pairs.  In the dense array a level's new pairs are found without sorting the moves (mark each unmet pair
        with a move's index: one move per pair keeps its mark), numbered in no particular order: the product is
        minimized, whose table does not depend on it (a sort per level was a fifth of o82829's intersections, a
        level per byte of a 255-character string)."""
        dense = self.dense
        if dense is None:
            fresh, inverse = np.unique(moves, return_inverse=True)
            ids, new = self.number(fresh)
            return ids[inverse.reshape(-1)], new
        unmet = moves[dense[moves] < 0]
        marks = np.arange(len(unmet), dtype=np.int64)
        dense[unmet] = marks
        new = unmet[dense[unmet] == marks]
        dense[new] = np.arange(self.count, self.count + len(new), dtype=np.int64)
        self.count += len(new)
        return dense[moves], new

    def number(self, fresh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The numbers of the sorted distinct pairs `fresh` (new ones numbered now) and the new pairs, in order,
        from the sorted pairs met so far."""
        older, older_ids = _found_in(self.keys, self.numbers, fresh)
        at = np.searchsorted(self.recent_keys, fresh)
        recent, recent_ids = _found_in(self.recent_keys, self.recent_numbers, fresh, at)
        ids = older * older_ids + recent * recent_ids
        unmet = ~(older | recent)
        new = fresh[unmet]
        numbers = np.arange(self.count, self.count + len(new), dtype=np.int64)
        ids[unmet] = numbers
        self.count += len(new)
        if len(new):
            self.recent_keys = np.insert(self.recent_keys, at[unmet], new)
            self.recent_numbers = np.insert(self.recent_numbers, at[unmet], numbers)
            if 2 * len(self.recent_keys) >= len(self.keys):
                into = np.searchsorted(self.keys, self.recent_keys)
                self.keys = np.insert(self.keys, into, self.recent_keys)
                self.numbers = np.insert(self.numbers, into, self.recent_numbers)
                self.recent_keys, self.recent_numbers = self.recent_keys[:0], self.recent_numbers[:0]
        return ids, new


def _found_in(keys: np.ndarray, numbers: np.ndarray, wanted: np.ndarray, at: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Which of `wanted` are among the sorted `keys` (at `at`, their `searchsorted` places, when given), and the
    number of each found one (0 for the others)."""
    if not len(keys):
        return np.zeros(len(wanted), dtype=bool), np.zeros(len(wanted), dtype=np.int64)
    clipped = np.minimum(np.searchsorted(keys, wanted) if at is None else at, len(keys) - 1)
    found = keys[clipped] == wanted
    return found, numbers[clipped]


def intersect_beside_start(a: Automaton, b: Automaton, minimal: bool = True) -> Automaton:
    """`intersect(a, b)` for a small `b` that spends most of a text in its start state (text free of a few
    literals): every pair (state of `a`, start of `b`) is taken at once, and a search runs only over the pairs
    where `b` has left its start (a literal begun), a few levels deep, instead of one level per byte of `a`'s
    longest path.  Pairs never reached are dropped by the minimization, so the result equals `intersect`'s; with
    `minimal` False they are dropped by a trim alone (the same language, minimal wherever no pair of `a`'s states
    differs only in texts that hold a literal of `b`: as `shrink` leaves a large DFA trimmed)."""
    byte_class, column_a, column_b = common_classes(a, b)
    ta = a.class_transitions.astype(np.int64)[:, column_a]
    tb = b.class_transitions.astype(np.int64)[:, column_b]
    table, pairs, width = product_beside_start(ta, tb, "intersection")
    table = table.astype(np.int64, copy=False)
    accepting = a.accepting[pairs // width] & b.accepting[pairs % width]
    table, accepting = minimize(table, accepting) if minimal else trim(table, accepting)
    return Automaton.from_classes(table, accepting, byte_class)


def concatenation(parts: Sequence[bytes | Automaton]) -> Automaton | None:
    """The trim DFA of literals and automata read one after another, laid out without a subset construction, or
    None where that would need one: an automaton that accepts the empty string, or one before the last that reads
    on from an accepting state with a byte the next part can begin with.  Otherwise an accepting state of such a
    part takes the next part's first moves beside its own (no byte is in both), so the result is deterministic and
    a run leaves the part exactly where it reads a byte the part cannot; it is not minimized.  The parts must be
    trim (as `build_automaton` returns them): then the only states no move enters are the parts' starts whose rows
    were copied, and dropping those leaves the result trim with no search.  The table is laid out over the byte
    classes that refine every part's (`joint_classes`), never over 256 bytes."""
    for index, part in enumerate(parts):
        if isinstance(part, Automaton) and (bool(part.accepting[0]) or (
                index < len(parts) - 1 and bool((part.live_count[part.accepting] > 0).any())
                and _first_bytes(parts[index + 1:]) & _bytes_read_on(part))):
            return None
    automata = [part for part in parts if isinstance(part, Automaton)]
    joint, first = joint_classes([part.byte_class for part in automata],
                                 {byte for part in parts if isinstance(part, bytes) for byte in part})
    size = 1 + sum(len(part) if isinstance(part, bytes) else part.num_states for part in parts)
    table = np.full((size, len(first)), -1, dtype=np.int64)
    ends, base = [0], 1
    for part in parts:
        if isinstance(part, bytes):
            if part:
                table[ends, joint[part[0]]] = base
                table[np.arange(base, base + len(part) - 1), joint[list(part[1:])]] = np.arange(base + 1,
                                                                                               base + len(part))
                base += len(part)
                ends = [base - 1]
            continue
        moved = part.class_transitions[:, part.byte_class[first]].astype(np.int64)
        moved[moved >= 0] += base
        table[base:base + len(moved)] = moved
        table[ends] = np.where(moved[0] >= 0, moved[0], table[ends])
        ends = (np.flatnonzero(part.accepting) + base).tolist()
        base += len(moved)
    accepting = np.zeros(size, dtype=bool)
    accepting[ends] = True
    entered = np.zeros(size, dtype=bool)
    entered[table[table >= 0]] = True
    entered[0] = True
    kept = np.flatnonzero(entered)
    number = np.full(size + 1, -1, dtype=np.int64)
    number[kept] = np.arange(len(kept))
    return Automaton.from_classes(number[table[kept]], accepting[kept], joint)


def _bytes_read_on(part: Automaton) -> set[int]:
    """The bytes some accepting state of `part` reads."""
    classes = (part.class_transitions[np.asarray(part.accepting)] >= 0).any(axis=0)
    return set(np.flatnonzero(classes[part.byte_class]).tolist())


def _first_bytes(parts: Sequence[bytes | Automaton]) -> set[int]:
    """The bytes the first non-empty of `parts` can begin with (none where all are empty)."""
    for part in parts:
        if isinstance(part, Automaton):
            return set(part.live_bytes(0))
        if part:
            return {part[0]}
    return set()


def joint_classes(byte_classes: list[np.ndarray], singles: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """The coarsest byte classes that refine every map of `byte_classes` and give each byte of `singles` a class of
    its own: (each byte's joint class, a byte of each joint class).  Tables laid out over them stay as narrow as
    their parts' (a few dozen columns, not 256), so nothing is expanded to bytes and merged back.  The sort is
    stable, so a class's first byte is the first of its run in the sorted order."""
    marks = np.full(256, -1, dtype=np.int64)
    marks[sorted(singles)] = sorted(singles)
    keys = np.stack([*(np.asarray(classes, dtype=np.int64) for classes in byte_classes), marks])
    order = np.lexsort(keys)
    ordered = keys[:, order]
    starts = np.ones(256, dtype=bool)
    starts[1:] = (ordered[:, 1:] != ordered[:, :-1]).any(axis=0)
    joint = np.empty(256, dtype=np.int64)
    joint[order] = np.cumsum(starts) - 1
    return joint, order[starts].astype(np.int64)


def step_edges(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (state, next state) pairs of a (num_states, k) step table with -1 for dead steps.

    Shortest-path rounds over these cost the number of edges, not states x k.  Each row is sorted on its own and
    its repeats dropped (sorted by state, then next state), which is cheaper than one sort of all the pairs.
    """
    ordered = np.sort(table, axis=1)
    keep = ordered >= 0
    keep[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    rows, columns = np.nonzero(keep)
    return rows.astype(np.int64), ordered[rows, columns].astype(np.int64)


def is_prefix_free(a: Automaton) -> bool:
    """Whether no accepted string is a proper prefix of another (no accepting state of the trim automaton reads on)."""
    return not bool((a.live_count[a.accepting] > 0).any())


def product_beside_start(ta: np.ndarray, tb: np.ndarray, stage: str) -> tuple[np.ndarray, np.ndarray, int]:
    """The product of two tables over the same classes from every pair (state of `ta`, start of `tb`), searched
    level by level: (its table, each product state's pair as `a * width + b`, `width`).  Pair (q, start) is
    product state q, so `ta`'s numbering survives for the pairs where `tb` sits in its start.  The first level is
    `ta` itself beside `tb`'s start row (no gather), keys are int32 where they fit, and a dead target (-1) reads the
    last entry of the numbering, kept -1: half the memory traffic of int64 and no mask pass over the table.  The
    table is int32 where the keys are; each level's keys are made in place and numbered in place once all are
    known, so a level as large as `ta` takes one array of its size, not the five a masked `where`, a stacking and
    an int64 copy took (a 400-tool reply's first level is 52,000 states by 67 classes: 14 MB each)."""
    width = max(len(tb), 1)
    total = len(ta)
    index: np.dtype[Any] = np.dtype(np.int32 if (total + 1) * width < 2**31 else np.int64)
    scale = np.asarray(width, dtype=index)
    keys = [np.arange(total, dtype=np.int64) * width]
    ids = np.full(total * width + 1, -1, dtype=index)
    ids[keys[0]] = np.arange(total)
    count, level = total, keys[0]
    rows: list[np.ndarray] = []
    moved, guarded = ta.astype(index, copy=False), tb[:1].astype(index)
    while len(level):
        check_deadline(stage)
        dead = (moved < 0) | (guarded < 0)
        targets = moved * scale
        targets += guarded
        targets[dead] = -1
        del dead
        rows.append(targets)
        reached = targets[targets >= 0]
        fresh = distinct_values(reached[ids[reached] < 0])
        ids[fresh] = count + np.arange(len(fresh))
        count += len(fresh)
        keys.append(fresh.astype(np.int64))
        level = keys[-1]
        moved, guarded = ta[level // width].astype(index), tb[level % width].astype(index)
    table = rows[0] if len(rows) == 1 else np.empty((sum(len(targets) for targets in rows), ta.shape[1]), dtype=index)
    at = 0
    for targets in rows:
        taken(ids, targets, table[at:at + len(targets)], stage)
        at += len(targets)
    return table, np.concatenate(keys), width
