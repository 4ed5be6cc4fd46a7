"""Value sets by kind and their exact complements: every value of some kinds, or of a kind but none of some values.

JSON values fall into kinds (null, boolean, object, array, string, integer, fraction); a schema
is restricted to kinds by `typed`, and `outside_values` is the schema of the values of some
kinds that are none of a finite list (numbers compared as values, strings as decoded text,
empty containers by size).  Non-integer numbers alone have no `type` spelling, so that one
set is refused or marked approximated (`INEXACT`).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from stdsl.compiler.json_schema.resolve import INEXACT, KINDS, Schema, json_key, kinds_of_types, kinds_of_value
from stdsl.compiler.json_schema.scalars.string_units import char_trie
from stdsl.errors import SchemaError

ALL_KINDS = frozenset(KINDS)
NUMBER_KINDS = frozenset({"integer", "fraction"})


def typed(kinds: set[str] | frozenset[str], strict: bool = False) -> Schema:
    """The schema of every value of the given kinds (False when none).

    Fractions without integers have no `type` spelling: with `strict` that raises SchemaError,
    otherwise they are left out and the result marked `_inexact` (an under-approximation: sound
    as a constraint, never to be negated again).
    """
    if strict and "fraction" in kinds and "integer" not in kinds:
        raise SchemaError("non-integer numbers alone have no exact form (a 'type' cannot say 'number but not "
                          "integer')", "#")
    names = [t for t in ("null", "boolean", "object", "array", "string") if t in kinds]
    if NUMBER_KINDS <= kinds:
        names.append("number")
    elif "integer" in kinds:
        names.append("integer")
    if not names:
        return {"enum": [], INEXACT: True} if "fraction" in kinds else False
    out: dict = {"type": names}
    if "fraction" in kinds and "integer" not in kinds:
        out[INEXACT] = True
    return out


def typed_object(kinds: set[str] | frozenset[str], strict: bool) -> dict:
    """`typed` for a non-empty set of kinds, which is always a schema object."""
    base = typed(kinds, strict)
    if not isinstance(base, dict):
        raise ValueError(f"no schema object for the kinds {sorted(kinds)}")
    return base


def union(parts: Sequence[Schema]) -> Schema:
    """The exact disjunction of schemas (False parts dropped)."""
    kept = [p for p in parts if p is not False]
    if not kept:
        return False
    if any(p is True or p == {} for p in kept):
        return {}
    return kept[0] if len(kept) == 1 else {"anyOf": kept}


def schema_types(flat: dict) -> list[str]:
    """The `type` of a flattened schema as a list (every type when absent)."""
    value = flat.get("type", ["null", "boolean", "object", "array", "number", "string"])
    return value if isinstance(value, list) else [value]


def possible_kinds(flat: Schema) -> frozenset[str]:
    """A superset of the kinds of the instances of a flattened schema (by `type` and `enum`)."""
    if flat is False:
        return frozenset()
    if flat is True:
        return ALL_KINDS
    kinds = frozenset(kinds_of_types(schema_types(flat)))
    if "enum" in flat:
        kinds &= frozenset().union(*(kinds_of_value(v) for v in flat["enum"]))
    return kinds


def outside_values(values: list[Any], kinds: frozenset[str], path: str, strict: bool = False) -> Schema:
    """The values of `kinds` that are none of `values` (compared as JSON values: 1 equals 1.0).

    Non-empty objects and arrays among `values` are refused here (see `negation.const_schema`).
    """
    excluded = {json_key(v): v for v in values}
    parts: list[Schema] = []
    if "null" in kinds and json_key(None) not in excluded:
        parts.append({"type": "null"})
    if "boolean" in kinds:
        kept = [b for b in (True, False) if json_key(b) not in excluded]
        parts.append({"enum": kept} if kept else False)
    numbers = kinds & NUMBER_KINDS
    if numbers:
        parts.append(_numbers_outside([v for v in excluded.values() if kinds_of_value(v) & NUMBER_KINDS], numbers,
                                      strict))
    if "string" in kinds:
        strings = [v for v in excluded.values() if isinstance(v, str)]
        parts.append({"type": "string", "pattern": string_complement_pattern(strings)} if strings
                     else {"type": "string"})
    for kind, empty, grow in (("object", {}, "minProperties"), ("array", [], "minItems")):
        if kind in kinds:
            mine = [v for v in excluded.values() if kinds_of_value(v) == {kind}]
            if mine and mine != [empty]:
                raise SchemaError(f"cannot negate an enum of non-empty {kind}s exactly", path)
            parts.append({"type": kind, grow: 1} if mine else {"type": kind})
    return union(parts)


def _numbers_outside(values: list[Any], kinds: frozenset[str], strict: bool) -> Schema:
    """Numbers of `kinds` other than `values`: the open intervals between the sorted excluded values."""
    base = typed_object(kinds, strict)
    ordered = sorted({Decimal(repr(v)) if isinstance(v, float) else Decimal(v): v for v in values}.items())
    if not ordered:
        return base
    points = [v for _, v in ordered]
    parts = [{**base, "exclusiveMaximum": points[0]}, {**base, "exclusiveMinimum": points[-1]}]
    parts += [{**base, "exclusiveMinimum": lo, "exclusiveMaximum": hi} for lo, hi in zip(points, points[1:])]
    return union(parts)


def char_escape(ch: str) -> str:
    """One character as a regex escape valid in and out of classes."""
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


ANY_CHAR = "[\\x00-\\U0010ffff]"
ANY_TEXT = ANY_CHAR + "*"


def string_complement_pattern(strings: list[str]) -> str:
    """An anchored pattern matching exactly the strings (decoded) that are none of `strings`."""
    return f"^{_outside(char_trie(strings))}$"


def _outside(trie: dict) -> str:
    """Regex of the continuations from this trie node that spell none of the stored strings."""
    children = sorted(c for c in trie if c is not None)
    parts = [] if None in trie else [""]
    parts.append(f"[^{''.join(char_escape(c) for c in children)}]{ANY_TEXT}" if children else f"{ANY_CHAR}{ANY_TEXT}")
    parts += [f"{char_escape(c)}{_outside(trie[c])}" for c in children]
    return "(?:" + "|".join(parts) + ")"
