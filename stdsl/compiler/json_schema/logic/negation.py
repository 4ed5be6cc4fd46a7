"""`mine ∧ ¬other` for two flattened schemas, exactly, or SchemaError: the engine of `not`, `oneOf` and `else`.

The difference is a union of subsets of `mine`: its values of kinds `other` never admits, and
for each keyword of `other` the values of `mine` failing it (a failed bound is the opposite
bound, a failed `required` an absent member, a failed `properties` entry a present member in
`mine`'s member schema minus `other`'s, recursively; a failed finite set the other values).
Working inside `mine` makes more failures exact than a bare complement: when `mine` is a
closed object, "some member outside `other`'s properties" or "some name failing
`propertyNames`" is a choice among `mine`'s finitely many names; an item failure is a choice
among positions when `mine` bounds the length, or "any item" when `mine`'s items never meet
`other`'s; a `pattern` fails on the strings of its complement pattern (`pattern_complement.py`),
and a `pattern` or `format` on none of `mine`'s strings when `mine`'s decoded language lies
inside it.  What stays inexpressible (an item failing somewhere in an unbounded array, `format`
failing on part of `mine`'s strings, `multipleOf` not implied by `mine`, …) raises SchemaError
naming the keyword.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.json_schema.logic.complement import (
    NUMBER_KINDS,
    outside_values,
    possible_kinds,
    schema_types,
    typed,
    typed_object,
    union,
)
from stdsl.compiler.json_schema.logic.disjoint import (
    approximated,
    disjoint,
    item_at,
    member_schema,
    overlapping_kinds,
    same_schema,
    string_subset,
    strings_never_meet,
)
from stdsl.compiler.json_schema.logic.pattern_complement import pattern_complement
from stdsl.compiler.json_schema.logic.satisfies import satisfies
from stdsl.compiler.json_schema.resolve import (
    INEXACT,
    MAX_NESTING,
    SPEC_FORMATS,
    Context,
    Schema,
    flatten,
    kinds_of_types,
    kinds_of_value,
)
from stdsl.compiler.json_schema.scalars.keys import name_matches, pattern_matcher
from stdsl.compiler.json_schema.schema_merge import merge
from stdsl.compiler.json_schema.validate import conforms
from stdsl.errors import SchemaError

MAX_ITEM_POSITIONS = 8
MAX_NAMES = 64
NUMBER_KEYWORDS = {"minimum": "exclusiveMaximum", "exclusiveMinimum": "maximum",
                   "maximum": "exclusiveMinimum", "exclusiveMaximum": "minimum"}
KIND_OF_KEYWORD = {
    "minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
    "minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number",
    "multipleOf": "number", "items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array",
    "uniqueItems": "array", "properties": "object", "required": "object", "additionalProperties": "object",
    "patternProperties": "object", "propertyNames": "object", "minProperties": "object",
    "maxProperties": "object", "dependentRequired": "object"}


def difference(mine: Schema, other: Schema, ctx: Context, path: str, strict: bool = False) -> Schema:
    """The instances of the flattened schema `mine` that fail the flattened schema `other`, or SchemaError.

    Non-integer numbers alone have no `type` spelling: with `strict` a difference needing them is
    refused; otherwise they are left out and the result marked `_inexact` (sound, not complete).
    Overlapping `oneOf` branches multiply the parts of a difference, so every call checks the time limit.
    """
    check_deadline("subtracting overlapping schemas (oneOf, not, else)")
    if mine is False or other is False:
        return mine
    if other is True or other == {}:
        return False
    if approximated(other, ctx.approximated):
        raise SchemaError("cannot negate a schema that was already approximated (a negated integer type or a "
                          "length above 1000)", path)
    mine = {} if mine is True else mine
    if same_schema(mine, other):
        return False
    if "enum" in mine:
        return {**mine, "enum": [v for v in mine["enum"] if not satisfies(v, other, ctx, path)]}
    if "anyOf" in mine:
        rest = {k: v for k, v in mine.items() if k != "anyOf"}
        inner = _entered(ctx, f"{path}/anyOf")
        return union([difference(merge(rest, flatten(branch, f"{path}/anyOf/{i}", inner)[0], path), other,
                                 inner, path, strict) for i, branch in enumerate(mine["anyOf"])])
    if disjoint(mine, other, ctx):
        return mine
    if "anyOf" in other:
        rest = {k: v for k, v in other.items() if k != "anyOf"}
        every: Schema = mine
        inner = _entered(ctx, f"{path}/anyOf")
        for i, branch in enumerate(other["anyOf"]):
            every = difference(every, flatten(branch, f"{path}/anyOf/{i}", inner)[0], inner, path, strict)
        return union([difference(mine, rest, ctx, path, strict), every])
    own = possible_kinds(mine)
    if "enum" in other:
        shared = own & frozenset(kinds_of_types(schema_types(other)))
        return union([_restrict(mine, own - shared, strict, path),
                      _outside_enum(mine, other, shared, ctx, path, strict)])
    shared = overlapping_kinds(mine, other, ctx)
    parts: list[Schema] = [_restrict(mine, own - shared, strict, path)]
    for key, value in other.items():
        if key not in ("type", INEXACT):
            parts.extend(_keyword_failures(key, value, mine, other, shared, ctx, f"{path}/{key}", strict))
    return union(parts)


def _entered(ctx: Context, path: str) -> Context:
    """`ctx` one level deeper for a difference's `anyOf` branches, so that a branch that is the schema again (a
    reference cycle through `anyOf`: `X = {"anyOf": [{"$ref": X}]}`) is refused at the nesting limit, at `path`,
    instead of recursing until Python's stack runs out."""
    if ctx.depth >= MAX_NESTING:
        raise SchemaError(f"schema nests deeper than {MAX_NESTING} levels (a difference of schemas that reference "
                          "themselves through anyOf)", path)
    return ctx.entering()


def _restrict(mine: dict, kinds: frozenset[str], strict: bool, path: str) -> Schema:
    """`mine` on the given kinds only."""
    if not kinds:
        return False
    if kinds == possible_kinds(mine):
        return mine
    return merge(mine, typed(kinds, strict), path)


def const_schema(value: Any) -> Schema:
    """A schema whose only instance is the JSON value (objects by key set and members, arrays by items)."""
    if isinstance(value, dict):
        return {"type": "object", "required": list(value), "additionalProperties": False,
                "properties": {k: {"const": v} for k, v in value.items()}}
    if isinstance(value, list):
        return {"type": "array", "minItems": len(value), "maxItems": len(value),
                "prefixItems": [{"const": v} for v in value], "items": False} if value else {"type": "array",
                                                                                              "maxItems": 0}
    return {"enum": [value]}


def _outside_enum(mine: dict, other: dict, shared: frozenset[str], ctx: Context, path: str, strict: bool) -> Schema:
    """The values of `mine` on the `shared` kinds that are none of `other`'s enum members."""
    if _asserts_format(other):
        raise SchemaError("cannot negate a 'format' (assertion and annotation readings differ)", path)
    values = [v for v in other["enum"] if kinds_of_value(v) & shared and conforms(v, other, ctx, path)]
    containers = [v for v in values if isinstance(v, (dict, list)) and v]
    scalars = [v for v in values if not (isinstance(v, (dict, list)) and v)]
    result = merge(mine, outside_values(scalars, shared, path, strict), path) if shared else False
    for value in containers:
        result = difference(result, flatten(const_schema(value), path, ctx.entering())[0], ctx, path, strict)
    return result


def _asserts_format(node: Any) -> bool:
    """Whether a flattened schema has a `format` the compiler asserts, at any depth."""
    if isinstance(node, dict):
        return node.get("format") in SPEC_FORMATS or any(_asserts_format(v) for k, v in node.items() if k != "enum")
    return isinstance(node, list) and any(_asserts_format(v) for v in node)


def _keyword_failures(key: str, value: Any, mine: dict, other: dict, shared: frozenset[str], ctx: Context,
                      where: str, strict: bool) -> list[Schema]:
    """The instances of `mine` (on the kinds both admit) that fail one keyword of `other`, as schemas to unite."""
    kind = KIND_OF_KEYWORD.get(key)
    if kind is None:
        raise SchemaError(f"cannot negate '{key}' exactly", where)
    kinds = shared & (NUMBER_KINDS if kind == "number" else {kind})
    if not kinds:
        return []
    base = typed_object(kinds, strict)
    if key in NUMBER_KEYWORDS:
        return [merge(mine, {**base, NUMBER_KEYWORDS[key]: value}, where)]
    if key in ("minLength", "minItems"):
        return [merge(mine, {**base, key.replace("min", "max"): value - 1}, where)] if value > 0 else []
    if key in ("maxLength", "maxItems"):
        return [merge(mine, {**base, key.replace("max", "min"): value + 1}, where)]
    if key == "dependentRequired":
        return [_with_member(_absent(mine, base, other_name), base, name, member_schema(mine, name, ctx))
                for name, others in value.items() for other_name in others if other_name != name]
    if key == "minProperties" and value <= 1:
        return [merge(mine, {**base, "maxProperties": 0}, where)] if value == 1 else []
    if key == "maxProperties" and value == 0:
        return [merge(mine, {**base, "minProperties": 1}, where)]
    if key == "required":
        return [_absent(mine, base, name) for name in value]
    if key in ("properties", "additionalProperties", "patternProperties", "propertyNames"):
        return _member_failures(key, value, mine, other, base, ctx, where)
    if key in ("prefixItems", "items"):
        return _item_failures(key, mine, other, base, ctx, where)
    if key in ("pattern", "format"):
        if string_subset(mine, {key: value}):
            return []
        if key == "pattern" and strings_never_meet(mine, {key: value}):
            return [merge(mine, base, where)]
        if key == "pattern":
            return [merge(mine, {**base, "pattern": pattern_complement(value, where)}, where)]
        raise SchemaError("cannot negate a 'format' (assertion and annotation readings differ)", where)
    if key == "multipleOf" and _multiple_implied(mine, kinds, value):
        return []
    if key == "uniqueItems" and (value is False or int(mine.get("maxItems", 2)) <= 1):
        return []
    raise SchemaError(f"cannot negate '{key}' exactly (its failure is not expressible as a schema)", where)


def _multiple_implied(mine: dict, kinds: frozenset[str], step: Any) -> bool:
    """Whether every number of `mine` (on `kinds`) is a multiple of `step`."""
    divisor = Decimal(repr(step))
    if kinds == {"integer"} and Decimal(1) % divisor == 0:
        return True
    return "multipleOf" in mine and Decimal(repr(mine["multipleOf"])) % divisor == 0


def _absent(mine: Schema, base: dict, name: str) -> Schema:
    """The objects of `mine` without the member `name`."""
    out = merge(mine, base, "#")
    if not isinstance(out, dict) or name in out.get("required", []):
        return False
    return {**out, "properties": {**out.get("properties", {}), name: False}}


def _with_member(mine: Schema, base: dict, name: str, value: Schema) -> Schema:
    """The objects of `mine` that have the member `name` with a value in `value` (a subset of its member schema).

    Declaring `name` with `value` keeps `mine`'s patterns applying to it, and `value` already lies
    inside `additionalProperties` where that applied, so no merge of object keywords is needed.
    """
    out = merge(mine, base, "#")
    if value is False or not isinstance(out, dict):
        return False
    return {**out, "required": list(dict.fromkeys([*out.get("required", []), name])),
            "properties": {**out.get("properties", {}), name: value}}


def closed_names(mine: dict, ctx: Context) -> list[str] | None:
    """The names an object of `mine` may have, when finitely many (None when any other name may occur)."""
    if mine.get("maxProperties") == 0:
        return []
    names = mine.get("propertyNames")
    if isinstance(names, dict):
        names_flat = flatten(names, "#/propertyNames", ctx.entering())[0]
        if isinstance(names_flat, dict) and "enum" in names_flat:
            return [n for n in names_flat["enum"] if isinstance(n, str)
                    and member_schema(mine, n, ctx) is not False and conforms(n, names_flat, ctx)]
    if mine.get("additionalProperties", True) is not False:
        return None
    names = list(mine.get("properties", {}))
    for pattern in mine.get("patternProperties", {}):
        matched = finite_language(pattern_matcher(pattern, "#/patternProperties"))
        if matched is None:
            return None
        names += [n for n in matched if n not in names]
    return [n for n in names if member_schema(mine, n, ctx) is not False]


def finite_language(automaton: Automaton) -> list[str] | None:
    """The UTF-8 words of a trim automaton when it has at most `MAX_NAMES` (None when more or infinitely many)."""
    table = automaton.transitions
    words: list[str] = []
    pending: list[tuple[int, bytes, frozenset[int]]] = [(0, b"", frozenset({0}))]
    while pending:
        state, word, seen = pending.pop()
        if automaton.accepting[state]:
            words.append(word.decode("utf-8", "replace"))
        for byte in np.flatnonzero(table[state] >= 0):
            target = int(table[state, byte])
            if target in seen or len(words) + len(pending) > MAX_NAMES:
                return None
            pending.append((target, word + bytes([int(byte)]), seen | {target}))
    return words


def failing_names(names: Schema, ctx: Context) -> list[str] | None:
    """The names failing a `propertyNames` schema when they are finitely many and known: for `not` of an enum."""
    if isinstance(names, dict) and set(names) == {"not"}:
        excluded = flatten(names["not"], "#/propertyNames/not", ctx.entering())[0]
        if isinstance(excluded, dict) and "enum" in excluded:
            return [v for v in excluded["enum"] if isinstance(v, str) and conforms(v, excluded, ctx)]
    return None


def _member_failures(key: str, value: Any, mine: dict, other: dict, base: dict, ctx: Context,
                     where: str) -> list[Schema]:
    """Objects of `mine` with a member failing `other`'s `properties`, `additionalProperties`,
    `patternProperties` or `propertyNames`."""
    out: list[Schema] = []
    if key == "properties":
        for name, sub in value.items():
            failing = difference(member_schema(mine, name, ctx), flatten(sub, f"{where}/{name}", ctx.entering())[0],
                                 ctx, f"{where}/{name}")
            out.append(_with_member(mine, base, name, failing))
        return out
    if key == "additionalProperties" and (value is True or value == {}):
        return []
    names = closed_names(mine, ctx)
    if key == "propertyNames" and names is None:
        if flatten(value, where, ctx.entering())[0] is False:
            return [merge(mine, {**base, "minProperties": 1}, where)]
        names = failing_names(value, ctx)
        if names is not None:
            return [_with_member(mine, base, name, member_schema(mine, name, ctx)) for name in names]
    if names is None:
        raise SchemaError(f"cannot negate '{key}' exactly (its failure is not expressible as a schema)", where)
    for name in names:
        mine_member = member_schema(mine, name, ctx)
        if key == "propertyNames":
            if not satisfies(name, value, ctx, where):
                out.append(_with_member(mine, base, name, mine_member))
            continue
        if key == "additionalProperties":
            if name in other.get("properties", {}) or _matched(other, name):
                continue
            targets = [value]
        else:
            targets = [s for p, s in value.items() if p in _matched(other, name)]
        for target in targets:
            failing = difference(mine_member, flatten(target, where, ctx.entering())[0], ctx, where)
            out.append(_with_member(mine, base, name, failing))
    return out


def _matched(flat: dict, name: str) -> list[str]:
    """The `patternProperties` patterns of `flat` that a name matches."""
    return [p for p in flat.get("patternProperties", {})
            if name_matches(pattern_matcher(p, "#/patternProperties"), name)]


def _item_failures(key: str, mine: dict, other: dict, base: dict, ctx: Context, where: str) -> list[Schema]:
    """Arrays of `mine` with an item failing `other`'s `prefixItems` (one position) or `items` (any position
    past `other`'s prefix: enumerated up to `mine`'s or `other`'s `maxItems`, or any item at all when
    `mine`'s items never meet `other`'s)."""
    prefix = other.get("prefixItems", [])
    highs = [int(h) for h in (mine.get("maxItems"), other.get("maxItems")) if h is not None]
    high = min(highs) if highs else None

    def at(position: int, failing: Schema) -> Schema:
        if failing is False:
            return False
        return merge(mine, {**base, "minItems": position + 1, "prefixItems": [True] * position + [failing]}, where)

    if key == "prefixItems":
        return [at(i, difference(item_at(mine, i, ctx), flatten(sub, f"{where}/{i}", ctx.entering())[0], ctx,
                                 f"{where}/{i}")) for i, sub in enumerate(prefix) if high is None or i < high]
    target = flatten(other.get("items", True), where, ctx.entering())[0]
    mine_prefix = len(mine.get("prefixItems", []))
    out = [at(i, difference(item_at(mine, i, ctx), target, ctx, where))
           for i in range(len(prefix), mine_prefix) if high is None or i < high]
    start = max(len(prefix), mine_prefix)
    tail = flatten(mine.get("items", True), where, ctx.entering())[0]
    failing = difference(tail, target, ctx, where)
    if failing is False or (high is not None and high <= start):
        return out
    if high is not None and high - start <= MAX_ITEM_POSITIONS:
        return out + [at(i, failing) for i in range(start, high)]
    if failing is tail:
        return out + [merge(mine, {**base, "minItems": start + 1}, where)]
    raise SchemaError("cannot negate 'items' without a small 'maxItems' ('some item fails' is 'contains')", where)
