"""What the block layout reads of each piece (a tool call's DFA): its forced head, how far that head is entered
only along itself, and its table; read for all of a list's new pieces at once.

A piece read one at a time paid a dozen numpy steps on its small table: a cold list of a hundred calls spent most of
that in numpy's per-operation cost.  `shapes_of` stacks the pieces' stored rows, walks their forced heads one byte of
every piece per numpy step (a few pieces, a list with a tool changed, one by one in Python) and counts the moves into
their states in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stdsl import caches
from stdsl.compiler.automata.automaton import Automaton


class NotBlockShaped(Exception):
    """The pieces or the skeleton lack the shape the block layout needs; the general construction applies."""


@dataclass(frozen=True)
class PieceShape:
    """What the block layout reads of one piece: its forced head and its table over its own byte classes."""

    head: bytes
    """The bytes forced from the start (each state on the way not accepting, one live byte), no state repeated."""
    head_states: np.ndarray
    """The state before each head byte and the one after the last (len(head) + 1 states)."""
    entered_along_head: int
    """How many leading head states are entered only along the head (the start: never), so may be dropped."""
    table: np.ndarray
    byte_class: np.ndarray
    accepting_states: np.ndarray
    not_accepting: np.ndarray


_SHAPES = caches.kind("substitution pieces")
"""A piece's `PieceShape`, per piece (by identity): a cached tool call's shape is read once."""


def piece_shapes(pieces: Sequence[Automaton]) -> list[PieceShape]:
    """Each piece's `PieceShape`, those not held read together (`shapes_of`) and kept."""
    found = [_SHAPES.find((piece,)) for piece in pieces]
    shapes = {index: hit[0] for index, hit in enumerate(found) if hit is not None}
    new = [index for index, hit in enumerate(found) if hit is None]
    for index, shape in zip(new, shapes_of([pieces[index] for index in new])):
        _SHAPES.put((pieces[index],), shape)
        shapes[index] = shape
    return [shapes[index] for index in range(len(pieces))]


def shapes_of(pieces: Sequence[Automaton]) -> list[PieceShape]:
    """Each piece's `PieceShape`, all at once: the pieces' stored rows side by side, their forced heads walked one
    byte of every piece per numpy step, the moves into their states counted in one pass (a head state past the
    start is entered along the head alone where the head's byte is its one move in).  Read one piece at a time, a
    cold list of a hundred calls spent most of this in numpy's per-operation cost on each small piece."""
    if not pieces:
        return []
    count = len(pieces)
    sizes = np.array([piece.num_states for piece in pieces], dtype=np.int64)
    offsets = np.cumsum(sizes) - sizes
    owner = np.repeat(np.arange(count), sizes)
    accepting = np.concatenate([piece.accepting for piece in pieces])
    sole_target = np.concatenate([piece.sole_target for piece in pieces]).astype(np.int64)
    if bool(accepting[offsets].any()) or bool((accepting & (sole_target != -1)).any()):
        raise NotBlockShaped("a piece accepts the empty text or reads on after accepting")
    sole_class = np.concatenate([piece.sole_class for piece in pieces]).astype(np.int64)
    classes = np.stack([piece.byte_class for piece in pieces]).astype(np.int64)
    piece_of_byte = np.repeat(np.arange(count), 256)
    class_size = np.bincount(piece_of_byte * 256 + classes.reshape(-1), minlength=count * 256).reshape(count, 256)
    first_byte = np.full((count, 256), 256, dtype=np.int64)
    np.minimum.at(first_byte, (piece_of_byte, classes.reshape(-1)), np.tile(np.arange(256), count))
    sole = sole_target >= 0
    target = np.where(sole, sole_target + offsets[owner], -1)
    weight = class_size[owner, sole_class]
    forced = ~accepting & sole & (weight == 1)
    indegree = np.bincount(target[sole], weights=weight[sole], minlength=len(owner))
    head_bytes, head_states, lengths = _forced_heads(forced, target, first_byte[owner, sole_class], offsets)
    expected = np.ones(len(head_states), dtype=np.int64)
    expected[0] = 0
    along = ((indegree[head_states] == expected[:, None]) & ~_entered_by_branches(pieces)[
        head_states] & (np.arange(len(head_states))[:, None] < lengths))
    entered = np.cumprod(along, axis=0).sum(axis=0).tolist()
    shapes = []
    for index, piece in enumerate(pieces):
        length = int(lengths[index])
        shapes.append(PieceShape(bytes(head_bytes[:length, index].tolist()),
                                 head_states[:length + 1, index] - offsets[index], int(entered[index]),
                                 np.asarray(piece.class_transitions, dtype=np.int32), np.asarray(piece.byte_class),
                                 np.flatnonzero(piece.accepting), ~piece.accepting))
    return shapes


def _entered_by_branches(pieces: Sequence[Automaton]) -> np.ndarray:
    """Per state of the pieces side by side, whether a piece's whole (branching) row moves into it: marked per piece
    on its own states and one more (where its dead moves, -1, land), then joined (offsetting every cell of the
    stacked rows cost twice as much)."""
    parts = []
    for piece in pieces:
        local = np.zeros(piece.num_states + 1, dtype=bool)
        local[piece.branch_rows.reshape(-1)] = True
        parts.append(local[:-1])
    return np.concatenate(parts)


WALKED_APART_UP_TO = 8
"""Up to this many new pieces (a list with a tool or two changed), their heads are walked in Python one byte at a
time, which there costs less than a numpy step per byte of the longest head."""


def _forced_heads(forced: np.ndarray, target: np.ndarray, forced_byte: np.ndarray, starts: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every piece's forced head walked from its start (state numbers of the pieces side by side), each stopping at
    a state that is not forced or a move back into its head: (the bytes, step by piece; the states, one more step,
    a finished head's last repeated; each head's length).  Many pieces are walked side by side, a byte of each per
    numpy step."""
    if len(starts) <= WALKED_APART_UP_TO:
        return _walked_apart(forced.tolist(), target.tolist(), forced_byte.tolist(), starts.tolist())
    state = starts.copy()
    seen = np.zeros(len(forced), dtype=bool)
    seen[starts] = True
    going = np.ones(len(starts), dtype=bool)
    read: list[np.ndarray] = []
    visited = [starts.copy()]
    lengths = np.zeros(len(starts), dtype=np.int64)
    while True:
        following = np.where(going & forced[state], target[state], -1)
        going = following >= 0
        going[going] = ~seen[following[going]]
        if not going.any():
            break
        read.append(np.where(going, forced_byte[state], 0))
        state = np.where(going, following, state)
        seen[state[going]] = True
        visited.append(state.copy())
        lengths += going
    bytes_read = np.array(read, dtype=np.uint8).reshape(len(read), len(starts))
    return bytes_read, np.array(visited), lengths


def _walked_apart(forced: list[bool], target: list[int], forced_byte: list[int], starts: list[int]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_forced_heads` of a few pieces, each walked on its own."""
    heads: list[tuple[list[int], list[int]]] = []
    for state in starts:
        states, read = [state], []
        while forced[state] and target[state] not in states:
            read.append(forced_byte[state])
            state = target[state]
            states.append(state)
        heads.append((read, states))
    steps = max(len(read) for read, _ in heads)
    bytes_read = np.zeros((steps, len(starts)), dtype=np.uint8)
    visited = np.empty((steps + 1, len(starts)), dtype=np.int64)
    for index, (read, states) in enumerate(heads):
        bytes_read[:len(read), index] = read
        visited[:, index] = states + states[-1:] * (steps - len(read))
    return bytes_read, visited, np.array([len(read) for read, _ in heads], dtype=np.int64)
