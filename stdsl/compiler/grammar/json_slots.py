"""A Lark grammar with many `%json` values compiled from its frame (the text around the schemas), kept per frame.

A reply grammar for a tool list with one tool changed is the same text but for one schema; read, lowered and
inlined whole it costs about 30 ms at 128 tools before its one new piece.  Here the text is split into its frame
(each `%json` schema replaced by a numbered slot, `slotted_text`) and the schemas.  The frame is lowered once and
kept per frame text (by `lowering`): its rules inlined, its alternative of pieces found, each piece an expression
with slot leaves (`frame_of`).  A grammar with that frame only looks up each schema's value (`slot_value`, per
schema text) and each piece's DFA (kept per piece expression over local slots and the values in them) and
assembles them (`compile_frame`); the closing text every piece ends with (a tool call's `}</tool_call>`) is laid
out once, in the skeleton after the placeholder (`SharedTail`).  A slot stands for exactly its schema's values, so
the result accepts what the grammar lowered whole accepts; where anything differs from the plain case (a schema that
is refused, recursive or empty, a slot outside the pieces, a frame that does not read back as written) the caller
lowers the grammar whole.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.grammar.expressions import JSON_WHITESPACE
from stdsl.compiler.grammar.piece_alternatives import (
    assembled,
    kept_closed_pieces,
    kept_piece,
    largest_piece_alternative,
    rewritten,
    shared_tail,
    with_placeholder,
    without_tail,
)
from stdsl.compiler.json_schema.json_tokens import JsonTokens
from stdsl.compiler.json_schema.recursive import is_recursive_schema
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.compiler.pushdown.embedding import holds_grammar
from stdsl.compiler.pushdown.piece_assembly import PLACEHOLDER_NODE
from stdsl.errors import CompileError, CompileTimeError, StateBudgetError

SLOT_KEY = "$stdsl_slot"
"""The one key of the schema that stands in a frame for slot k: `{"$stdsl_slot": k}`."""

_LEXEMES = re.compile(r"""
    "(?:\\.|[^"\\\n])*"
  | /(?!/)(?:\\.|[^/\\\n])+/
  | //[^\n]* | \#[^\n]*
  | <[^<>\s]+>
  | (?P<json>%json)[ \t\r\n]*(?=\{)
""", re.VERBOSE)
"""What may hold `%json` without being one (strings, regexes, comments, special tokens, as `lark_tokens` reads
them), and the directive itself before its block."""

_SLOT_VALUES = caches.kind("grammar %json slot values")
"""A `%json` schema text's value (None: the schema is refused, recursive or empty: the grammar lowers whole)."""


@dataclass(frozen=True)
class SlottedText:
    """A grammar's text with each `%json` block replaced by its slot (`frame`), and the blocks' texts in order."""

    frame: str
    schemas: tuple[str, ...]
    values: tuple[object, ...]
    """The schemas read (JSON values)."""


def slotted_text(text: str) -> SlottedText | None:
    """`text` split into its frame and its `%json` schemas (None: a block that is not JSON, left to the parser's
    error).  Whether each slot stands where the parser reads a `%json` block is checked when the frame is lowered
    (`SlotLeaves.each_once`)."""
    decoder = json.JSONDecoder()
    parts: list[str] = []
    schemas: list[str] = []
    values: list[object] = []
    at = position = read = 0
    while (match := _LEXEMES.search(text, position)) is not None:
        position = match.end()
        read += 1
        if read % 4096 == 0:
            check_deadline("finding a grammar's %json schemas")
        if match.group("json") is None:
            continue
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            return None
        parts += [text[at:position], json.dumps({SLOT_KEY: len(schemas)})]
        schemas.append(text[position:end])
        values.append(value)
        at = position = end
    parts.append(text[at:])
    return SlottedText("".join(parts), tuple(schemas), tuple(values))


def _slot_leaf() -> ir.Embedded:
    """A leaf that stands for a slot in a frame's IR: a rule-free, nonempty, non-nullable leaf, equal only to
    itself (it is never compiled: every slot is replaced by its value first)."""
    table = np.full((2, 256), -1, dtype=np.int32)
    table[0] = 1
    return ir.Embedded(table, np.array([False, True]))


_LOCAL_LEAVES: list[ir.Embedded] = []
_LOCAL_LEAVES_LOCK = threading.Lock()


def _local_leaf(index: int) -> ir.Embedded:
    """The leaf for a piece's `index`-th slot: one object per index in the process (made under a lock: a frame
    built on one thread and filled on another must find the same leaf), so equal pieces of two frames are equal."""
    with _LOCAL_LEAVES_LOCK:
        while len(_LOCAL_LEAVES) <= index:
            _LOCAL_LEAVES.append(_slot_leaf())
        return _LOCAL_LEAVES[index]


class SlotLeaves:
    """The leaves of one frame's slots, handed to its lowering (`RuleTable.json_slot`) and counted."""

    def __init__(self, count: int) -> None:
        self.leaves = [_slot_leaf() for _ in range(count)]
        self.uses = [0] * count
        self.by_leaf = {id(leaf): index for index, leaf in enumerate(self.leaves)}

    def leaf(self, schema: object) -> ir.Node | None:
        """The leaf for a slot's stand-in schema, or None for any other schema."""
        if not isinstance(schema, dict) or len(schema) != 1 or not isinstance(schema.get(SLOT_KEY), int):
            return None
        index = schema[SLOT_KEY]
        if not 0 <= index < len(self.leaves):
            return None
        self.uses[index] += 1
        return self.leaves[index]

    def each_once(self) -> bool:
        """Whether the parser read each slot once, as a `%json` block: the frame then reads as the text did."""
        return all(uses == 1 for uses in self.uses)


@dataclass(frozen=True)
class SharedTail:
    """A frame's pieces without the closing text they all end with (a tool call's `}` and `</tool_call>`), each
    ending with a slot: that text, after the whitespace a `%json` value ends with, stands once in the skeleton
    behind the placeholder instead of in every piece's subset construction and block."""

    skeleton: ir.Node
    pieces: tuple[ir.Node, ...]
    last: tuple[int, ...]
    """Per piece, the local index of its last slot, whose value goes in without its trailing whitespace."""


@dataclass(frozen=True)
class Frame:
    """A lowered frame: the skeleton around its alternative of pieces, each piece's expression over local slot
    leaves with the slots it reads, the slot count, the special tokens the frame uses and the pieces without their
    shared tail (None: they share none, or one does not end with a slot before it)."""

    skeleton: ir.Node
    pieces: tuple[tuple[ir.Node, tuple[int, ...]], ...]
    slots: int
    specials: tuple[str, ...]
    shared: SharedTail | None


def frame_of(main: ir.Node, leaves: SlotLeaves, specials: tuple[str, ...]) -> Frame | None:
    """The frame of a grammar whose every rule is inlined in `main`, or None where it has no alternative of
    pieces, a slot stands outside the pieces or the parser did not read each slot once."""
    alternative = largest_piece_alternative(main)
    if alternative is None or not leaves.each_once():
        return None
    skeleton = with_placeholder(main, alternative)
    if any(id(node) in leaves.by_leaf for node in ir.distinct_nodes(skeleton)):
        return None
    pieces = []
    for item in alternative.items:
        check_deadline("lowering a grammar's frame")
        flat = _flat_items(item)
        nodes = ir.distinct_nodes(item) if flat is None else reversed(flat)
        slots = [leaves.by_leaf[id(node)] for node in nodes if id(node) in leaves.by_leaf]
        local = {id(leaves.leaves[slot]): _local_leaf(index) for index, slot in enumerate(slots)}
        pieces.append((_put_in(item, local), tuple(slots)))
    return Frame(skeleton, tuple(pieces), len(leaves.leaves), specials, _shared_tail(main, alternative, pieces))


_VALUE_GAP = JsonTokens(JSON_WHITESPACE).ws
"""The whitespace a `%json` value's IR ends with (`schema_to_ir` puts it around the value)."""


def _shared_tail(main: ir.Node, alternative: ir.Alt, pieces: list[tuple[ir.Node, tuple[int, ...]]]
                 ) -> SharedTail | None:
    """The frame's pieces without their shared tail, where they have one and each ends with a slot before it that
    stands nowhere else in the piece (a rule read twice in a piece puts one slot's leaf in both places: only the
    last may go in without its trailing whitespace)."""
    tail = shared_tail(alternative.items)
    if not tail:
        return None
    leaves = {id(leaf): index for index, leaf in enumerate(_LOCAL_LEAVES)}
    kept, last = [], []
    for local, _ in pieces:
        assert isinstance(local, ir.Seq)
        piece = without_tail(local, tail)
        end = piece.items[-1]
        index = leaves.get(id(end))
        before = piece.items[:-1] if _flat_items(piece) is not None else ir.distinct_nodes(ir.seq(*piece.items[:-1]))
        if index is None or any(node is end for node in before):
            return None
        kept.append(piece)
        last.append(index)
    skeleton = with_placeholder(main, alternative, ir.seq(PLACEHOLDER_NODE, _VALUE_GAP, ir.literal(tail)))
    return SharedTail(skeleton, tuple(kept), tuple(last))


def compile_frame(frame: Frame, slotted: SlottedText, max_states: int) -> Automaton | None:
    """The DFA of the frame with `slotted`'s schemas in its slots, or None where the grammar must be lowered whole (a
    schema refused, recursive or empty, a piece that matches nothing, a result past `max_states`).  The pieces go
    in without their shared tail where each ends in a value whose trailing whitespace can move out with it and none
    reads on after accepting (`substitution.blocks` lays such pieces out as blocks); else whole."""
    values = []
    for text, schema in zip(slotted.schemas, slotted.values):
        value = slot_value(text, schema)
        if value is None:
            return None
        values.append(value)
    if frame.shared is not None:
        pieces = _shortened(frame, frame.shared, values, max_states)
        if pieces is not None:
            return assembled(pieces, frame.shared.skeleton, max_states)
    whole = []
    for local, slots in frame.pieces:
        check_deadline("compiling grammar pieces")
        piece = _piece(local, tuple(values[slot].whole for slot in slots), max_states)
        if piece is None:
            return None
        whole.append(piece)
    return assembled(whole, frame.skeleton, max_states)


def _shortened(frame: Frame, shared: SharedTail, values: list[SlotValue], max_states: int) -> list[Automaton] | None:
    """The DFAs of the pieces without their shared tail, the last slot's value without its trailing whitespace;
    None where a value does not end with it, a piece matches nothing or one reads on after accepting (checked as
    each is built: a grammar with one integer value among many compiles the pieces before it twice, not all)."""
    keys, items = [], []
    for (_, slots), local, last in zip(frame.pieces, shared.pieces, shared.last):
        held = [values[slot].whole for slot in slots]
        bare = values[slots[last]].bare
        if bare is None:
            return None
        held[last] = bare
        keys.append((local, tuple(held)))
        items.append(partial(_instantiated, local, tuple(held)))
    return kept_closed_pieces(keys, items, max_states)


def _piece(local: ir.Node, held: tuple[ir.Node, ...], max_states: int) -> Automaton | None:
    """A piece's DFA with `held` in its local slots, kept per piece expression and values."""
    return kept_piece((local, held), partial(_instantiated, local, held), max_states)


@dataclass(frozen=True)
class SlotValue:
    """A `%json` schema's values as IR (`whole`), and the same without the whitespace it ends with (`bare`; None
    where it does not end with `_VALUE_GAP`): kept together, so a piece keyed by either holds the same objects."""

    whole: ir.Node
    bare: ir.Node | None


def slot_value(text: str, schema: object) -> SlotValue | None:
    """The values of the `%json` schema `text` (read: `schema`) as a non-recursive schema's IR, kept per text, or
    None where the grammar must be lowered whole to refuse or embed it."""
    found: SlotValue | None = _SLOT_VALUES.get((), partial(_value, schema), (text,))
    return found


def _value(schema: object) -> SlotValue | None:
    if not isinstance(schema, (dict, bool)) or (isinstance(schema, dict) and is_recursive_schema(schema)):
        return None
    try:
        node = schema_to_ir(schema, whitespace=JSON_WHITESPACE)
    except (StateBudgetError, CompileTimeError):
        raise
    except CompileError:
        return None
    if node == ir.NOTHING or holds_grammar(node):
        return None
    bare = None
    if isinstance(node, ir.Seq) and len(node.items) >= 2 and node.items[-1] == _VALUE_GAP:
        bare = ir.seq(*node.items[:-1])
    return SlotValue(node, bare)


def _instantiated(local: ir.Node, values: tuple[ir.Node, ...]) -> ir.Seq:
    """A piece's expression with its local slots' values put in."""
    item = _put_in(local, {id(_local_leaf(index)): value for index, value in enumerate(values)})
    assert isinstance(item, ir.Seq)
    return item


_HOLDING = frozenset((ir.Seq, ir.Alt, ir.Repeat))
"""The node types that hold others (none has subclasses)."""


def _flat_items(node: ir.Node) -> tuple[ir.Node, ...] | None:
    """The items of a sequence none of whose items holds others (bytes and leaves in a row: a tool call's piece),
    else None.  `ir.distinct_nodes` of such a sequence is it and then its items, last to first."""
    if type(node) is not ir.Seq or not _HOLDING.isdisjoint(map(type, node.items)):
        return None
    return node.items


def _put_in(node: ir.Node, by_id: Mapping[int, ir.Node]) -> ir.Node:
    """`_replaced`, item by item where `node` is flat (`_flat_items`): walking a piece would visit each byte of its
    head."""
    flat = _flat_items(node)
    return _replaced(node, by_id) if flat is None else ir.seq(*(by_id.get(id(part), part) for part in flat))


def _replaced(node: ir.Node, by_id: Mapping[int, ir.Node]) -> ir.Node:
    """`node` with each leaf whose id is in `by_id` replaced by its node there."""
    return rewritten(node, lambda current: by_id.get(id(current)))
