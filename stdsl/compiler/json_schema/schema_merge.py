"""Exact `allOf` merging: the conjunction of two flattened schemas as one schema, or SchemaError where no single
schema says exactly what both say (used by `flatten.py` and the logic keywords through `merge`)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from stdsl.compiler.json_schema.resolve import (
    INEXACT,
    MAX_ANYOF_BRANCHES,
    MORE_PATTERNS,
    TYPES,
    Schema,
    json_key,
    kinds_of_types,
)
from stdsl.errors import SchemaError


def merge(a: Schema, b: Schema, path: str) -> Schema:
    """The exact conjunction of two flattened schemas, or SchemaError when it is not expressible."""
    if a is False or b is False:
        return False
    if a is True or a == {}:
        return b if b is not True else {}
    if b is True or b == {}:
        return a
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
            continue
        mine = out[key]
        if key == "type":
            out[key] = _merge_types(mine, value)
        elif key == "enum":
            keys = {json_key(v) for v in value}
            out[key] = [v for v in mine if json_key(v) in keys]
        elif key == "required":
            out[key] = list(dict.fromkeys(list(mine) + list(value)))
        elif key in ("minItems", "minLength", "minimum", "exclusiveMinimum", "minProperties"):
            out[key] = max(mine, value)
        elif key in ("maxItems", "maxLength", "maximum", "exclusiveMaximum", "maxProperties"):
            out[key] = min(mine, value)
        elif key == "multipleOf":
            out[key] = _merge_multiples(mine, value, path)
        elif key == "propertyNames":
            out[key] = _conj(mine, value)
        elif key == "dependentRequired":
            out[key] = {n: list(dict.fromkeys(mine.get(n, []) + value.get(n, []))) for n in {**mine, **value}}
        elif key == "patternProperties":
            out[key] = {**mine, **{p: _conj(mine[p], v) if p in mine else v for p, v in value.items()}}
        elif key == "uniqueItems":
            out[key] = mine or value
        elif key == "pattern":
            if mine != value:
                out[MORE_PATTERNS] = list(dict.fromkeys([*out.get(MORE_PATTERNS, []), value]))
        elif key == MORE_PATTERNS:
            out[key] = list(dict.fromkeys([*mine, *value]))
        elif key == "format":
            if mine != value:
                raise SchemaError(f"cannot merge two different '{key}' constraints exactly", path)
        elif key == "anyOf":
            pairs = [{"allOf": [x, y]} for x in mine for y in value]
            if len(pairs) > MAX_ANYOF_BRANCHES:
                raise SchemaError(f"'anyOf' combination exceeds {MAX_ANYOF_BRANCHES} branches", path)
            out[key] = pairs
    object_keys = ("properties", "additionalProperties", "patternProperties")
    if any(k in a for k in object_keys) and any(k in b for k in object_keys) \
            and ("patternProperties" in a or "patternProperties" in b) and not _keys_merge_exactly(a, b):
        raise SchemaError("cannot merge 'patternProperties' with another schema's properties exactly (a key "
                          "one side leaves to its additionalProperties may match the other side's patterns)", path)
    if "properties" in b or "additionalProperties" in b or "properties" in a or "additionalProperties" in a:
        _merge_objects(out, a, b)
    if "items" in a or "items" in b or "prefixItems" in a or "prefixItems" in b:
        _merge_arrays(out, a, b)
    _drop_empty_kinds(out)
    if out.get("type") == []:
        return {"enum": [], INEXACT: True} if out.get(INEXACT) else False
    return out


def patterns_of(flat: dict) -> list[str]:
    """Every pattern a flattened schema asserts: `pattern` and those merged beside it."""
    return [flat["pattern"], *flat.get(MORE_PATTERNS, [])] if "pattern" in flat else []


def _drop_empty_kinds(out: dict) -> None:
    """Remove from `type` a kind whose merged bounds contradict (minLength above maxLength, an empty interval)."""
    empty = set()
    for low, high, kinds in (("minLength", "maxLength", {"string"}), ("minItems", "maxItems", {"array"}),
                             ("minProperties", "maxProperties", {"object"})):
        if low in out and high in out and out[low] > out[high]:
            empty |= kinds
    lows = [(Decimal(repr(out[k])), k == "exclusiveMinimum") for k in ("minimum", "exclusiveMinimum") if k in out]
    highs = [(Decimal(repr(out[k])), k == "exclusiveMaximum") for k in ("maximum", "exclusiveMaximum") if k in out]
    if any(lo > hi or (lo == hi and (lx or hx)) for lo, lx in lows for hi, hx in highs):
        empty |= {"integer", "fraction"}
    if empty:
        types = out.get("type", list(TYPES[:-1]))
        kept = kinds_of_types(types if isinstance(types, list) else [types]) - empty
        out["type"] = _merge_types(list(TYPES[:-1]), [t for t in TYPES if kinds_of_types([t]) <= kept])


def _conj(x: Schema, y: Schema) -> Schema:
    """A lazily merged conjunction of two raw sub-schemas."""
    if x is True or x == {}:
        return y
    if y is True or y == {}:
        return x
    if x is False or y is False:
        return False
    return {"allOf": [x, y]}


def _merge_multiples(x: Any, y: Any, path: str) -> Any:
    """One `multipleOf` equivalent to two: equal ones, one dividing the other, or the lcm of integers."""
    dx, dy = Decimal(repr(x)), Decimal(repr(y))
    if dx % dy == 0:
        return x
    if dy % dx == 0:
        return y
    if dx == dx.to_integral_value() and dy == dy.to_integral_value():
        return math.lcm(int(dx), int(dy))
    raise SchemaError("cannot merge two fractional 'multipleOf' constraints exactly", path)


def _merge_types(x: Any, y: Any) -> list[str]:
    kinds = kinds_of_types(x if isinstance(x, list) else [x]) & kinds_of_types(y if isinstance(y, list) else [y])
    out: list[str] = [t for t in ("null", "boolean", "object", "array", "string") if t in kinds]
    if {"integer", "fraction"} <= kinds:
        out.append("number")
    elif "integer" in kinds:
        out.append("integer")
    return out


def _keys_merge_exactly(a: dict, b: dict) -> bool:
    """Whether one properties/patternProperties/additionalProperties triple says what both sides say of every key.

    A key matching only one side's patterns meets the other side's additionalProperties, and a name
    declared on one side only meets the other side's patterns or additionalProperties; the merged
    triple (patterns united, additionalProperties and declared names conjoined, every matching
    pattern applied) is exact when each such additionalProperties is `true`, or the name is `false`.
    """
    def open_(side: dict) -> bool:
        return side.get("additionalProperties", True) in (True, {})

    for one, other in ((a, b), (b, a)):
        if one.get("patternProperties") and not open_(other):
            return False
        others = other.get("properties", {})
        if not open_(other) and any(sub is not False for name, sub in one.get("properties", {}).items()
                                    if name not in others):
            return False
    return True


def _merge_objects(out: dict, a: dict, b: dict) -> None:
    """Properties of both sides; a key declared on one side only meets the other's additionalProperties.

    `additionalProperties` stays absent where neither side gives it: strict generation (`to_ir`) closes only an
    object whose schema says nothing of undeclared members."""
    pa, pb = a.get("properties", {}), b.get("properties", {})
    aa, ab = a.get("additionalProperties", True), b.get("additionalProperties", True)
    props = {}
    for name in list(pa) + [n for n in pb if n not in pa]:
        props[name] = _conj(pa.get(name, aa), pb.get(name, ab))
    out["properties"] = props
    if "additionalProperties" in a or "additionalProperties" in b:
        out["additionalProperties"] = _conj(aa, ab)


def _merge_arrays(out: dict, a: dict, b: dict) -> None:
    """Positional items of both sides; a position beyond one side's prefix meets its `items`."""
    xa, xb = a.get("prefixItems", []), b.get("prefixItems", [])
    ia, ib = a.get("items", True), b.get("items", True)
    length = max(len(xa), len(xb))
    prefix = [_conj(xa[i] if i < len(xa) else ia, xb[i] if i < len(xb) else ib) for i in range(length)]
    if prefix:
        out["prefixItems"] = prefix
    if "items" in a or "items" in b:
        out["items"] = _conj(ia, ib)
