"""`substitute`'s fast path: each piece laid out whole as a block of states behind the trie of the pieces' forced
heads, so a list with one piece changed costs that piece and a numpy layout, not a subset construction again.

A tool call starts with forced bytes (its head, up to and past the tool's name), only ever ends in states with no
move out, and never comes back into its head.  The subset construction over the skeleton and such pieces then only
meets the pieces' heads: once a prefix leaves one piece alive (with no skeleton state beside it), the rest of the
reading is that piece's own DFA.  So the front (the skeleton and the heads, up to where each piece is alone) is
determinized by itself in Python, one set of NFA states per trie node, and kept: a later list whose pieces start
with the same bytes, as far as the front read them, reuses it.  Each piece's states are then laid out after the
front as a block at an offset (its head states before the front's entry dropped, its accepting states replaced by
the front state the skeleton returns to), every step a whole-array numpy operation.  Where a piece lacks that
shape the caller falls back to the general construction (`substitution.substitute`), which accepts the same
language.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from stdsl import caches
from stdsl.compiler.automata.automaton import INT16_MAX_STATES, Automaton, BlockKey, BlockSpan
from stdsl.compiler.automata.substitution.piece_shapes import NotBlockShaped, PieceShape, piece_shapes
from stdsl.compiler.automata.table_blocks import block_rows, taken
from stdsl.compiler.deadline import check_deadline
from stdsl.errors import EmptyLanguageError

PLACEHOLDER = 256
"""The skeleton's column (symbol) of an edge that stands for one of the pieces."""

_POSITION_BITS = 16
"""A chain member's code: skeleton size + (slot << _POSITION_BITS) + position in the slot's head."""


@dataclass
class Front:
    """The determinized skeleton and heads: rows over bytes whose targets are front states (>= 0), -1, or an entry
    into a block (-2 - entry); the front state each copy's block returns to; and what it read of each head."""

    table: np.ndarray
    accepting: np.ndarray
    copies: list[tuple[int, int]]
    """(placeholder column, skeleton target) per copy of the pieces."""
    slots: list[tuple[int, int]]
    """(copy, piece index in its column) per slot."""
    entries: list[tuple[int, int]]
    """(slot, head position) where the slot's piece is alone: the block is entered at that head state."""
    returns: list[int]
    """Per copy, the front state of the skeleton target's closure (where the copy's blocks end)."""
    heads_read: list[list[bytes]]
    """Per column and piece: the head bytes the front read (a list whose pieces start so reuses it)."""
    deepest_entry: list[list[int]]
    """Per column and piece: the furthest head position it is entered at (its head states before must drop)."""
    byte_class: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        ids: dict[bytes, int] = {}
        columns = np.ascontiguousarray(self.table.T)
        self.byte_class = np.array([ids.setdefault(column.tobytes(), len(ids)) for column in columns])

    def fits(self, shapes: Sequence[Sequence[PieceShape]]) -> bool:
        """Whether the front read the same of these pieces' heads as of the ones it was built for."""
        for column, read, deepest in zip(shapes, self.heads_read, self.deepest_entry):
            for shape, head, entry in zip(column, read, deepest):
                if shape.head[:len(head)] != head or len(shape.head) < len(head) or shape.entered_along_head < entry:
                    return False
                if _ends_at(shape, entry):
                    return False
        return True


def _ends_at(shape: PieceShape, position: int) -> bool:
    """Whether the piece's text ends at this head position (a literal piece read whole): its block has no state to
    enter there, as a piece's accepting states are its copy's return."""
    return position == len(shape.head) and not shape.not_accepting[shape.head_states[position]]


class _FrontBuilder:
    """The subset construction over the skeleton and the pieces' heads, a composite per trie node."""

    def __init__(self, skeleton: np.ndarray, accepting: np.ndarray, shapes: Sequence[Sequence[PieceShape]]) -> None:
        self.size = len(skeleton)
        self.skeleton_rows = skeleton[:, :PLACEHOLDER].tolist()
        self.accepting = accepting.tolist()
        self.shapes = shapes
        placeholders = skeleton[:, PLACEHOLDER:PLACEHOLDER + len(shapes)]
        self.copies = sorted({(int(column), int(placeholders[row, column]))
                              for row, column in zip(*np.nonzero(placeholders >= 0))})
        copy_of = {pair: index for index, pair in enumerate(self.copies)}
        self.slots = [(copy, index) for copy, (column, _) in enumerate(self.copies)
                      for index in range(len(shapes[column]))]
        slot_of = {slot: index for index, slot in enumerate(self.slots)}
        self.starts: list[list[int]] = []
        """Per skeleton state, the chain members its closure adds (the pieces' starts of its placeholder copies)."""
        for row in placeholders.tolist():
            added = []
            for column, target in enumerate(row):
                if target >= 0:
                    copy = copy_of[(column, target)]
                    added += [self.size + (slot_of[(copy, index)] << _POSITION_BITS)
                              for index in range(len(shapes[column]))]
            self.starts.append(added)
        self.ids: dict[tuple[int, ...], int] = {}
        self.members: list[tuple[int, ...]] = []
        self.entries: dict[tuple[int, int], int] = {}
        self.slot_heads = [shapes[self.copies[copy][0]][index].head for copy, index in self.slots]
        self.slot_read = [0] * len(self.slots)
        """Per slot, how many bytes of its piece's head the front read."""
        self.deepest = [[0] * len(column) for column in shapes]

    def _decode(self, member: int) -> tuple[int, int, PieceShape]:
        slot, position = divmod(member - self.size, 1 << _POSITION_BITS)
        copy, index = self.slots[slot]
        return slot, position, self.shapes[self.copies[copy][0]][index]

    def _closure(self, state: int) -> list[int]:
        return [state, *self.starts[state]]

    def _intern(self, members: list[int]) -> int:
        """The front state (or block entry, or -1) of a set of NFA members."""
        if not members:
            return -1
        if len(members) == 1 and members[0] >= self.size:
            slot, position, shape = self._decode(members[0])
            if position > shape.entered_along_head:
                raise NotBlockShaped("a piece is alone only past the head states it may drop")
            if _ends_at(shape, position):
                raise NotBlockShaped("a piece is alone only where its text ends")
            copy, index = self.slots[slot]
            column = self.copies[copy][0]
            self.deepest[column][index] = max(self.deepest[column][index], position)
            entry = self.entries.setdefault((slot, position), len(self.entries))
            return -2 - entry
        key = tuple(sorted(set(members)))
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = len(self.members)
            self.members.append(key)
        return found

    def _row(self, members: tuple[int, ...]) -> list[int]:
        """The row of a composite (sorted members: skeleton states first), its pieces' members read from a list of
        each slot's head and a per-slot count of head bytes read (folded per piece when the front is built): a
        composite of a few hundred pieces at the head they share is visited once per byte of that head."""
        split = bisect.bisect_left(members, self.size)
        skeleton = members[:split]
        by_byte: dict[int, list[int]] = {}
        size, heads, read = self.size, self.slot_heads, self.slot_read
        for member in members[split:]:
            slot, position = divmod(member - size, 1 << _POSITION_BITS)
            head = heads[slot]
            if position >= len(head):
                raise NotBlockShaped("a piece's head ends while another piece or the skeleton is alive")
            if read[slot] <= position:
                read[slot] = position + 1
            moved = by_byte.get(head[position])
            if moved is None:
                by_byte[head[position]] = [member + 1]
            else:
                moved.append(member + 1)
        row = [-1] * PLACEHOLDER
        if not skeleton:
            for byte, advanced in by_byte.items():
                row[byte] = self._intern(advanced)
            return row
        closures: dict[int, int] = {}
        if len(skeleton) == 1:
            for byte, target in enumerate(self.skeleton_rows[skeleton[0]]):
                moved = by_byte.get(byte)
                if moved is not None:
                    row[byte] = self._intern((self._closure(target) if target >= 0 else []) + moved)
                    continue
                found = closures.get(target)
                if found is None:
                    found = closures[target] = self._intern(self._closure(target)) if target >= 0 else -1
                row[byte] = found
            return row
        for byte in range(PLACEHOLDER):
            targets = [self.skeleton_rows[state][byte] for state in skeleton]
            moved = by_byte.get(byte)
            if moved is None and len(targets) == 1:
                target = targets[0]
                found = closures.get(target)
                if found is None:
                    found = closures[target] = self._intern(self._closure(target)) if target >= 0 else -1
                row[byte] = found
            else:
                members_after = [m for target in targets if target >= 0 for m in self._closure(target)]
                row[byte] = self._intern(members_after + (moved or []))
        return row

    def _check_reachable(self, rows: list[list[int]], returns: list[int]) -> None:
        """Every front state is reached from the start (through the blocks to the copies' returns), so the layout
        is trim without a pass over the whole table."""
        entries = sorted(self.entries, key=self.entries.__getitem__)
        seen = {0}
        stack = [0]
        while stack:
            for target in set(rows[stack.pop()]):
                if target <= -2:
                    target = returns[self.slots[entries[-2 - target][0]][0]]
                if target >= 0 and target not in seen:
                    seen.add(target)
                    stack.append(target)
        if len(seen) != len(rows):
            raise NotBlockShaped("a state of the skeleton's front is reached only through pieces never entered")

    def build(self) -> Front:
        self._intern(self._closure(0))
        returns = [self._intern(self._closure(target)) for _, target in self.copies]
        rows: list[list[int]] = []
        while len(rows) < len(self.members):
            check_deadline("determinizing the calls' heads")
            rows.append(self._row(self.members[len(rows)]))
        self._check_reachable(rows, returns)
        accepting = np.array([any(self.accepting[m] for m in members if m < self.size) for members in self.members])
        entries = sorted(self.entries, key=self.entries.__getitem__)
        reads = [[0] * len(column) for column in self.shapes]
        for (copy, index), count in zip(self.slots, self.slot_read):
            column = self.copies[copy][0]
            reads[column][index] = max(reads[column][index], count)
        heads = [[shape.head[:read] for shape, read in zip(column, counts)]
                 for column, counts in zip(self.shapes, reads)]
        return Front(np.asarray(rows, dtype=np.int32), accepting, self.copies, self.slots, entries, returns, heads,
                     self.deepest)


_FRONTS = caches.kind("substitution fronts")
"""The last front per skeleton and number of pieces per column, reused while the pieces' heads fit it."""


def block_substitute(skeleton: np.ndarray, accepting: np.ndarray, pieces: Sequence[Sequence[Automaton]]) -> Automaton:
    """`substitute`'s result laid out as blocks (NotBlockShaped where the pieces lack the shape)."""
    shapes = [piece_shapes(column) for column in pieces]
    key = (skeleton.shape, skeleton.tobytes(), accepting.tobytes(), tuple(len(column) for column in pieces))
    held = _FRONTS.find((), key)
    if held is not None and held[0].fits(shapes):
        front = held[0]
    else:
        front = _FrontBuilder(skeleton, accepting, shapes).build()
        _FRONTS.put((), front, key)
    return _laid_out(front, pieces, shapes)


RETURN = -2
"""A block's target that is the end of the piece: the front state its copy returns to."""

BRANCHING = -3
"""A block's sole target where the state has two or more live classes (its row is among the branch rows)."""


@dataclass(frozen=True)
class _Rows:
    """Rows split as `Automaton` keeps them, targets local: per state its sole live class and target (-1 none,
    `RETURN`, `BRANCHING`), and the whole rows of the branching states."""

    sole_class: np.ndarray
    sole_target: np.ndarray
    branch_rows: np.ndarray

    @staticmethod
    def of(table: np.ndarray) -> _Rows:
        live = table != -1
        count = np.count_nonzero(live, axis=1)
        sole_class = np.argmax(live, axis=1).astype(np.uint8)
        sole_target = np.where(count == 1, table[np.arange(len(table)), sole_class], -1).astype(np.int32)
        sole_target[count >= 2] = BRANCHING
        sole_class[count != 1] = 0
        return _Rows(sole_class, sole_target, np.ascontiguousarray(table[count >= 2], dtype=np.int32))


@dataclass(frozen=True)
class _Block:
    """One piece's states from a head position on, but its accepting ones: rows over the byte classes of these rows
    alone (so classes only the dropped head told apart are merged), targets numbered from 0, `RETURN` for an
    accepting state (the end of the call), -1 dead."""

    table: np.ndarray
    byte_class: np.ndarray
    head_states: np.ndarray
    """The block's number of each head state (-1 where dropped)."""
    key: BlockKey
    """`table` and `byte_class` as a key: equal keys, equal blocks (what `BlockSpan.key` carries)."""
    split: dict[bytes, _Rows] = field(default_factory=dict, compare=False)
    """The rows over the last reply's classes (given by their first bytes), split (`split_rows`)."""


def _stacked_rows(blocks: list[_Block], representative: np.ndarray) -> _Rows:
    """`_Rows.of` the blocks' rows over the classes whose first bytes are `representative`, stacked."""
    stacked = np.empty((sum(len(block.table) for block in blocks), len(representative)), dtype=np.int32)
    at = 0
    for block in blocks:
        np.take(block.table, block.byte_class[representative], axis=1, out=stacked[at:at + len(block.table)])
        at += len(block.table)
    return _Rows.of(stacked)


def split_rows(blocks: Sequence[_Block], representative: np.ndarray) -> list[_Rows]:
    """Each block's rows over the classes whose first bytes are `representative`, split: kept per block for the
    last classes asked, those not kept split together (`_Rows.of` reads each row alone, so the blocks' rows stacked
    split as each block's would; a few numpy steps per run of blocks instead of a dozen per block).  The blocks are
    stacked and split a run of about a block of rows at a time (`table_blocks.block_rows`): all at once, a 400-tool
    reply's 30 MB of rows were stacked twice, fresh pages (and huge-page compaction) on every first build."""
    key = representative.tobytes()
    missing = list({id(block): block for block in blocks if key not in block.split}.values())
    if missing:
        ends = np.cumsum([len(block.table) for block in missing]).tolist()
        runs, start, rows, step = [], 0, 0, block_rows(len(representative))
        for index, block in enumerate(missing):
            if rows and rows + len(block.table) > step:
                check_deadline("laying out blocks")
                runs.append(_stacked_rows(missing[start:index], representative))
                start, rows = index, 0
            rows += len(block.table)
        runs.append(_stacked_rows(missing[start:], representative))
        whole = _Rows(np.concatenate([run.sole_class for run in runs]),
                      np.concatenate([run.sole_target for run in runs]),
                      np.concatenate([run.branch_rows for run in runs]))
        branch_ends = np.cumsum(whole.sole_target == BRANCHING)[np.array(ends) - 1].tolist()
        for block, low, high, branch_low, branch_high in zip(missing, [0, *ends], ends, [0, *branch_ends],
                                                             branch_ends):
            block.split.clear()
            block.split[key] = _Rows(whole.sole_class[low:high], whole.sole_target[low:high],
                                     whole.branch_rows[branch_low:branch_high])
    return [block.split[key] for block in blocks]


_BLOCKS = caches.kind("substitution blocks")
"""A piece's `_Block` per (piece by identity, head states dropped)."""


def _block(piece: Automaton, shape: PieceShape, dropped: int) -> _Block:
    def build() -> _Block:
        keep = shape.not_accepting.copy()
        keep[shape.head_states[:dropped]] = False
        kept = np.flatnonzero(keep)
        number = np.full(len(shape.table) + 1, -1, dtype=np.int32)
        number[kept] = np.arange(len(kept), dtype=np.int32)
        number[shape.accepting_states] = RETURN
        rows = number[shape.table[kept]]
        ids: dict[bytes, int] = {}
        columns = np.ascontiguousarray(rows.T)
        merged = np.array([ids.setdefault(column.tobytes(), len(ids)) for column in columns], dtype=np.int64)
        first = np.unique(merged, return_index=True)[1]
        table = np.ascontiguousarray(rows[:, first], dtype=np.int32)
        byte_class = merged[shape.byte_class]
        table.setflags(write=False)
        byte_class.setflags(write=False)
        return _Block(table, byte_class, number[shape.head_states], BlockKey(table, byte_class))

    return _BLOCKS.get((piece,), build, (dropped,))


def _laid_out(front: Front, pieces: Sequence[Sequence[Automaton]], shapes: Sequence[Sequence[PieceShape]]
              ) -> Automaton:
    """The front's rows, then each entered piece's block at its offset, over the classes refining them all (each
    distinct column once: the front's and the blocks' classes are their rows' distinct columns, and no two targets
    of a block or the front are merged, so the refinement is the table's own classes).  The blocks' rows are kept
    split (a sole class and target per state, whole rows only where a state branches), so placing a block is
    adding its offset to a vector and to its few whole rows."""
    entered: dict[int, list[tuple[int, int]]] = {}
    for entry, (slot, position) in enumerate(front.entries):
        entered.setdefault(slot, []).append((entry, position))
    laid: list[tuple[int, _Block, list[tuple[int, int]]]] = []
    for slot, at in entered.items():
        copy, index = front.slots[slot]
        column = front.copies[copy][0]
        block = _block(pieces[column][index], shapes[column][index], min(position for _, position in at))
        laid.append((copy, block, at))
    if not laid:
        raise NotBlockShaped("no piece is ever entered")
    distinct = {id(block): block.byte_class for _, block, _ in laid}
    columns = np.stack([front.byte_class, *distinct.values()], axis=1)
    ids: dict[bytes, int] = {}
    byte_class = np.array([ids.setdefault(row.tobytes(), len(ids)) for row in np.ascontiguousarray(columns)])
    representative = np.unique(byte_class, return_index=True)[1]
    size = len(front.table)
    entry_state = np.full(len(front.entries) + 1, -1, dtype=np.int64)
    returns, spans = [], []
    parts = split_rows([block for _, block, _ in laid], representative)
    for copy, block, at in laid:
        returns.append(front.returns[copy])
        spans.append(BlockSpan(size, len(block.table), front.returns[copy], block.key))
        for entry, position in at:
            entry_state[entry] = block.head_states[position] + size
        size += len(block.table)
    head = front.table[:, representative].astype(np.int64)
    head = np.where(head <= -2, entry_state[np.where(head <= -2, -2 - head, -1)], head)
    front_rows = _Rows.of(head)
    states = [len(part.sole_target) for part in parts]
    branches = [len(part.branch_rows) for part in parts]
    number, bases = _numbering(states, returns, len(front.table))
    sole_target = number[np.concatenate([part.sole_target for part in parts]) + np.repeat(bases, states)]
    sole_target = np.concatenate([front_rows.sole_target, sole_target])
    into = np.concatenate([part.branch_rows for part in parts])
    into += np.repeat(bases, branches)[:, None]
    dtype = np.int16 if size <= INT16_MAX_STATES else np.int32
    branch_rows = np.empty((len(front_rows.branch_rows) + len(into), len(representative)), dtype=dtype)
    branch_rows[:len(front_rows.branch_rows)] = front_rows.branch_rows
    taken(number.astype(dtype), into, branch_rows[len(front_rows.branch_rows):], "laying out blocks", "clip")
    branching = np.flatnonzero(sole_target == BRANCHING)
    sole_target[branching] = -2 - np.arange(len(branching))
    accepting = np.zeros(size, dtype=bool)
    accepting[:len(front.table)] = front.accepting
    if not accepting.any():
        raise EmptyLanguageError("the substituted automaton accepts nothing")
    automaton = Automaton.from_rows(np.concatenate([front_rows.sole_class, *(part.sole_class for part in parts)]),
                                    sole_target, branch_rows, byte_class, accepting)
    automaton.blocks = tuple(spans)
    return automaton


def _numbering(states: list[int], returns: list[int], first: int) -> tuple[np.ndarray, np.ndarray]:
    """One lookup for every block's local targets: block k's target t is `number[bases[k] + t]`, its state t at
    its offset (the blocks laid out in order from state `first`), `RETURN` its copy's return state, -1 and
    `BRANCHING` themselves; a gather instead of comparisons over every entry."""
    width = np.asarray(states, dtype=np.int64) + 3
    starts = np.cumsum(width) - width
    number = (first + np.arange(int(width.sum()), dtype=np.int64)
              - 3 * (np.repeat(np.arange(len(states)), width) + 1)).astype(np.int32)
    number[starts] = BRANCHING
    number[starts + 1] = returns
    number[starts + 2] = -1
    return number, (starts + 3).astype(np.int32)
