"""A tool's closed arguments object laid out from its members' value DFAs, with no subset construction over the
whole object.

A JSON Schema object of the shape tool schemas have (`type: object`, `properties` in schema order, some of them
`required`, no other members: `additionalProperties: false`, or nothing said of others under strict) lowers to
`{`, a non-empty run of its members in schema order, every required one present, joined by the item separator,
then `}` (or `{}` where none is required), each member `"KEY": VALUE` (`json_schema.to_ir._object`).  Laid out
here: each member's value is its own schema's DFA (compiled and kept per value schema, so every string member of
every tool shares one), and between values sits a junction, the trie of what may come next: after member j the
separator and the key of each member up to the next required one, and `}` where none is required from there; the
first member has no separator, so the start has its own junction (`{` and the keys up to the first required one).
Each junction's root is every accepting state of the value before it (a JSON value never reads on with the
separator or `}`; where one would, the layout answers None).  The junctions' tails into one key share their states,
and the layout is trim but not minimized: on the benchmark's random tools it is the minimal DFA (400 of 400), and
where it is not, its language is still exactly the whole object's (the tool reply path takes trim tables, as it
takes `call_layout`'s and `build_automaton`'s past `MINIMIZE_UP_TO`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from stdsl import caches
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.ops import joint_classes
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.json_schema.json_tokens import Whitespace
from stdsl.compiler.json_schema.resolve import pointer_token
from stdsl.compiler.json_schema.scalars.strings import canonical_string
from stdsl.compiler.tools.call_layout import trie_insert

CLOSED_OBJECT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "description",
                                    "title"})
"""The keywords a laid-out object schema may have: any other (counts, patterns, dependencies, `$ref`) falls back to
the whole-object compile."""
DEFINITIONS = frozenset({"$defs", "definitions"})
"""Where a schema whose members' references are resolved (`object_layout`'s `resolved`) may hold their targets."""
LAYOUT_UP_TO = 20_000
"""A layout with more states falls back to the whole-object compile, which refuses what passes its state budget."""
MAX_SCHEMA_DEPTH = 24
"""A schema nesting deeper falls back: compiled apart, its members would start shallower than the JSON Schema
compiler's nesting limit counts them in the whole object."""

ValueAutomaton = Callable[[Mapping[str, Any], str], "Automaton | None"]
"""A member's value DFA from its schema and schema path (None: it does not compile apart, fall back)."""

_OBJECTS = caches.kind("argument objects")
"""A laid-out arguments object's minimal DFA (None: it falls back) per canonical schema, spelling, strictness and
lowering of its values."""


def object_layout(schema: Any, path: str, whitespace: Whitespace | None, strict: bool,
                  value_of: ValueAutomaton, lowering: Hashable, resolved: Any = None) -> Automaton | None:
    """The minimal DFA of `schema`'s JSON texts laid out from its members' values (`value_of` each), or None where
    the schema is not a closed object of the shape above, a value does not compile apart, or the spelling has
    whitespace between tokens.  `lowering` names what `value_of` makes of a value schema (kept objects are keyed by
    it: a tool's arguments keep integers to 20 digits, a structural tag's schema does not).

    `resolved`, where `value_of` resolves a member's references in the document `schema` sits in (a tool's
    arguments, `json_schema.member_document`), is `schema` as a document of its own: members may then refer
    (`$ref`) and the schema hold `$defs`, and the object is kept by `resolved`, which holds what they refer to."""
    if whitespace is not None and whitespace.max_run:
        return None
    members = _members(schema, strict, resolved is not None)
    if members is None:
        return None
    keyed = schema if resolved is None else resolved
    key = (json.dumps(keyed, separators=(",", ":"), ensure_ascii=False), repr(whitespace), strict, lowering)

    def build() -> Automaton | None:
        values = []
        for name, value_schema, _ in members:
            value = value_of(value_schema, f"{path}/properties/{pointer_token(name)}")
            if value is None:
                return None
            values.append(value)
        item, colon = whitespace.separators if whitespace is not None else (",", ":")
        keys = [(canonical_string(name) + colon).encode("utf-8") for name, _, _ in members]
        return _laid_out(keys, values, [required for _, _, required in members], item.encode("utf-8"))

    return _OBJECTS.get((), build, key)


def _members(schema: Any, strict: bool, references: bool) -> list[tuple[str, Mapping[str, Any], bool]] | None:
    """(name, value schema, required) of each declared member in schema order, or None for another shape (with
    `references`, `$defs` and members that refer are of this shape too)."""
    allowed = CLOSED_OBJECT_KEYWORDS | DEFINITIONS if references else CLOSED_OBJECT_KEYWORDS
    if not isinstance(schema, Mapping) or not set(schema) <= allowed or schema.get("type") != "object":
        return None
    closing = schema.get("additionalProperties", None if strict else True)
    properties, required = schema.get("properties"), schema.get("required", [])
    if closing not in (None, False) or not isinstance(properties, Mapping) or not properties:
        return None
    if not isinstance(required, list) or not all(isinstance(name, str) and name in properties for name in required):
        return None
    if not all(isinstance(value, Mapping) for value in properties.values()) or not _plain(properties, 0, references):
        return None
    return [(name, value, name in required) for name, value in properties.items()]


def _plain(value: Any, depth: int, references: bool) -> bool:
    """Whether a schema part holds no `$` keyword (a reference, an id, a draft; with `references`, a `$ref` string
    is allowed) and nests at most `MAX_SCHEMA_DEPTH` levels: compiled apart, its meaning is the one it has in the
    whole object."""
    if depth > MAX_SCHEMA_DEPTH:
        return False
    if isinstance(value, Mapping):
        return all((not (isinstance(key, str) and key.startswith("$"))
                    or references and key == "$ref" and isinstance(part, str)) and _plain(part, depth + 1, references)
                   for key, part in value.items())
    if isinstance(value, list):
        return all(_plain(part, depth + 1, references) for part in value)
    return True


def _next_members(required: list[bool], start: int) -> tuple[range, bool]:
    """The members that may come next from member `start` on (up to the first required one) and whether the
    object may close there (none required from `start` on)."""
    for index in range(start, len(required)):
        if required[index]:
            return range(start, index + 1), False
    return range(start, len(required)), True


def _laid_out(keys: list[bytes], values: list[Automaton], required: list[bool], item: bytes) -> Automaton | None:
    """The object's DFA (see the module), trim; None where a junction's texts are not prefix-free, a value reads on
    with what follows it, or the layout passes `LAYOUT_UP_TO` states."""
    check_deadline("laying out an arguments object")
    count = len(values)
    offsets = [0] * count
    size = 0
    junctions: list[list[tuple[bytes, int]]] = []
    """Each junction's (text, member to enter or -1 for the end): the start's, then the one after each member."""
    for start, before in [(0, b"")] + [(index + 1, item) for index in range(count)]:
        following, may_close = _next_members(required, start)
        entries = [((b"{" if start == 0 else before) + keys[member], member) for member in following]
        if may_close:
            entries.append((b"{}" if start == 0 else b"}", -1))
        junctions.append(entries)
    rows: list[dict[int, int]] = []
    """Trie states of every junction (state 0 the start junction's root, which is the object's start): by byte, a
    trie state, or where a text ends `-2 - member` (a value's start) or -1 (the end)."""
    roots: list[int] = []
    for entries in junctions:
        roots.append(len(rows))
        rows.append({})
        for text, member in entries:
            if trie_insert(rows, roots[-1], text, -2 - member if member >= 0 else -1) is None:
                return None
    root_states = set(roots)
    same = _shared_suffixes(rows, root_states)
    kept = [state for state in range(len(rows)) if same[state] == state and (state == 0 or state not in root_states)]
    number = np.full(len(rows), -1, dtype=np.int64)
    """Trie state -> layout state: the kept trie states first (the start's root is state 0); every other root
    stands for the accepting states of the value before it, a merged state for the one it was merged into."""
    number[kept] = np.arange(len(kept))
    state_of = number[same].tolist()
    for index, value in enumerate(values):
        offsets[index] = len(kept) + size
        size += value.num_states
    end = len(kept) + size
    total = end + 1
    if total > LAYOUT_UP_TO:
        return None
    joint, first = joint_classes([value.byte_class for value in values], {byte for text in keys for byte in text}
                                 | set(item) | set(b"{}"))
    table = np.full((total, len(first)), -1, dtype=np.int64)
    for index, value in enumerate(values):
        block = value.class_transitions[:, value.byte_class[first]].astype(np.int64)
        table[offsets[index]:offsets[index] + value.num_states] = np.where(block >= 0, block + offsets[index], -1)

    def target(code: int) -> int:
        return state_of[code] if code >= 0 else (end if code == -1 else offsets[-2 - code])

    for junction, root in enumerate(roots):
        sources = np.zeros(1, dtype=np.int64) if junction == 0 else (np.flatnonzero(values[junction - 1].accepting)
                                                                     + offsets[junction - 1])
        columns = joint[list(rows[root])][np.newaxis, :]
        if bool((table[sources[:, np.newaxis], columns] >= 0).any()):
            return None
        table[sources[:, np.newaxis], columns] = [target(code) for code in rows[root].values()]
    cells = [(state_of[state], byte, target(code))  # every kept trie state but the start's root, in one write
             for state in kept[1:] for byte, code in rows[state].items()]
    if cells:
        at, on, to = zip(*cells)
        table[list(at), joint[list(on)]] = to
    accepting = np.zeros(total, dtype=bool)
    accepting[end] = True
    return Automaton.from_classes(table, accepting, joint)


def _shared_suffixes(rows: list[dict[int, int]], roots: set[int]) -> list[int]:
    """Each trie state's representative: non-root states with the same moves (to the same representatives, values
    or the end) merged, from the leaves up (a state's children come after it), so the junctions' tails into the same
    key share their states."""
    same = list(range(len(rows)))
    seen: dict[tuple[tuple[int, int], ...], int] = {}
    for state in range(len(rows) - 1, 0, -1):
        if state in roots:
            continue
        moves = tuple(sorted((byte, same[code] if code >= 0 else code) for byte, code in rows[state].items()))
        same[state] = seen.setdefault(moves, state)
    return same
