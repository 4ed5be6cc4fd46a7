"""The subset construction over a skeleton DFA whose placeholder edges stand for other DFAs (the pieces), run only
where it can branch.

A subset of one state without an ε-move (a state inside one piece) is that state itself, laid out in bulk with
numpy, so Python only visits the subsets where several pieces, or a piece and the skeleton, are alive and the ends
of pieces.  The reply grammars substitute tool calls this way (`placeholders.py`), and the DFA compiler long
string chains (`chains.py`); this module imports nothing beyond numpy and the automaton, so a cold compile that
lays out a chain pays for no more (`placeholders.py` imports hashlib for its kept fronts).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stdsl import caches
from stdsl.compiler.automata.automaton import Automaton, columns_taken
from stdsl.compiler.automata.state_graph import distinct_values
from stdsl.compiler.automata.substitution.entered_regions import entered_region, moved_into_past_start
from stdsl.compiler.automata.table_blocks import concatenated
from stdsl.compiler.deadline import check_deadline
from stdsl.errors import EmptyLanguageError

__all__ = ["TooManyComposites", "TooManyStates", "substituted_classes"]


class TooManyComposites(Exception):
    """`substituted_classes` met more composite states than its caller allowed."""


class TooManyStates(Exception):
    """`substituted_classes`'s trim DFA would have more states than its caller allowed."""


def substituted_classes(skeleton: np.ndarray, accepting: np.ndarray, pieces: Sequence[Sequence[Automaton]],
                        symbols: int, max_composites: int | None = None, max_states: int | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trim DFA of `skeleton` (a trim (states, symbols + columns) table, start 0, -1 dead) with each edge on
    the placeholder symbol `symbols + j` from s to t replaced by any one text of `pieces[j]` (trim automata) read
    from s, ending in t, as (class table, accepting, class of each of the skeleton's own `symbols` symbols), start
    0.  Symbols past the bytes (a pushdown body's call symbols) are read by no piece.  Raises `TooManyComposites`
    past `max_composites` composite states (each costs a Python step), and `TooManyStates` once more than
    `max_states` states are found reachable (found before the pieces' copies are laid out: `_reached`)."""
    substitution = _Substitution(np.asarray(skeleton), np.asarray(accepting, dtype=bool), pieces, symbols)
    substitution.max_composites = max_composites
    substitution.max_states = max_states
    return substitution.classes()


class _Substitution:
    """The NFA of the skeleton and one copy of every piece per placeholder target, determinized lazily."""

    def __init__(self, skeleton: np.ndarray, accepting: np.ndarray, pieces: Sequence[Sequence[Automaton]],
                 symbols: int) -> None:
        flat = [piece for column in pieces for piece in column]
        read = [_over_symbols(p, symbols) for p in flat]
        columns = np.stack([_skeleton_classes(skeleton[:, :symbols])] + [classes for _, classes in read], axis=1)
        self.byte_class = _column_classes(np.ascontiguousarray(columns, dtype=np.int64))
        representative = np.unique(self.byte_class, return_index=True)[1]
        self.own = skeleton[:, representative].astype(np.int32)
        """The skeleton's rows over the classes."""
        size = len(skeleton)
        self.copies: list[tuple[np.ndarray, int, int]] = []
        """Each piece's copy: (its piece's table over the classes, the copy's first state, the piece's index in
        `flat`), by first state."""
        self.flat = flat
        self.entries: dict[tuple[int, int], list[int]] = {}
        """The start of each piece's copy per (placeholder column, target)."""
        ends: list[np.ndarray] = []
        returns: list[np.ndarray] = []
        pieces_read = iter(read)
        index = 0
        for column, alternatives in enumerate(pieces):
            edges = skeleton[:, symbols + column]
            tables = [_piece_table(table, classes[representative]) for table, classes in
                      (next(pieces_read) for _ in alternatives)]
            for target in distinct_values(edges[edges >= 0]).tolist():
                starts = self.entries[(column, target)] = []
                for offset, (piece, table) in enumerate(zip(alternatives, tables)):
                    check_deadline("substituting the calls")
                    starts.append(size)
                    self.copies.append((table, size, index + offset))
                    end = np.flatnonzero(piece.accepting) + size
                    ends.append(end)
                    returns.append(np.full(len(end), target, dtype=np.int64))
                    size += len(table)
            index += len(alternatives)
        self.copy_first = np.array([first for _, first, _ in self.copies], dtype=np.int64)
        self.table: np.ndarray | None = None
        """The NFA's table with every copy laid out (`_laid_out`): at once without a state budget, else only once
        the reachable states are found within it."""
        self.size = size
        self.accepting = np.zeros(size, dtype=bool)
        self.accepting[:len(skeleton)] = accepting
        self.placeholders = np.asarray(skeleton[:, symbols:symbols + len(pieces)])
        check_deadline("substituting the calls")
        self.returns_to: dict[int, int] = dict(zip(np.concatenate(ends + [np.zeros(0, np.int64)]).tolist(),
                                                   np.concatenate(returns + [np.zeros(0, np.int64)]).tolist()))
        self.skeleton_size = len(skeleton)
        check_deadline("substituting the calls")
        self.direct = np.ones(size, dtype=bool)
        self.direct[np.flatnonzero((self.placeholders >= 0).any(axis=1))] = False
        self.direct[list(self.returns_to)] = False
        self.ids: dict[bytes, int] = {}
        self.members: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []
        self.pending: list[int] = []
        self.closures: dict[int, np.ndarray] = {}
        self.max_composites: int | None = None
        self.max_states: int | None = None

    def _moves(self, state: int) -> list[int]:
        """The ε-moves of one NFA state: into every piece's copy for a placeholder edge, back to the skeleton from
        a piece's accepting state."""
        if state < self.skeleton_size:
            return [start for column, target in enumerate(self.placeholders[state].tolist()) if target >= 0
                    for start in self.entries[(column, target)]]
        back = self.returns_to.get(state)
        return [] if back is None else [back]

    def _closure_of(self, state: int) -> np.ndarray:
        """The sorted ε-closure of one state."""
        found = self.closures.get(state)
        if found is None:
            seen = {state}
            stack = [state]
            while stack:
                for moved in self._moves(stack.pop()):
                    if moved not in seen:
                        seen.add(moved)
                        stack.append(moved)
            found = self.closures[state] = np.array(sorted(seen), dtype=np.int64)
        return found

    def _intern(self, states: np.ndarray) -> int:
        """The DFA state of the ε-closure of `states` (sorted, distinct): a direct state is itself."""
        if len(states) == 1:
            state = int(states[0])
            if self.direct[state]:
                return state
            closure = self._closure_of(state)
        else:
            closure = distinct_values(np.concatenate([self._closure_of(s) if not self.direct[s] else np.array([s])
                                                for s in states.tolist()]))
        if len(closure) == 1 and self.direct[closure[0]]:
            return int(closure[0])
        key = closure.tobytes()
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = self.size + len(self.members)
            self.members.append(closure)
            self.rows.append(np.empty(0, dtype=np.int32))
            self.pending.append(found)
        return found

    def _rows_of(self, states: np.ndarray) -> np.ndarray:
        """The rows of a few NFA states (the skeleton's own, or a copy's: its piece's row moved to the copy), from
        the table of every copy where it is laid out already (without a state budget: nothing is refused before)."""
        if self.table is not None:
            return self.table[states]
        rows = np.empty((len(states), self.own.shape[1]), dtype=np.int32)
        for at, state in enumerate(states.tolist()):
            if state < self.skeleton_size:
                rows[at] = self.own[state]
                continue
            table, first, _ = self.copies[int(np.searchsorted(self.copy_first, state, side="right")) - 1]
            row = table[state - first]
            rows[at] = np.where(row >= 0, row + first, -1)
        return rows

    def _row(self, members: np.ndarray) -> np.ndarray:
        """The composite state's row: per class, the state of its members' successors."""
        rows = self._rows_of(members)
        classes, targets = np.nonzero(rows.T >= 0)
        row = np.full(rows.shape[1], -1, dtype=np.int32)
        if not len(classes):
            return row
        keys = distinct_values(classes.astype(np.int64) * self.size + rows.T[classes, targets])
        classes, targets = keys // self.size, keys % self.size
        cuts = np.flatnonzero(np.diff(classes)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(classes)]))
        single = (ends - starts == 1) & self.direct[targets[starts]]
        row[classes[starts[single]]] = targets[starts[single]]
        known: dict[bytes, int] = {}
        for lo, hi in zip(starts[~single].tolist(), ends[~single].tolist()):
            live = targets[lo:hi]
            key = live.tobytes()
            found = known.get(key)
            if found is None:
                found = known[key] = self._intern(live)
            row[classes[lo]] = found
        return row

    def _composites(self) -> tuple[int, np.ndarray]:
        """Every composite state reached from the non-direct states and the start, with its row: (the start's
        DFA state, each NFA state's DFA state: itself if direct, else its composite)."""
        nondirect = np.flatnonzero(~self.direct)
        remap = np.arange(self.size, dtype=np.int32)
        for done, state in enumerate(nondirect.tolist()):
            if done & 1023 == 0:
                check_deadline("substituting the calls")
            remap[state] = self._intern(np.array([state]))
        start = self._intern(np.array([0]))
        while self.pending:
            check_deadline("substituting the calls")
            if self.max_composites is not None and len(self.members) > self.max_composites:
                raise TooManyComposites(f"more than {self.max_composites:,} composite states")
            composite = self.pending.pop()
            self.rows[composite - self.size] = self._row(self.members[composite - self.size])
        return start, remap

    def classes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The trim DFA: (class table, accepting, class per symbol), start 0.  Its reachable states are found over
        the pieces' regions (`_reached`) and each kept row is written once, from its piece's table renumbered
        (`_trimmed`): no table of every copy is laid out, remapped, stacked and trimmed, four fresh tables whose page
        faults (huge pages compacted for numpy) cost more than their moves (o9870's three long strings, issue 36)."""
        if self.max_states is None:
            self.table = self._laid_out()
        start, remap = self._composites()
        bounded = self.max_states is not None and self.size + len(self.members) > self.max_states
        reached = self._reached(start, remap, self.max_states if bounded else None)
        if reached is None:
            raise TooManyStates(f"more than {self.max_states:,} states")
        return self._trimmed(start, remap, reached)

    def _trimmed(self, start: int, remap: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The states in `keep` (reachable from `start`), renumbered with `start` first (state 0), each row its
        NFA row (the skeleton's, a copy's piece's, a composite's) read through the new numbers.  Each can reach
        acceptance when the skeleton and the pieces are trim: a piece's state reaches its end, which returns to the
        skeleton."""
        accepting = np.concatenate([self.accepting, np.zeros(len(self.members), dtype=bool)])
        for index, members in enumerate(self.members):
            if index & 4095 == 0:
                check_deadline("substituting the calls")
            accepting[self.size + index] = self.accepting[members].any()
        if not accepting[keep].any():
            raise EmptyLanguageError("the substituted automaton accepts nothing")
        keep[start] = False
        kept = np.concatenate(([start], np.flatnonzero(keep)))
        number = np.full(len(keep) + 1, -1, dtype=np.int32)
        number[kept] = np.arange(len(kept), dtype=np.int32)
        renamed = np.append(number[remap], np.int32(-1))
        """Each NFA state's new number (its composite's where it is not direct), then the dead state's."""
        out = np.empty((len(kept), self.own.shape[1]), dtype=np.int32)
        edges = np.concatenate(([0], self.copy_first, [self.size, len(keep)]))
        cuts = np.searchsorted(kept[1:], edges) + 1
        self._rows_renamed(int(np.searchsorted(edges, start, side="right")) - 1, kept[:1], renamed, number, out[:1])
        for segment, (lo, hi) in enumerate(zip(cuts[:-1].tolist(), cuts[1:].tolist())):
            if lo < hi:
                self._rows_renamed(segment, kept[lo:hi], renamed, number, out[lo:hi])
        return out, accepting[kept], self.byte_class

    def _rows_renamed(self, segment: int, states: np.ndarray, renamed: np.ndarray, number: np.ndarray,
                      out: np.ndarray) -> None:
        """Write the renumbered rows of `states` (sorted, all in `segment`: 0 the skeleton, then each copy, then the
        composites) into `out`, a few hundred KB at a time with a deadline check between: a laid-out chain's table
        can hold millions of moves.  A copy's rows are read from its piece's table, whole where every state of the
        copy is kept."""
        if segment == 0:
            table, lookup, first = self.own, renamed, 0
        elif segment <= len(self.copies):
            table, first, _ = self.copies[segment - 1]
            lookup = np.append(renamed[first:first + len(table)], np.int32(-1))
        else:
            table, lookup, first = np.stack(self.rows), number, self.size
        local = states - first
        whole = len(local) == len(table)
        step = max(1, GATHER_CELLS // max(1, table.shape[1]))
        for lo in range(0, len(local), step):
            check_deadline("trimming the substituted automaton")
            rows = table[lo:lo + step] if whole else table[local[lo:lo + step]]
            np.take(lookup, rows, mode="wrap", out=out[lo:lo + step])

    def _laid_out(self) -> np.ndarray:
        """The NFA's table: the skeleton's rows, then each copy's (its piece's moves shifted to the copy)."""
        blocks = [self.own]
        for table, first, _ in self.copies:
            check_deadline("substituting the calls")
            blocks.append(np.where(table >= 0, table + first, -1).astype(np.int32))
        return concatenated(blocks, "substituting the calls")

    def _reached(self, start: int, remap: np.ndarray, limit: int | None = None) -> np.ndarray | None:
        """The states `classes` keeps (those reachable from `start`: a bool mask over the NFA states, then the
        composites), or None once more than `limit` are found, searched without laying out the copies: a
        direct state of a copy moves only to direct states of its copy and to the composites of its piece's ends,
        so the direct states reached from those a copy is entered by are its piece's `_region` (searched once per
        piece and entering states however many copies share them), and the search is one over regions, the
        skeleton's states and the composites."""
        size, own_size = self.size, self.skeleton_size
        composites = np.stack(self.rows) if self.rows else np.zeros((0, self.own.shape[1]), dtype=np.int32)
        seen = np.zeros(size + len(self.members), dtype=bool)
        seen[start] = True
        count = 1
        frontier = np.array([start], dtype=np.int64)
        limit = len(seen) if limit is None else limit
        while len(frontier):
            check_deadline("counting the substituted automaton")
            if count > limit:
                return None
            parts = []
            skeleton = frontier[frontier < own_size]
            if len(skeleton):
                moved = self.own[skeleton].reshape(-1)
                parts.append(remap[moved[moved >= 0]])
            composite = frontier[frontier >= size]
            if len(composite):
                moved = composites[composite - size].reshape(-1)
                parts.append(moved[moved >= 0])
            entered = frontier[(frontier >= own_size) & (frontier < size)]
            copy_of = np.searchsorted(self.copy_first, entered, side="right") - 1
            for done, copy in enumerate(distinct_values(copy_of).tolist()):
                if done & 255 == 255:
                    check_deadline("counting the substituted automaton")
                _, first, piece = self.copies[copy]
                inside, ends = piece_region(self.flat[piece], entered[copy_of == copy] - first)
                inside = inside + first
                fresh = inside[~seen[inside]]
                seen[fresh] = True
                count += len(fresh)
                parts.append(remap[ends + first])
            reached = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            frontier = distinct_values(reached[~seen[reached]].astype(np.int64))
            seen[frontier] = True
            count += len(frontier)
        return None if count > limit else seen


_REGIONS = caches.kind("regions of substituted pieces")
"""`piece_region` per piece (by identity) and states entered: a piece whose copies are entered alike is searched
once, and so is a long chain met again in another substitution (the pushdown bodies that hold one string each, a
plain try's root body that held them all: MaskBench sp_371 searched its 20,000-state chain four times)."""


def piece_region(piece: Automaton, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The states of `piece` reached from its non-accepting `states` (sorted) through non-accepting states, and the
    accepting ones reached (the ends, where a copy returns to the skeleton), kept per piece and `states`.  Searched
    over the piece's own classes: which states are reached does not depend on the classes, and a row of a long
    string's own classes is a quarter as wide as one of a substitution's (sp_371: 22 against 81)."""
    return _REGIONS.get((piece,), lambda: _region(piece.accepting, piece.class_transitions, states),
                        (states.tobytes(),))


def _region(accepting: np.ndarray, table: np.ndarray, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`piece_region`, read from the piece's shape where it proves every state past the start reached
    (`entered_regions`: a long string entered at its first character), else searched; both arrays read-only (kept)."""
    moved_into = moved_into_past_start(table, accepting)
    found = None if moved_into is None else entered_region(table, accepting, moved_into, states)
    if found is None:
        found = _searched_region(accepting, table, states)
    for array in found:
        array.setflags(write=False)
    return found


def _searched_region(accepting: np.ndarray, table: np.ndarray, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`piece_region`, searched: a breadth-first level at a time, in numpy for a wide level and state by state in
    Python for a narrow one (a long chain has a state or two a level)."""
    ending = accepting.tolist()
    narrow = max(1, NARROW_CELLS // max(1, table.shape[1]))
    marks = bytearray(len(table))
    seen = np.frombuffer(marks, dtype=bool)
    seen[states] = True
    inside: list[int] = states.tolist()
    ends: list[int] = []
    frontier: list[int] | np.ndarray = list(inside)
    levels = 0
    while len(frontier):
        if levels & 63 == 0:
            check_deadline("counting the substituted automaton")
        levels += 1
        if len(frontier) < narrow:
            following: list[int] = []
            for state in list(frontier):
                for target in table[state].tolist():
                    if target >= 0 and not marks[target]:
                        marks[target] = 1
                        (ends if ending[target] else following).append(target)
            inside.extend(following)
            frontier = following
            continue
        moved = table[np.asarray(frontier, dtype=np.int64)].reshape(-1)
        moved = distinct_values(moved[moved >= 0].astype(np.int64))
        moved = moved[~seen[moved]]
        seen[moved] = True
        closing = accepting[moved]
        ends.extend(moved[closing].tolist())
        opened = moved[~closing]
        inside.extend(opened.tolist())
        frontier = opened
    return np.array(inside, dtype=np.int64), np.array(ends, dtype=np.int64)


def _skeleton_classes(table: np.ndarray) -> np.ndarray:
    """A byte-class id per byte: bytes with equal columns in `table` share one."""
    return _column_classes(np.ascontiguousarray(table.T))


def _column_classes(rows: np.ndarray) -> np.ndarray:
    """A class id per row of `rows` (one per byte): equal rows share one, numbered by first occurrence."""
    ids: dict[bytes, int] = {}
    return np.array([ids.setdefault(row.tobytes(), len(ids)) for row in rows], dtype=np.int64)


def _piece_table(table: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """A piece's table over the substitution's classes (`columns_taken`), after a deadline check: a skeleton with
    thousands of placeholders took 0.2 s of takes (MaskBench o6237, loaded machine)."""
    check_deadline("substituting the calls")
    return columns_taken(table, columns, "substituting the calls")


def _over_symbols(piece: Automaton, symbols: int) -> tuple[np.ndarray, np.ndarray]:
    """A piece's class table and the class of each of `symbols` symbols: the symbols past the bytes (call symbols)
    get one more class, dead in every state (after a deadline check: one per piece)."""
    check_deadline("substituting the calls")
    table = piece.class_transitions.astype(np.int32)
    if symbols == 256:
        return table, np.asarray(piece.byte_class)
    dead = np.full((len(table), 1), -1, dtype=np.int32)
    classes = np.concatenate([piece.byte_class, np.full(symbols - 256, table.shape[1], dtype=np.int64)])
    return np.hstack([table, dead]), classes


GATHER_CELLS = 1 << 16
"""Cells of the trimmed table written between two deadline checks: the rows gathered for them (256 KB) stay in the
allocator's heap and the cache instead of a fresh mapping each time."""


NARROW_CELLS = 160
"""A breadth-first level whose rows hold fewer cells than this is expanded in Python, row by row: a long chain has
one or two states a level for thousands of levels, and a level's numpy calls cost more than its few rows."""
