"""A regular grammar that chooses among many literal-headed pieces (one `%json` per tool) compiled per piece.

A reply grammar for a tool list is `"<tool_call>{\\"name\\": \\"get_weather\\", \\"arguments\\": " %json{...} "}..."`
once per tool, in an alternative that a little free text and a separator stand around.  Determinized whole, every
tool's states go through one subset construction, again whenever one tool changes.  Here the largest alternative
of at least `MIN_PIECES` pieces, each a distinct literal head and what follows it, is assembled
(`pushdown.piece_assembly`): each piece is its head's chain of bytes before the subset construction of the rest, kept
per piece expression; the rest of the grammar is compiled as a skeleton with a placeholder where the alternative
stands, and the pieces are substituted in.  The DFA accepts exactly what the whole expression's does; it is trim, not
minimized (as the whole build is past `MINIMIZE_UP_TO` states, where such grammars are).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import suppress
from functools import partial

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import determinized, frames_cleared_on_refusal
from stdsl.compiler.automata.minimization.minimize import trim_in_bfs_order
from stdsl.compiler.automata.strings import literal_strings
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.pushdown.embedding import holds_grammar
from stdsl.compiler.pushdown.piece_assembly import PLACEHOLDER_NODE, assemble
from stdsl.errors import EmptyLanguageError

MIN_PIECES = 8
"""An alternative of fewer pieces is compiled with the rest of the grammar: the skeleton and the substitution cost
more than they save on a few pieces."""

_PIECES = caches.kind("grammar pieces")
"""One piece's trim DFA (None: it matches nothing, or embeds a recursive grammar) per piece expression and state
budget."""


def assembled_alternative(main: ir.Node, max_states: int) -> Automaton | None:
    """The DFA of a regular grammar's expression `main` assembled around its largest alternative of literal-headed
    pieces, or None where it has none, where it embeds a recursive grammar, a piece matches nothing or the result
    passes `max_states` (the caller compiles `main` whole, which refuses what it must)."""
    alternative = largest_piece_alternative(main)
    if alternative is None:
        return None
    pieces = _pieces([item for item in alternative.items if isinstance(item, ir.Seq)], max_states)
    if pieces is None:
        return None
    return assembled(pieces, with_placeholder(main, alternative), max_states)


def largest_piece_alternative(main: ir.Node) -> ir.Alt | None:
    """The largest alternative of literal-headed pieces in `main` (None: it has none)."""
    return max(_piece_alternatives(main), key=lambda node: len(node.items), default=None)


def assembled(pieces: list[Automaton], skeleton: ir.Node, max_states: int) -> Automaton | None:
    """The DFA of `skeleton` with the pieces' alternative in its placeholder, or None where the skeleton embeds a
    recursive grammar, the language is empty or the result passes `max_states`."""
    result = None
    with suppress(EmptyLanguageError):
        result = assemble(pieces, skeleton, max_states)
    return result if result is not None and result.num_states <= max_states else None


def _piece_alternatives(main: ir.Node) -> Iterator[ir.Alt]:
    """The outermost alternatives of `main` that are pieces: at least `MIN_PIECES` items, each a sequence that
    starts with a literal no other item starts with and goes on past it; not a set of strings (an enum's trie
    is its DFA already)."""
    seen: set[int] = set()
    pending = [main]
    while pending:
        node = pending.pop()
        if id(node) in seen or "_literal" in node.__dict__:
            continue
        seen.add(id(node))
        if len(seen) % 4096 == 0:
            check_deadline("finding a grammar's pieces")
        if isinstance(node, ir.Alt) and _is_piece_alternative(node):
            yield node
        elif isinstance(node, ir.Repeat):
            pending.append(node.item)
        elif isinstance(node, (ir.Seq, ir.Alt)):
            pending.extend(node.items)


def _is_piece_alternative(node: ir.Alt) -> bool:
    if len(node.items) < MIN_PIECES:
        return False
    heads: set[bytes] = set()
    for item in node.items:
        if not isinstance(item, ir.Seq) or "_literal" in item.__dict__:
            return False
        head = _head(item.items)
        if not head or len(head) == len(item.items) or head in heads:
            return False
        heads.add(head)
    return literal_strings(node) is None


def _head(items: Sequence[ir.Node]) -> bytes:
    """The literal bytes a sequence's items start with (the leading items that are one byte each)."""
    head = bytearray()
    for part in items:
        if type(part) is not ir.ByteSet or len(part.ranges) != 1:
            break
        low, high = part.ranges[0]
        if low != high or low > 255:
            break
        head.append(low)
    return bytes(head)


def _pieces(items: list[ir.Seq], max_states: int) -> list[Automaton] | None:
    """Each piece's DFA, kept per piece expression; None where one matches nothing."""
    pieces = []
    for item in items:
        check_deadline("compiling grammar pieces")
        piece: Automaton | None = _PIECES.get((), partial(piece_automaton, item, max_states), (item, max_states))
        if piece is None:
            return None
        pieces.append(piece)
    return pieces


def kept_piece(key: tuple[Hashable, ...], item: Callable[[], ir.Seq], max_states: int) -> Automaton | None:
    """A piece's DFA (`piece_automaton`) kept under `key`, which must determine the piece's expression `item()`
    (built only when no DFA is held, and known to embed no recursive grammar): a caller that knows a piece by less
    than its whole expression."""
    found: Automaton | None = _PIECES.get((), lambda: _piece_automaton(item(), max_states), (*key, max_states))
    return found


def piece_automaton(item: ir.Seq, max_states: int) -> Automaton | None:
    """A piece's trim DFA (None: it matches nothing, or embeds a recursive grammar): the subset construction of what
    follows its literal head, trimmed but not minimized (Hopcroft refinement would cost about half as much again as
    the construction, and the subset DFA of a JSON value is minimal already as a rule; the whole grammar, past
    `MINIMIZE_UP_TO` states, is not minimized either), behind a chain of the head's bytes (`_behind_head`)."""
    return None if holds_grammar(item) else _piece_automaton(item, max_states)


def _piece_automaton(item: ir.Seq, max_states: int) -> Automaton | None:
    """`piece_automaton` of a piece that embeds no recursive grammar."""
    parts = _trim_after_head(item, max_states)
    return None if parts is None else _behind_head(*parts)


def _behind_head(head: bytes, table: np.ndarray, accepting: np.ndarray, byte_class: np.ndarray) -> Automaton:
    """The trim DFA that reads `head` and then what the trim DFA (`table` over `byte_class`) reads: the head's
    bytes are given classes of their own (so a chain state moves on its byte alone), the DFA's states follow the
    chain's, moved up by its length.  Built in `Automaton`'s stored form (`_chained_rows`) where the DFA's columns
    are told apart (`_distinct_columns`): the general store's merge of equal columns, a Python step per class, was
    most of this stage (issue 36)."""
    own = np.full(256, 256, dtype=np.int64)
    own[list(head)] = list(head)
    _, first, refined = np.unique(byte_class.astype(np.int64) * 257 + own, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    classes = rank[refined.reshape(256)]
    source = byte_class[first[order]].astype(np.int64)
    table = np.asarray(table, dtype=np.int64)
    if head and _distinct_columns(table, source):
        return _chained_rows(head, table, accepting, classes, source)
    length = len(head)
    wide = table[:, source]
    chained = np.full((length + len(table), len(source)), -1, dtype=np.int64)
    chained[length:] = np.where(wide >= 0, wide + length, -1)
    chained[np.arange(length), classes[list(head)]] = np.arange(1, length + 1)
    return Automaton.from_classes(chained, np.concatenate([np.zeros(length, dtype=bool), accepting]), classes)


def kept_closed_pieces(keys: Sequence[tuple[Hashable, ...]], items: Sequence[Callable[[], ir.Seq]], max_states: int
                       ) -> list[Automaton] | None:
    """Each piece's DFA (`piece_automaton`) kept under its key (as `kept_piece`), the new pieces' head chains built
    together (`_behind_heads`); None where a piece matches nothing or reads on after accepting (checked as each is
    determinized, before any head chain is built)."""
    found: list[Automaton | None] = []
    new: list[tuple[int, tuple[bytes, np.ndarray, np.ndarray, np.ndarray]]] = []
    for index, (key, item) in enumerate(zip(keys, items)):
        check_deadline("compiling grammar pieces")
        hit = _PIECES.find((), (*key, max_states))
        if hit is not None:
            if hit[0] is None or reads_on_after_accepting((hit[0],)):
                return None
            found.append(hit[0])
            continue
        parts = _trim_after_head(item(), max_states)
        if parts is None:
            _PIECES.put((), None, (*key, max_states))
            return None
        _, table, accepting, _ = parts
        if bool((accepting & (table >= 0).any(axis=1)).any()):
            _PIECES.put((), _behind_head(*parts), (*key, max_states))
            return None
        found.append(None)
        new.append((index, parts))
    for (index, _), piece in zip(new, _behind_heads([parts for _, parts in new])):
        _PIECES.put((), piece, (*keys[index], max_states))
        found[index] = piece
    return [piece for piece in found if piece is not None]


def _trim_after_head(item: ir.Seq, max_states: int) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray] | None:
    """A piece's head and the trim DFA of what follows it (table over classes, accepting, byte classes); None
    where that matches nothing."""
    head = _head(item.items)
    try:
        with frames_cleared_on_refusal():
            dfa = determinized(ir.seq(*item.items[len(head):]), max_states)
            table, accepting = trim_in_bfs_order(dfa.table, dfa.accepting, all_reachable=True,
                                                 all_live=dfa.all_live, in_bfs_order=dfa.in_bfs_order)
    except EmptyLanguageError:
        return None
    return head, np.asarray(table), np.asarray(accepting, dtype=bool), dfa.byte_class


CHAINED_APART_UP_TO = 4
"""Up to this many new pieces (a list with a tool or two changed), each head chain is built on its own
(`_behind_head`), which there costs less than the stacking."""

_PAIR = 257 * 257
"""More than any DFA class and head byte pair `_behind_heads` numbers (class * 257 + byte or 256)."""


def _behind_heads(parts: Sequence[tuple[bytes, np.ndarray, np.ndarray, np.ndarray]]) -> list[Automaton]:
    """`_behind_head` of each piece (head, trim table, accepting, byte classes), read on the pieces side by side
    (their classes refined together, their live cells in one array, their stored rows laid out in one array and
    sliced) so that each step is one numpy operation for all of them: one at a time, a cold list of a hundred tools
    spent most of this in numpy's per-operation cost (issue 36).  A piece whose used columns are not told apart
    (or with no head) takes `_behind_head`'s general path."""
    if len(parts) <= CHAINED_APART_UP_TO:
        return [_behind_head(*part) for part in parts]
    count = len(parts)
    lengths = np.array([len(head) for head, *_ in parts], dtype=np.int64)
    sizes = np.array([len(table) for _, table, _, _ in parts], dtype=np.int64)
    width = max(table.shape[1] for _, table, _, _ in parts)
    pieces = np.arange(count, dtype=np.int64)
    head_piece = np.repeat(pieces, lengths)
    head_bytes = np.frombuffer(b"".join(head for head, *_ in parts), dtype=np.uint8).astype(np.int64)
    own = np.full((count, 256), 256, dtype=np.int64)
    own[head_piece, head_bytes] = head_bytes
    byte_class = np.stack([classes for *_, classes in parts]).astype(np.int64)
    keys = (pieces[:, None] * _PAIR + byte_class * 257 + own).reshape(-1)
    _, first, refined = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first)
    class_piece = first[order] // 256
    class_count = np.bincount(class_piece, minlength=count)
    class_start = np.cumsum(class_count) - class_count
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - class_start[class_piece]
    classes = rank[refined.reshape(-1)].reshape(count, 256)
    source = byte_class.reshape(-1)[first[order]]
    local_class = rank[order]
    offsets = np.cumsum(sizes) - sizes
    widths = np.array([table.shape[1] for _, table, _, _ in parts], dtype=np.int64)
    spans = sizes * widths
    cell_offsets = np.cumsum(spans) - spans
    flat = np.concatenate([table.reshape(-1) for _, table, _, _ in parts])
    live = np.flatnonzero(flat >= 0)
    cell_piece = np.searchsorted(cell_offsets, live, side="right") - 1
    local_row, column = np.divmod(live - cell_offsets[cell_piece], widths[cell_piece])
    row = offsets[cell_piece] + local_row
    cell = cell_piece * width + column
    target = flat[live].astype(np.int64)
    used = class_piece * width + source
    distinct = _distinct_stacked_columns(local_row, cell, target, used, count, width)
    distinct &= lengths > 0
    states = int(sizes.sum())
    class_moves = np.bincount(used, minlength=count * width)[cell]
    moves = np.bincount(row, weights=class_moves, minlength=states)
    alone = np.zeros(count * width, dtype=np.int64)
    alone[used] = local_class
    sole_cell = (moves[row] == 1) & (class_moves == 1)
    sole = row[sole_cell]
    sole_class = np.zeros(states, dtype=np.int64)
    sole_target = np.full(states, -1, dtype=np.int64)
    sole_class[sole] = alone[cell[sole_cell]]
    sole_target[sole] = target[sole_cell] + lengths[cell_piece[sole_cell]]
    branching = np.flatnonzero(moves >= 2)
    branch_piece = np.searchsorted(offsets, branching, side="right") - 1
    branch_count = np.bincount(branch_piece, minlength=count)
    branch_start = np.cumsum(branch_count) - branch_count
    sole_target[branching] = -2 - (np.arange(len(branching)) - branch_start[branch_piece])
    branch_rows = branching - offsets[branch_piece]
    owner = np.repeat(pieces, sizes)
    begin = offsets + np.cumsum(lengths) - lengths
    chain_at = begin[head_piece] + np.arange(len(head_piece)) - (begin - offsets)[head_piece]
    rows_at = begin[owner] + lengths[owner] + np.arange(states) - offsets[owner]
    all_class = np.zeros(states + len(head_piece), dtype=np.int64)
    all_target = np.empty(states + len(head_piece), dtype=np.int64)
    all_accepting = np.zeros(states + len(head_piece), dtype=bool)
    all_class[chain_at] = classes[head_piece, head_bytes]
    all_target[chain_at] = chain_at - begin[head_piece] + 1
    all_class[rows_at] = sole_class
    all_target[rows_at] = sole_target
    all_accepting[rows_at] = np.concatenate([accepting for _, _, accepting, _ in parts])
    ends = (begin + lengths + sizes).tolist()
    chained = []
    for index, ((head, table, accepting, dfa_classes), is_distinct) in enumerate(zip(parts, distinct.tolist())):
        if not is_distinct:
            chained.append(_behind_head(head, table, accepting, dfa_classes))
            continue
        states_of = slice(int(begin[index]), ends[index])
        columns = source[class_start[index]:class_start[index] + class_count[index]]
        wide = table[np.ix_(branch_rows[branch_start[index]:branch_start[index] + branch_count[index]], columns)]
        chained.append(Automaton.from_rows(all_class[states_of], all_target[states_of],
                                           np.where(wide >= 0, wide + len(head), -1), classes[index],
                                           all_accepting[states_of]))
    return chained


def _distinct_stacked_columns(row: np.ndarray, cell: np.ndarray, target: np.ndarray, used: np.ndarray, count: int,
                              width: int) -> np.ndarray:
    """Per piece, `_distinct_columns` of its used columns (`used`: piece * width + column, per class), read on the
    live cells (`row` within its piece, `cell` as piece * width + column, `target`): a column's weighted sum of
    targets plus one, which differs from `_distinct_columns`'s by the same amount (wrapping) in every column of a
    piece, so tells the same columns apart."""
    with np.errstate(over="ignore"):
        weighted = ((row + 1).astype(np.uint64) * _GOLDEN).view(np.int64) * (target + 1)
    digests = np.zeros(count * width, dtype=np.int64)
    np.add.at(digests, cell, weighted)
    columns = np.unique(used)
    piece = columns // width
    digest = digests[columns]
    order = np.lexsort((digest, piece))
    piece, digest = piece[order], digest[order]
    fresh = np.ones(len(piece), dtype=bool)
    fresh[1:] = (piece[1:] != piece[:-1]) | (digest[1:] != digest[:-1])
    return np.bincount(piece[fresh], minlength=count) == np.bincount(piece, minlength=count)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
"""An odd 64-bit multiplier: row r of a column digest weighs `(r + 1) * _GOLDEN` (wrapping)."""


def _distinct_columns(table: np.ndarray, source: np.ndarray) -> bool:
    """Whether the columns of `table` named in `source` are pairwise distinct, proven by distinct weighted sums
    (False also where the sums of two distinct columns happen to meet)."""
    with np.errstate(over="ignore"):
        weights = (np.arange(1, len(table) + 1, dtype=np.uint64) * _GOLDEN).view(np.int64)
        digests = (weights @ table).tolist()
    used = set(source.tolist())
    return len({digests[column] for column in used}) == len(used)


def _chained_rows(head: bytes, table: np.ndarray, accepting: np.ndarray, classes: np.ndarray, source: np.ndarray
                  ) -> Automaton:
    """`_behind_head`'s automaton built in its stored form: a class per DFA class and head byte (`classes` per
    byte, numbered by first byte; `source`, each class's DFA class), the chain's states each with its one move, the
    DFA's rows split into sole moves (read on the DFA's own columns: a state is sole where its one live DFA class
    holds one class here) and whole rows (widened to the classes).  Canonical, as `Automaton.from_classes` stores
    it, when the DFA's used columns are distinct: a class with a head byte differs from every other in the chain's
    rows, the others differ in the DFA's."""
    length = len(head)
    live = table >= 0
    count = live @ np.bincount(source, minlength=table.shape[1])
    sole = np.flatnonzero(count == 1)
    branching = np.flatnonzero(count >= 2)
    alone = np.zeros(table.shape[1], dtype=np.int64)
    alone[source] = np.arange(len(source))
    sole_class = np.zeros(length + len(table), dtype=np.int64)
    sole_target = np.full(length + len(table), -1, dtype=np.int64)
    sole_class[:length] = classes[np.frombuffer(head, dtype=np.uint8)]
    sole_target[:length] = np.arange(1, length + 1)
    own_class = np.argmax(live[sole], axis=1)
    sole_class[length + sole] = alone[own_class]
    sole_target[length + sole] = table[sole, own_class] + length
    sole_target[length + branching] = -2 - np.arange(len(branching))
    wide = table[branching][:, source]
    return Automaton.from_rows(sole_class, sole_target, np.where(wide >= 0, wide + length, -1), classes,
                               np.concatenate([np.zeros(length, dtype=bool), accepting]))


def with_placeholder(node: ir.Node, alternative: ir.Alt, stand_in: ir.Node = PLACEHOLDER_NODE) -> ir.Node:
    """`node` with every occurrence of `alternative` replaced by `stand_in` (the skeleton; `PLACEHOLDER_NODE`, or
    it followed by the pieces' shared tail)."""
    return rewritten(node, lambda current: stand_in if current is alternative or (
        isinstance(current, ir.Alt) and current == alternative) else None)


def shared_tail(items: Sequence[ir.Node]) -> bytes:
    """The literal bytes every piece ends with (the last items that are one byte each, alike in all): a tool
    call's closing text.  A piece keeps what comes before them, its head and at least one item that is not a byte
    (each piece's head stops at such an item, so the tail never reaches into it)."""
    tail: bytes | None = None
    for item in items:
        assert isinstance(item, ir.Seq)
        own = _head(item.items[::-1])[::-1]
        if tail is None:
            tail = own
        else:
            while not own.endswith(tail):
                tail = tail[1:]
        if not tail:
            return b""
    return tail or b""


def without_tail(item: ir.Seq, tail: bytes) -> ir.Seq:
    """A piece without its last `len(tail)` items (the shared tail, `shared_tail`)."""
    if not tail:
        return item
    kept = ir.seq(*item.items[:-len(tail)])
    assert isinstance(kept, ir.Seq)
    return kept


def reads_on_after_accepting(pieces: Sequence[Automaton]) -> bool:
    """Whether a piece moves on out of an accepting state (a number value that may take more digits): such pieces
    followed by their tail in the skeleton are not laid out as blocks (`substitution.blocks`), so they keep it.  Read
    on the pieces side by side."""
    if not pieces:
        return False
    accepting = np.concatenate([piece.accepting for piece in pieces])
    return bool((accepting & (np.concatenate([piece.sole_target for piece in pieces]) != -1)).any())


def rewritten(node: ir.Node, replacement: Callable[[ir.Node], ir.Node | None]) -> ir.Node:
    """`node` with each subexpression for which `replacement` gives a node replaced by it (shared subtrees
    rebuilt once; literal runs and leaves other than those replaced kept as they are)."""
    memo: dict[int, ir.Node] = {}

    def walk(current: ir.Node) -> ir.Node:
        replaced = replacement(current)
        if replaced is not None:
            return replaced
        if "_literal" in current.__dict__ or not isinstance(current, (ir.Seq, ir.Alt, ir.Repeat)):
            return current
        done = memo.get(id(current))
        if done is not None:
            return done
        if len(memo) % 4096 == 4095:
            check_deadline("rewriting a grammar's pieces")
        result: ir.Node
        if isinstance(current, ir.Repeat):
            result = ir.repeat(walk(current.item), current.min, current.max)
        elif isinstance(current, ir.Seq):
            result = ir.seq(*(walk(item) for item in current.items))
        else:
            result = ir.alt(*(walk(item) for item in current.items))
        memo[id(current)] = result
        return result

    return walk(node)
