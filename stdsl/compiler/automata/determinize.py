"""Subset construction over byte equivalence classes, with a state budget.

Bytes that no byte set of the NFA tells apart form one class, so the DFA is built over
the (usually few dozen) classes instead of 256 bytes.  A DFA state is the set of
"important" NFA states (those with a byte edge, and the accepting state) in an epsilon
closure; closures are found once per NFA state (`epsilon_closures`) and memoized per kernel (set of move targets).

States are expanded a breadth-first level at a time (at most `LEVEL_CHUNK` states per step, so
the compile deadline is checked often).  A wide level is expanded with numpy
(every member's class moves gathered, sorted and cut into one kernel per state and class,
equal kernels found by hash and then compared element by element, so no collision can merge
two); a narrow level (a chain of literal bytes) is cheaper in plain Python, one move per byte set
when a state's sets are disjoint.  Both number new states in order of (state, class) first reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import chain, compress
from operator import not_

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.epsilon_closures import EpsilonClosures
from stdsl.compiler.automata.nfa import NFA, build_nfa
from stdsl.compiler.automata.state_graph import distinct_values, splitmix64
from stdsl.compiler.automata.symbol_classes import symbol_classes
from stdsl.compiler.automata.table_blocks import concatenated, dead_table
from stdsl.compiler.deadline import check_deadline, released, released_keys
from stdsl.errors import StateBudgetError

DEFAULT_MAX_STATES = 200_000
WIDE_LEVEL_MEMBERS = 384
"""A level of fewer states and members than this is expanded in plain Python: over the subset constructions of every
10th MaskBench file, 384 took 0.79-0.88 of the time 48 took on those below 1,000 states and 0.74-0.91 on the 46
above (four runs each), and 0.61 on a regex of 6,670 states: a level of a few hundred members costs numpy more
than Python."""
LEVEL_CHUNK = 2048
NARROW_MEMBERS_PER_CHECK = WIDE_LEVEL_MEMBERS
"""Members of the states found between two deadline checks in narrow levels (checked at a level's start): with the
level then begun, at most twice what one narrow level may hold, which a check per level bounded before.  A
literal's chain is a level per byte of a member or two, and a check per level was 5,000 checks in the subset
constructions of a 128-tool grammar's pieces."""
MOVES_CHUNK = 1 << 15
"""NFA states whose class moves are gathered between two deadline checks (about 50 ms)."""
RELEASE_SECONDS_PER_MEMBER = 40e-9
"""About how long freeing a refused subset construction takes per member of its states (measured 37 ns): the
deadline checks count it, so a refusal returns within the limit."""


def over_budget(max_states: int) -> StateBudgetError:
    """The refusal of a DFA that needs more than `max_states` states, with what the user can do about it."""
    return StateBudgetError(
        f"determinization needs more than {max_states:,} DFA states (the budget); the constraint is too large to "
        "enforce as a DFA: bound or simplify repetitions (e.g. a fixed-length suffix after an unbounded loop), or "
        "raise max_states")


@dataclass
class ClassDFA:
    """A DFA over byte classes: `table[q, c]` is the next state on class `c` (-1 dead), start 0.

    `byte_class[b]` is the class of byte `b`; classes are numbered in order of their smallest byte.
    """

    table: np.ndarray
    accepting: np.ndarray
    byte_class: np.ndarray
    all_live: bool = False
    """Every state is known to reach acceptance (a chain layout's output is trim by construction), so shrinking it
    skips that search (`minimize.trim`)."""
    in_bfs_order: bool = False
    """Whether the states are numbered in `minimize.bfs_order` from 0 already (as the subset construction numbers
    them), so that a trim need not renumber them."""

    def byte_table(self) -> np.ndarray:
        """The same transitions indexed by byte: shape (num_states, 256)."""
        return self.table[:, self.byte_class]


NO_MEMBERS: frozenset[int] = frozenset()


class _Subsets:
    """The growing DFA: its states (closed sets of NFA states), their numbers, and the kernel memo (a kernel of one
    target, most of them, in a list by that target rather than a dict by tuple)."""

    def __init__(self, nfa: NFA, max_states: int) -> None:
        self.nfa = nfa
        self.max_states = max_states
        self.closures = EpsilonClosures(nfa)
        self.memo = self.closures.memo
        self.unions: dict[tuple[int, ...], frozenset[int]] = {}
        start = self.closures.of(nfa.start)
        self.states: list[frozenset[int]] = [start]
        self.members = len(start)
        self.state_ids: dict[frozenset[int], int] = {start: 0}
        self.kernel_ids: dict[tuple[int, ...], int] = {}
        self.single_ids: list[int] = [-1] * nfa.num_states
        self.bfs_order = True
        """Whether states are numbered in order of (state, class) first reached (`minimize.bfs_order`'s); a kernel
        hash collision in a wide level numbers the colliding kernels last and clears it."""

    @property
    def releasing(self) -> float:
        """About how long freeing the states built so far would take (seconds)."""
        return self.members * RELEASE_SECONDS_PER_MEMBER

    def state_of(self, kernel: tuple[int, ...]) -> int:
        """The DFA state reached on a kernel (sorted move targets), added if new."""
        if len(kernel) == 1:
            single = self.single_ids[kernel[0]]
            return single if single >= 0 else self.single_state(kernel[0])
        found = self.kernel_ids.get(kernel)
        if found is not None:
            return found
        number = self._numbered(self._closed(kernel))
        self.kernel_ids[kernel] = number
        return number

    @cached_property
    def not_own_closures(self) -> set[int]:
        """The NFA states whose closure is not the set of themselves: those with epsilon moves, and those without
        moves that do not accept (found with C loops over the NFA's lists)."""
        nfa = self.nfa
        states = range(nfa.num_states)
        found = set(compress(states, nfa.eps))
        found.update(compress(states, map(not_, nfa.edges)))
        if not nfa.eps[nfa.accept]:
            found.discard(nfa.accept)
        return found

    def _closed(self, kernel: tuple[int, ...]) -> frozenset[int]:
        """The union of the closures of `kernel`'s targets.  A target without epsilon moves is its own closure (if
        important) and is added as it is: a frozenset of one per such target was most of the closures made (22,301
        for tmlanguage's largest body, whose DFA has 1,733 states), and the collections they set off.  The union of
        the other targets' closures is kept per tuple of them: they recur (that body's 1,634 kernels hold 138
        tuples, whose closures are two thirds of the members).  A kernel of targets that are all their own closures is
        its set as it is (three in four kernels of `Github_ultra---o48404`'s largest body, of nine targets each)."""
        if self.not_own_closures.isdisjoint(kernel):
            return frozenset(kernel)
        nfa = self.nfa
        eps, edges, accept = nfa.eps, nfa.edges, nfa.accept
        plain: list[int] = []
        searched: list[int] = []
        for target in kernel:
            if eps[target]:
                searched.append(target)
            elif edges[target] or target == accept:
                plain.append(target)
        if not searched:
            return frozenset(plain)
        key = tuple(searched)
        union = self.unions.get(key)
        if union is None:
            memo, closure_of = self.memo, self.closures.of
            union = self.unions[key] = frozenset().union(*[memo[t] or closure_of(t) for t in searched])
        return union.union(plain) if plain else union

    def single_state(self, target: int) -> int:
        """`state_of((target,))` where that kernel is not known yet (`_numbered` written out for a new state: most
        of an object's states are one literal byte's).  A target without epsilon moves is its own closure, made here
        without a call or a memo entry: it is reached as a kernel of one once, and only closures with epsilon moves
        are read from the memo again (`_closed`)."""
        nfa = self.nfa
        if nfa.eps[target]:
            closed = self.memo[target] or self.closures.of(target)
        elif nfa.edges[target] or target == nfa.accept:
            closed = frozenset((target,))
        else:
            closed = NO_MEMBERS
        found = self.state_ids.get(closed)
        if found is None:
            found = len(self.states)
            if found >= self.max_states or found & 255 == 0:
                found = self._numbered(closed)
            else:
                self.state_ids[closed] = found
                self.states.append(closed)
                self.members += len(closed)
        self.single_ids[target] = found
        return found

    def release(self) -> None:
        """Drop the states' sets, the kernels and the closures a block at a time (`deadline.released`)."""
        stage = "freeing the subset construction"
        self.state_ids.clear()
        self.single_ids = []
        released_keys(self.kernel_ids, stage)
        released_keys(self.unions, stage)
        released(self.states, stage)
        released(self.memo, stage)

    def _numbered(self, closed: frozenset[int]) -> int:
        """The number of the DFA state `closed`, added if new."""
        found = self.state_ids.get(closed)
        if found is None:
            found = len(self.states)
            if found >= self.max_states:
                raise over_budget(self.max_states)
            if found & 255 == 0:
                check_deadline("determinization", self.releasing)
            self.state_ids[closed] = found
            self.states.append(closed)
            self.members += len(closed)
        return found


class _ClassMoves:
    """Every NFA byte edge by byte set (for narrow levels) and, built on first use, expanded to its classes and
    grouped by source state (CSR arrays, for wide levels): a small automaton never needs the arrays."""

    def __init__(self, nfa: NFA, set_classes: list[list[int]], set_masks: list[int], num_classes: int) -> None:
        self.nfa = nfa
        self.set_classes = set_classes
        self.num_classes = num_classes
        self.set_masks = set_masks
        self.set_first = [classes[0] if classes else num_classes for classes in set_classes]

    @cached_property
    def set_layout(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The byte sets' classes as CSR arrays: (starts, sizes, the classes of every set concatenated)."""
        sizes = np.array([len(c) for c in self.set_classes], dtype=np.int64)
        starts = np.zeros(len(self.set_classes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        flat = np.fromiter(chain.from_iterable(self.set_classes), dtype=np.int64, count=int(starts[-1]))
        return starts, sizes, flat

    def expand(self, sets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The classes of each of `sets` concatenated, and how many each has."""
        starts, sizes, flat = self.set_layout
        counts = sizes[sets]
        return flat[np.repeat(starts[sets], counts) + _positions_within(counts)], counts

    @cached_property
    def class_moves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every (state, class) move as CSR arrays `(indptr, classes, targets)`, and a 64-bit salt per state.
        Gathered `MOVES_CHUNK` states at a time, checking the deadline between (an NFA of 600,000 states took a
        second at once); the (set, target) pairs are read as a flat run of ints (an array of the pair tuples took
        twice as long)."""
        edges, num_states = self.nfa.edges, self.nfa.num_states
        per_state = np.zeros(num_states, dtype=np.int64)
        class_parts, target_parts = [], []
        for lo in range(0, num_states, MOVES_CHUNK):
            check_deadline("determinization")
            out = edges[lo:lo + MOVES_CHUNK]
            sizes = np.fromiter(map(len, out), dtype=np.int64, count=len(out))
            pairs = np.fromiter(chain.from_iterable(chain.from_iterable(out)), dtype=np.int64,
                                count=2 * int(sizes.sum())).reshape(-1, 2)
            classes, counts = self.expand(pairs[:, 0])
            per_state[lo:lo + len(out)] = np.bincount(np.repeat(np.arange(len(out)), sizes), weights=counts,
                                                      minlength=len(out))
            class_parts.append(classes)
            target_parts.append(np.repeat(pairs[:, 1], counts))
        indptr = np.zeros(num_states + 1, dtype=np.int64)
        np.cumsum(per_state, out=indptr[1:])
        classes = concatenated(class_parts, "determinization") if class_parts else np.zeros(0, dtype=np.int64)
        targets = concatenated(target_parts, "determinization") if target_parts else np.zeros(0, dtype=np.int64)
        check_deadline("determinization")
        return indptr, classes, targets, splitmix64(np.arange(num_states + 1, dtype=np.uint64))


def _positions_within(counts: np.ndarray) -> np.ndarray:
    """0..count-1 for each count, concatenated."""
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _narrow_levels(subsets: _Subsets, moves: _ClassMoves, lo: int, before: int, found: list[list[int]],
                   found_sets: list[list[int]]) -> tuple[int, int]:
    """The moves of the states from `lo` on, a breadth-first level at a time and one state at a time, while levels
    stay narrow (fewer than `WIDE_LEVEL_MEMBERS` states and members; `before` counts the members of the states
    before `lo`): a narrow level holds a few states, so a table block of its own would cost more than them.
    Returns where the next level starts and the members before it (the caller expands a wide level, or is done).

    When a state's byte sets are disjoint or equal (as in a string's loop) each set is one move, appended to
    `found_sets` as (state, set, target) columns (`_by_set`); otherwise each class is, to `found`.  A state of one
    NFA state with one move (a key's or a literal's next byte: most states of an object) is that move, taken
    without grouping."""
    states = subsets.states
    edges = subsets.nfa.edges
    masks = moves.set_masks
    single_ids, single_state = subsets.single_ids, subsets.single_state
    sources, sets, targets = found_sets
    checked = -NARROW_MEMBERS_PER_CHECK
    while True:
        hi = len(states)
        if lo == hi or hi - lo >= WIDE_LEVEL_MEMBERS or subsets.members - before >= WIDE_LEVEL_MEMBERS:
            return lo, before
        if subsets.members - checked >= NARROW_MEMBERS_PER_CHECK:
            check_deadline("determinization", subsets.releasing)
            checked = subsets.members
        before = subsets.members
        for state in range(lo, hi):
            members = states[state]
            if len(members) == 1:
                (member,) = members
                out = edges[member]
                if len(out) == 1:
                    set_index, target = out[0]
                    if masks[set_index]:
                        sources.append(state)
                        sets.append(set_index)
                        reached = single_ids[target]
                        targets.append(reached if reached >= 0 else single_state(target))
                    continue
            if not _by_set(subsets, moves, state, members, found_sets):
                _classwise(subsets, moves, state, members, found)
        lo = hi


def _by_set(subsets: _Subsets, moves: _ClassMoves, state: int, members: frozenset[int],
            found_sets: list[list[int]]) -> bool:
    """The moves of one state a byte set at a time, appended to `found_sets` in order of each set's first class,
    where the members' sets are disjoint or equal (a set met twice moves to the union of its targets); False
    (nothing appended) where two different sets overlap.  One pass over the members' edges: a JSON string's loop
    is a state of 8 members and 10 disjoint sets, which a dict of sets and a sort by a key function took longer
    over."""
    masks, first = moves.set_masks, moves.set_first
    met: list[tuple[int, int, int]] = []
    shared: dict[int, list[int]] | None = None
    covered = 0
    edges = subsets.nfa.edges
    for member in members:
        for set_index, target in edges[member]:
            mask = masks[set_index]
            if covered & mask:
                if shared is None:
                    shared = {}
                if set_index in shared:
                    shared[set_index].append(target)
                    continue
                for _, met_set, met_target in met:
                    if met_set == set_index:
                        shared[set_index] = [met_target, target]
                        break
                else:
                    return False
                continue
            if mask:
                covered |= mask
                met.append((first[set_index], set_index, target))
    met.sort()
    sources, sets, targets = found_sets
    single_ids, single_state = subsets.single_ids, subsets.single_state
    for _, set_index, target in met:
        sources.append(state)
        sets.append(set_index)
        if shared is not None and set_index in shared:
            targets.append(subsets.state_of(tuple(sorted(set(shared[set_index])))))
        else:
            reached = single_ids[target]
            targets.append(reached if reached >= 0 else single_state(target))
    return True


def _classwise(subsets: _Subsets, moves: _ClassMoves, state: int, members: frozenset[int],
               found: list[list[int]]) -> None:
    """The moves of one state class by class, appended to `found` as (state, class, target) columns.

    The members' targets are gathered per byte set, and a class's kernel is that of the sets holding it, made once
    per distinct group of sets: a JSON string's character sets span dozens of classes, which each member's moves
    were expanded to one by one (tmlanguage's bodies: 417 such states).  The groups are found by splitting the
    classes' masks by each set's (a few blocks per set), where listing every set's classes cost a dict entry per
    class and set; they are numbered in order of their smallest class, the order the classes reach them."""
    sources, classes, targets = found
    edges, masks = subsets.nfa.edges, moves.set_masks
    by_set: dict[int, list[int]] = {}
    for member in members:
        for set_index, target in edges[member]:
            if set_index in by_set:
                by_set[set_index].append(target)
            else:
                by_set[set_index] = [target]
    blocks: list[tuple[int, list[int]]] = []
    for set_index in by_set:
        mask = rest = masks[set_index]
        refined: list[tuple[int, list[int]]] = []
        for block, holding in blocks:
            inside = block & mask
            if inside:
                rest ^= inside
                if inside != block:
                    refined.append((block ^ inside, holding))
                refined.append((inside, [*holding, set_index]))
            else:
                refined.append((block, holding))
        if rest:
            refined.append((rest, [set_index]))
        blocks = refined
    for block, holding in sorted(blocks, key=lambda entry: entry[0] & -entry[0]):
        kernel = set(by_set[holding[0]]) if len(holding) == 1 else set(chain.from_iterable(
            by_set[set_index] for set_index in holding))
        number = subsets.state_of(tuple(sorted(kernel)))
        while block:
            lowest = block & -block
            sources.append(state)
            classes.append(lowest.bit_length() - 1)
            targets.append(number)
            block ^= lowest


def _wide_level(subsets: _Subsets, moves: _ClassMoves, lo: int, hi: int) -> np.ndarray:
    """Rows of states lo..hi-1 at once: gather all class moves, cut them into kernels, number each distinct kernel.

    A move is sorted as one int64, (state, class) times the NFA's states plus its target (`LEVEL_CHUNK` states by
    the classes by `MAX_NFA_STATES`: within 2^63 below 2^31 classes): a lexsort of the two columns was a sixth of
    the level."""
    level = subsets.states[lo:hi]
    sizes = np.fromiter((len(s) for s in level), dtype=np.int64, count=hi - lo)
    members = np.fromiter(chain.from_iterable(level), dtype=np.int64, count=int(sizes.sum()))
    owners = np.repeat(np.arange(hi - lo, dtype=np.int64), sizes)
    indptr, move_classes, move_targets, salt = moves.class_moves
    starts = indptr[members]
    lengths = indptr[members + 1] - starts
    index = np.repeat(starts, lengths) + _positions_within(lengths)
    keys = np.repeat(owners, lengths) * moves.num_classes + move_classes[index]
    width = subsets.nfa.num_states
    moves_sorted = distinct_values(keys * width + move_targets[index])
    keys, targets = moves_sorted // width, moves_sorted % width
    rows = np.full((hi - lo, moves.num_classes), -1, dtype=np.int64)
    if not len(keys):
        return rows
    cut = np.ones(len(keys), dtype=bool)
    cut[1:] = keys[1:] != keys[:-1]
    seg_start = np.flatnonzero(cut)
    seg_len = np.diff(np.append(seg_start, len(keys)))
    hashes = np.add.reduceat(salt[targets], seg_start) ^ salt[np.minimum(seg_len, len(salt) - 1)]
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    representative = first[inverse.reshape(-1)]
    same = seg_len == seg_len[representative]
    other = np.repeat(seg_start[representative], seg_len) + _positions_within(seg_len)
    equal = targets[np.minimum(other, len(targets) - 1)] == targets
    same &= np.logical_and.reduceat(equal, seg_start)
    kernel_targets, kernel_bounds = _segments(targets, seg_start[first], seg_len[first])
    known = subsets.kernel_ids.get
    kernel_states = [0] * len(first)
    for done, kernel in enumerate(np.argsort(first).tolist()):
        if done & 1023 == 1023:
            check_deadline("determinization", subsets.releasing)
        moves_to = tuple(kernel_targets[kernel_bounds[kernel]:kernel_bounds[kernel + 1]])
        found = known(moves_to)
        kernel_states[kernel] = subsets.state_of(moves_to) if found is None else found
    seg_state = np.array(kernel_states, dtype=np.int64)[inverse.reshape(-1)]
    colliding = np.flatnonzero(~same)
    if len(colliding):
        subsets.bfs_order = False
        colliding_targets, colliding_bounds = _segments(targets, seg_start[colliding], seg_len[colliding])
        for number, segment in enumerate(colliding.tolist()):
            moves_to = tuple(colliding_targets[colliding_bounds[number]:colliding_bounds[number + 1]])
            seg_state[segment] = subsets.state_of(moves_to)
    seg_keys = keys[seg_start]
    rows[seg_keys // moves.num_classes, seg_keys % moves.num_classes] = seg_state
    return rows


def _segments(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[list[int], list[int]]:
    """The segments `values[start:start + length]` concatenated as a list, with their bounds in it (segment i is
    `bounds[i]:bounds[i + 1]`): a level's distinct kernels are a few percent of its segments (tmlanguage's largest
    body: 2,728 of 74,685), so only theirs are made Python ints."""
    bounds = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    return values[np.repeat(starts, lengths) + _positions_within(lengths)].tolist(), bounds.tolist()


def determinize(nfa: NFA, max_states: int = DEFAULT_MAX_STATES, alphabet: int = 256) -> ClassDFA:
    """The subset-construction DFA of `nfa` over symbol classes (`alphabet` > 256 adds call symbols).

    Raises `StateBudgetError` as soon as more than `max_states` DFA states would be needed.
    """
    byte_class, set_classes, set_masks = symbol_classes(nfa.byte_sets, alphabet)
    num_classes = int(byte_class.max()) + 1
    moves = _ClassMoves(nfa, set_classes, set_masks, num_classes)
    subsets = _Subsets(nfa, max_states)
    wide: list[tuple[int, np.ndarray]] = []
    narrow: list[list[int]] = [[], [], []]
    narrow_sets: list[list[int]] = [[], [], []]
    lo = before = 0
    try:
        while True:
            lo, before = _narrow_levels(subsets, moves, lo, before, narrow, narrow_sets)
            if lo == len(subsets.states):
                break
            check_deadline("determinization", subsets.releasing)
            hi = min(len(subsets.states), lo + LEVEL_CHUNK)
            before = (subsets.members if hi == len(subsets.states)
                      else before + sum(map(len, subsets.states[lo:hi])))
            wide.append((lo, _wide_level(subsets, moves, lo, hi)))
            lo = hi
    except StateBudgetError:
        _release(subsets, *narrow, *narrow_sets)
        raise
    table = dead_table((len(subsets.states), num_classes), np.int32, "determinization", subsets.releasing)
    if narrow[0]:
        table[narrow[0], narrow[1]] = narrow[2]
    check_deadline("determinization", subsets.releasing)
    sources, sets, targets = (np.array(column, dtype=np.int64) for column in narrow_sets)
    classes, counts = moves.expand(sets)
    table[np.repeat(sources, counts), classes] = np.repeat(targets, counts)
    for lo, rows in wide:
        check_deadline("determinization", subsets.releasing)
        table[lo:lo + len(rows)] = rows
    check_deadline("determinization", subsets.releasing)
    accepting = np.array([nfa.accept in state for state in subsets.states], dtype=bool)
    _release(subsets, *narrow, *narrow_sets)
    return ClassDFA(table, accepting, byte_class, in_bfs_order=subsets.bfs_order)


def _release(subsets: _Subsets, *columns: list[int]) -> None:
    """Free a finished or refused construction a block at a time with deadline checks (`deadline.released`): its
    state sets, kernels and closures and the narrow levels' move columns.  Freed at once when the last reference
    went, MCPspec---ServerResult's largest body (92,418 states of 504,365 members) took 0.075 s of CPU without a
    check."""
    subsets.release()
    for column in columns:
        released(column, "freeing the subset construction")


def determinize_expression(node: ir.Node, max_states: int = DEFAULT_MAX_STATES, alphabet: int = 256) -> ClassDFA:
    """`determinize` of `node`'s NFA, built for the call and freed a block at a time with deadline checks once the
    construction is done or refused over budget (that NFA of MCPspec's, 199,858 states, took 0.037 s of CPU to free
    at once).  A refusal at the time limit frees it as it unwinds, as `releasing` allows for."""
    nfa = build_nfa(node)
    try:
        dfa = determinize(nfa, max_states, alphabet)
    except StateBudgetError:
        _release_nfa(nfa)
        raise
    _release_nfa(nfa)
    return dfa


def _release_nfa(nfa: NFA) -> None:
    """Empty an NFA's move lists a block at a time (`deadline.released`)."""
    released(nfa.edges, "freeing the NFA")
    released(nfa.eps, "freeing the NFA")
