"""A call whose parameters are written apart, some optional, laid out from per-parameter pieces with no subset
construction over the whole call.

Such a call (Qwen3-Coder's `<parameter=KEY>\\nVALUE\\n</parameter>\\n`, in schema order, the optional ones in
`ir.optional`) is a run of units: literal text, then values each followed by literal text; a unit is required or
optional.  Each value with the text after it is one piece, compiled on its own and kept per value (every string
parameter of every tool of a format shares one), and must end where it accepts (no move out of an accepting
state: the value cannot hold its end tag).  Between units sits a junction: the trie of the literal heads of the
units that may come next (up to the first required one), each leading into its unit's first piece.  Where the
heads are not prefix-free, a piece is not prefix-free, or the call has another shape, `call_layout` answers None
and the caller determinizes the call whole; otherwise the layout is a DFA of exactly the call's language (trim,
not minimized: each junction state and piece state is reached and leads to the end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import INT16_MAX_STATES, Automaton
from stdsl.compiler.automata.build import build_automaton, subset_automaton
from stdsl.compiler.automata.ops import joint_classes
from stdsl.compiler.automata.strings import byte_trie, literal_strings
from stdsl.compiler.automata.table_blocks import block_rows
from stdsl.compiler.deadline import check_deadline

Atom = bytes | ir.Node
"""Literal text (bytes) or a value (any other IR node)."""


@dataclass(frozen=True)
class _Unit:
    """Literal `head` text, then `pieces` (each a value and the literal text after it) read in order."""

    required: bool
    head: bytes
    pieces: tuple[tuple[ir.Node, bytes], ...]


_BYTE_OF = {id(ir.literal(bytes((byte,)))): bytes((byte,)) for byte in range(256)}
"""The byte of each single-byte node a literal's items are made of (held for good by `ir`), by identity: a call's
text is read a byte at a time, and a dictionary look-up is a fraction of `ir.literal_bytes`."""


def _atoms(items: tuple[ir.Node, ...]) -> list[Atom] | None:
    """Literal runs (merged) and values, or None where an item is optional (handled a level up)."""
    atoms: list[Atom] = []
    run: bytearray | None = None
    for item in items:
        text = _BYTE_OF.get(id(item))
        if text is None:
            text = ir.literal_bytes(item)
        if text is not None:
            if run is None:
                run = bytearray()
            run += text
        elif isinstance(item, ir.Repeat) or isinstance(item, ir.EmbeddedGrammar):
            return None
        else:
            if run is not None:
                atoms.append(bytes(run))
                run = None
            atoms.append(item)
    if run is not None:
        atoms.append(bytes(run))
    return atoms


def _unit(atoms: list[Atom], required: bool) -> _Unit | None:
    """A unit from literal head, value, literal, value, literal...; None for any other order."""
    if not atoms or not isinstance(atoms[0], bytes) or not atoms[0] or len(atoms) % 2 == 0:
        return None
    pieces = []
    for value, after in zip(atoms[1::2], atoms[2::2]):
        if isinstance(value, bytes) or not isinstance(after, bytes) or not after:
            return None
        pieces.append((value, after))
    return _Unit(required, atoms[0], tuple(pieces))


def _units(node: ir.Node) -> list[_Unit] | None:
    """The call's units, or None where it is not literal text, values and optional units in a row (ending in a
    required one)."""
    if not isinstance(node, ir.Seq):
        return None
    units: list[_Unit] = []
    run: list[ir.Node] = []
    for item in (*node.items, None):
        optional = isinstance(item, ir.Repeat) and item.min == 0 and item.max == 1
        if item is not None and not optional:
            run.append(item)
            continue
        if run:
            atoms = _atoms(tuple(run))
            unit = _unit(atoms, True) if atoms is not None else None
            if unit is None:
                return None
            units.append(unit)
            run = []
        if item is not None:
            assert isinstance(item, ir.Repeat)
            inner = _atoms(item.item.items if isinstance(item.item, ir.Seq) else (item.item,))
            unit = _unit(inner, False) if inner is not None else None
            if unit is None:
                return None
            units.append(unit)
    if not units or not units[-1].required:
        return None
    return units


_PIECES = caches.kind("call pieces")
"""A value with the literal text after it, compiled (None where it is not prefix-free), per (value, text)."""


@dataclass(frozen=True)
class ParameterPiece:
    """A value with the literal text after it as a DFA table over its own byte classes: start 0, one accepting
    state, its last, with no move out (kept as a table: the layout reads nothing else of it)."""

    table: np.ndarray
    byte_class: np.ndarray

    @property
    def num_states(self) -> int:
        return len(self.table)


def _followed(value: Automaton, after: bytes) -> ParameterPiece | None:
    """`value` then the text `after` laid out with no subset construction, where no accepting state of `value` reads
    `after`'s first byte (then a run leaves `value` exactly where it takes that byte from an accepting state)."""
    accepting = np.asarray(value.accepting)
    if bool((value.class_transitions[accepting, value.byte_class[after[0]]] >= 0).any()):
        return None
    size = value.num_states
    joint, first = joint_classes([value.byte_class], set(after))
    table = np.full((size + len(after), len(first)), -1, dtype=np.int32)
    table[:size] = value.class_transitions[:, value.byte_class[first]]
    table[np.flatnonzero(accepting), joint[after[0]]] = size
    table[np.arange(size, size + len(after) - 1), joint[list(after[1:])]] = np.arange(size + 1, size + len(after))
    return ParameterPiece(table, joint)


def parameter_piece(value: ir.Node, after: bytes) -> ParameterPiece | None:
    """`value` then `after` as a piece: laid out where no accepting state of `value` reads on with `after`'s first
    byte, else `value` and a line of `after` determinized (kept per line, so the same value before different next
    heads is determinized once) and the rest of `after` chained on, else determinized whole."""

    def build() -> ParameterPiece | None:
        texts = literal_strings(value)
        laid_out = _followed(_automaton(value), after) if texts is None else _literals_followed(texts, after)
        if laid_out is not None:
            return laid_out
        for cut in _line_ends(after):
            line = after[:cut]
            closed = _PIECES.get((), lambda: _determinized(value, line), (value, line))
            if closed is not None:
                return _chained(closed, after[cut:])
        return _determinized(value, after)

    return _PIECES.get((), build, (value, after))


def trie_insert(rows: list[dict[int, int]], root: int, text: bytes, mark: int) -> int | None:
    """Add `text` to the junction trie `rows` from `root`, its last byte leading to `mark` (a negative marker, not a
    state); the state it leaves from, or None where the text is a prefix of a text already there or has one as its
    prefix (the junction would not be deterministic)."""
    state = root
    for byte in text[:-1]:
        following = rows[state].get(byte)
        if following is None:
            rows.append({})
            following = rows[state][byte] = len(rows) - 1
        elif following < 0:
            return None
        state = following
    if text[-1] in rows[state]:
        return None
    rows[state][text[-1]] = mark
    return state


def _literals_followed(texts: list[bytes], after: bytes) -> ParameterPiece | None:
    """An enum's literals then `after` as the trie of the literals with `after` laid on from each end (no minimal
    DFA of the enum first: a handful of literals is a trie of a few dozen states), or None where an end of one
    literal goes on with `after`'s first byte in another."""
    children, ends = byte_trie(texts)
    if any(after[0] in children[end] for end in ends):
        return None
    used = sorted({byte for text in texts for byte in text} | set(after))
    byte_class = np.full(256, len(used), dtype=np.int64)
    byte_class[used] = np.arange(len(used))
    size = len(children)
    table = np.full((size + len(after), len(used) + 1), -1, dtype=np.int32)
    for node, row in enumerate(children):
        for byte, following in row.items():
            table[node, byte_class[byte]] = following
    table[sorted(ends), byte_class[after[0]]] = size
    table[np.arange(size, size + len(after) - 1), byte_class[list(after[1:])]] = np.arange(size + 1, size + len(after))
    return ParameterPiece(table, byte_class)


def _automaton(value: ir.Node) -> Automaton:
    """A value's DFA, kept per expression where it takes a subset construction (a boolean with Python's spellings
    beside JSON's): one value comes before as many different next tags as the tools have parameter names."""
    return subset_automaton(value) or build_automaton(value)


def _line_ends(text: bytes) -> list[int]:
    """Where each line of `text` ends (past its newline), but the last."""
    return [index + 1 for index, byte in enumerate(text[:-1]) if byte == 0x0A]


def _determinized(value: ir.Node, after: bytes) -> ParameterPiece | None:
    """`value` then `after` by the subset construction, or None where the result reads on after accepting."""
    piece = build_automaton(ir.seq(value, ir.literal(after)))
    if bool(piece.accepting[0]) or bool((piece.live_count[piece.accepting] > 0).any()):
        return None
    return _accepting_last(piece)


def _chained(piece: ParameterPiece, text: bytes) -> ParameterPiece:
    """`piece` then the literal `text`: its last (accepting) state has no move, so the text's bytes chained from
    there keep the table deterministic and the language the concatenation."""
    joint, first = joint_classes([piece.byte_class], set(text))
    size = piece.num_states
    table = np.full((size + len(text), len(first)), -1, dtype=np.int32)
    table[:size] = piece.table[:, piece.byte_class[first]]
    table[np.arange(size - 1, size - 1 + len(text)), joint[list(text)]] = np.arange(size, size + len(text))
    return ParameterPiece(table, joint)


def _accepting_last(piece: Automaton) -> ParameterPiece:
    """`piece` (start not accepting, no move out of an accepting state) with its accepting states merged into one,
    its last: laid out, that state is the first state of whatever follows the piece, so no move is redirected."""
    accepting = np.asarray(piece.accepting)
    rank = np.cumsum(~accepting) - 1
    size = int((~accepting).sum())
    number = np.append(np.where(accepting, size, rank), -1)
    table = np.full((size + 1, piece.num_classes), -1, dtype=np.int32)
    table[:size] = number[piece.class_transitions[~accepting]]
    return ParameterPiece(table, np.asarray(piece.byte_class))


@dataclass(frozen=True)
class _Plan:
    """One call laid out on its own numbering: each junction's trie, then its units' pieces in order, a piece's
    accepting (last) state being the first state of what follows it (the next piece, the next junction's root or
    the end state, the last)."""

    moves: list[tuple[int, int, int]]
    """(state, byte, target) of the tries."""
    pieces: list[tuple[ParameterPiece, int]]
    """(piece, first state): its states are first state onward, its last the first state of what follows."""
    size: int


def _plan(node: ir.Node) -> _Plan | None:
    """The layout of a call of units (see the module), or None where the call lacks that shape."""
    units = _units(node)
    if units is None:
        return None
    pieces = [[parameter_piece(value, after) for value, after in unit.pieces] for unit in units]
    if any(piece is None for row in pieces for piece in row):
        return None
    rows: list[dict[int, int]] = []
    """The junctions' trie states, by byte, each junction's root first; `end_mark` where a head ends (resolved
    through `entries`)."""
    junction_roots: list[int] = []
    end_mark = -2
    entries: list[tuple[int, int, int]] = []
    """(trie state, byte, unit) of each last head byte: into the unit's first piece, or past a piece-less unit."""
    for at in range(len(units)):
        junction_roots.append(len(rows))
        rows.append({})
        for index in range(at, len(units)):
            head = units[index].head
            state = trie_insert(rows, junction_roots[at], head, end_mark)
            if state is None:
                return None
            entries.append((state, head[-1], index))
            if units[index].required:
                break
    junction_roots.append(len(rows))
    position = np.zeros(len(rows), dtype=np.int64)
    """Each trie state's place in the call."""
    starts: list[int] = []
    """Each unit's first state: its first piece's, or (piece-less) the state after the unit."""
    placed: list[tuple[ParameterPiece, int]] = []
    size = 1
    """The first junction's root is the call's state 0."""
    for index, row in enumerate(pieces):
        root, past = junction_roots[index], junction_roots[index + 1]
        position[root + 1:past] = np.arange(size, size + past - root - 1)
        size += past - root - 1
        starts.append(size)
        for piece in row:
            assert piece is not None
            placed.append((piece, size))
            size += piece.num_states - 1
        if index + 1 < len(units):
            position[past] = size
        size += 1
    moves = [(int(position[state]), byte, int(position[target])) for state, row in enumerate(rows)
             for byte, target in row.items() if target >= 0]
    moves += [(int(position[state]), byte, starts[index]) for state, byte, index in entries]
    return _Plan(moves, placed, size)


def call_layout(node: ir.Node) -> Automaton | None:
    """The DFA of a call of units (see the module), or None where the call lacks that shape."""
    return call_layouts([node])[0]


DEAD = -(1 << 30)
"""A dead move in the pieces' stacked rows: a piece's place added to it stays below -1, clipped back to -1."""


def call_layouts(nodes: Sequence[ir.Node]) -> list[Automaton | None]:
    """`call_layout` of each node, the calls laid out side by side in one table over joint classes (the pieces'
    rows, last state aside, copied for every place at once, shifted by the place) and cut apart: per call, the
    work left is planning its tries."""
    plans = [_plan(node) for node in nodes]
    chosen = [(index, plan) for index, plan in enumerate(plans) if plan is not None]
    laid_out: list[Automaton | None] = [None] * len(nodes)
    if not chosen:
        return laid_out
    distinct = {id(piece): piece for _, plan in chosen for piece, _ in plan.pieces}
    order = {key: number for number, key in enumerate(distinct)}
    joint, first = joint_classes([piece.byte_class for piece in distinct.values()],
                                 {byte for _, plan in chosen for _, byte, _ in plan.moves})
    sizes = np.array([piece.num_states - 1 for piece in distinct.values()], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    stacked = np.concatenate([np.zeros((0, len(first)), dtype=np.int32),
                              *(piece.table[:-1, piece.byte_class[first]] for piece in distinct.values())],
                             dtype=np.int32)
    stacked[stacked < 0] = DEAD
    bases = np.concatenate([[0], np.cumsum([plan.size for _, plan in chosen])])
    total = int(bases[-1])
    local = np.int16 if max(plan.size for _, plan in chosen) <= INT16_MAX_STATES else np.int32
    table = np.full((total, len(first)), -1, dtype=local)
    """Targets are numbered within their call: int16 (as `Automaton` stores them) where every call fits, half the
    memory of a table of a hundred thousand states over the joint classes."""
    moves = np.array([(base + state, byte, target) for base, (_, plan) in zip(bases.tolist(), chosen)
                      for state, byte, target in plan.moves], dtype=np.int64).reshape(-1, 3)
    table[moves[:, 0], joint[moves[:, 1]]] = moves[:, 2]
    placed = np.array([(order[id(piece)], base, at) for base, (_, plan) in zip(bases.tolist(), chosen)
                       for piece, at in plan.pieces], dtype=np.int64).reshape(-1, 3)
    if len(placed):
        counts = sizes[placed[:, 0]]
        within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        source = np.repeat(offsets[placed[:, 0]], counts) + within
        shift = np.repeat(placed[:, 2], counts).astype(np.int32)[:, None]
        target = np.repeat(placed[:, 1] + placed[:, 2], counts) + within
        step = block_rows(len(first))
        for low in range(0, len(source), step):
            check_deadline("laying out calls")
            high = low + step
            moved = stacked[source[low:high]]
            moved += shift[low:high]
            np.maximum(moved, -1, out=moved)
            table[target[low:high]] = moved
    for call, (index, plan) in enumerate(chosen):
        accepting = np.zeros(plan.size, dtype=bool)
        accepting[-1] = True
        laid_out[index] = Automaton.from_classes(table[bases[call]:bases[call + 1]], accepting, joint)
    return laid_out
