"""Instance checks for the supported JSON Schema subset: `conforms` and the `oneOf` disjointness proof.

The compiler needs both: enum members are kept only if they satisfy the schema's other
keywords, and `oneOf` is accepted only when its branches provably share no instance.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.json_schema.resolve import (
    Context,
    Schema,
    flatten,
    json_key,
    kinds_of_types,
    kinds_of_value,
)
from stdsl.compiler.json_schema.scalars.keys import name_matches, pattern_matcher
from stdsl.compiler.json_schema.scalars.strings import string_body
from stdsl.compiler.json_schema.schema_merge import patterns_of
from stdsl.errors import EmptyLanguageError


def _types(schema: dict) -> list[str]:
    value = schema.get("type", ["null", "boolean", "object", "array", "number", "string"])
    return value if isinstance(value, list) else [value]


def _language_matcher(node: ir.Node) -> Callable[[str], bool]:
    """Whether a string's UTF-8 text is in the language of `node`: a compiled Python `re`, or where the node embeds
    an automaton (a format's table, which has no regex form) a walk of the node's own automaton, built here once."""
    try:
        pattern = ir.to_pattern(node)
    except ValueError:
        from stdsl.compiler.automata.build import build_automaton

        try:
            automaton = build_automaton(node)
        except EmptyLanguageError:
            return lambda text: False
        return lambda text: automaton.accepts(text.encode("utf-8"))
    compiled = re.compile(pattern, re.DOTALL)
    return lambda text: compiled.fullmatch(text.encode("utf-8").decode("latin-1")) is not None


def _string_matcher(keyword: str, value: str, ctx: Context, path: str) -> Callable[[str], bool]:
    """The matcher of `{keyword: value}` (a `pattern` or a `format`), kept in the document's context."""
    found = ctx.string_matchers.get((keyword, value))
    if found is None:
        found = ctx.string_matchers[(keyword, value)] = _language_matcher(
            string_body({keyword: value}, path, plain=True))
    return found


def conforms(instance: Any, schema: Schema, ctx: Context, path: str = "#") -> bool:
    """Whether `instance` (a parsed JSON value) is valid against `schema` under the supported keywords.

    Compiling an `enum` or a `uniqueItems` set calls this once per value, so it checks the compile deadline."""
    check_deadline("checking values against the schema")
    flat, ctx, path = flatten(schema, path, ctx)
    if isinstance(flat, bool):
        return flat
    if "anyOf" in flat:
        rest = {k: v for k, v in flat.items() if k != "anyOf"}
        return conforms(instance, rest, ctx, path) and any(
            conforms(instance, b, ctx, f"{path}/anyOf/{i}") for i, b in enumerate(flat["anyOf"]))
    if "enum" in flat and json_key(instance) not in ctx.member_keys(flat["enum"]):
        return False
    kinds = kinds_of_value(instance)
    if not kinds & kinds_of_types(_types(flat)):
        return False
    if isinstance(instance, str):
        return _string_conforms(instance, flat, ctx, path)
    if isinstance(instance, (int, float)) and not isinstance(instance, bool):
        return _number_conforms(instance, flat)
    if isinstance(instance, dict):
        return _object_conforms(instance, flat, ctx, path)
    if isinstance(instance, list):
        return _array_conforms(instance, flat, ctx, path)
    return True


def _string_conforms(value: str, flat: dict, ctx: Context, path: str) -> bool:
    if not flat.get("minLength", 0) <= len(value) <= flat.get("maxLength", len(value)):
        return False
    singles = [("pattern", p) for p in patterns_of(flat)] + ([("format", flat["format"])] if "format" in flat else [])
    return all(_string_matcher(keyword, text, ctx, path)(value) for keyword, text in singles)


def _number_conforms(value: float, flat: dict) -> bool:
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    checks = (("minimum", lambda b: number >= b), ("maximum", lambda b: number <= b),
              ("exclusiveMinimum", lambda b: number > b), ("exclusiveMaximum", lambda b: number < b),
              ("multipleOf", lambda b: number % b == 0))
    return all(check(Decimal(repr(flat[key]))) for key, check in checks if key in flat)


def _object_conforms(value: dict, flat: dict, ctx: Context, path: str) -> bool:
    props = flat.get("properties", {})
    extra = flat.get("additionalProperties", True)
    if any(name not in value for name in flat.get("required", [])):
        return False
    if not flat.get("minProperties", 0) <= len(value) <= flat.get("maxProperties", len(value)):
        return False
    if any(n not in value for k, names in flat.get("dependentRequired", {}).items() if k in value for n in names):
        return False
    names = flat.get("propertyNames", True)
    if not all(conforms(k, names, ctx, f"{path}/propertyNames") for k in value):
        return False
    matchers = {p: pattern_matcher(p, f"{path}/patternProperties") for p in flat.get("patternProperties", {})}
    ctx = ctx.descending()
    for k, v in value.items():
        matched = [flat["patternProperties"][p] for p, m in matchers.items() if name_matches(m, k)]
        if not all(conforms(v, s, ctx, f"{path}/patternProperties") for s in matched):
            return False
        if not conforms(v, props[k] if k in props else (True if matched else extra), ctx, f"{path}/properties"):
            return False
    return True


def _array_conforms(value: list, flat: dict, ctx: Context, path: str) -> bool:
    prefix = flat.get("prefixItems", [])
    if not flat.get("minItems", 0) <= len(value) <= flat.get("maxItems", len(value)):
        return False
    if flat.get("uniqueItems") and len({json_key(v) for v in value}) != len(value):
        return False
    items, ctx = flat.get("items", True), ctx.descending()
    return all(conforms(v, prefix[i] if i < len(prefix) else items, ctx, f"{path}/items") for i, v in enumerate(value))


def _kinds(flat: Schema) -> set[str]:
    """A superset of the kinds of instances `flat` admits."""
    if flat is False:
        return set()
    if flat is True:
        return kinds_of_types(["null", "boolean", "object", "array", "number", "string"])
    kinds = kinds_of_types(_types(flat))
    if "enum" in flat:
        kinds &= set().union(*(kinds_of_value(v) for v in flat["enum"]))
    return kinds


def _interval(flat: dict) -> tuple[Decimal | None, bool, Decimal | None, bool]:
    """The tightest numeric bounds (lo, lo_exclusive, hi, hi_exclusive) of a flattened schema."""
    lo = hi = None
    lo_x = hi_x = False
    for key, exclusive in (("minimum", False), ("exclusiveMinimum", True)):
        if key in flat:
            b = Decimal(repr(flat[key]))
            if lo is None or b > lo or (b == lo and exclusive):
                lo, lo_x = b, exclusive
    for key, exclusive in (("maximum", False), ("exclusiveMaximum", True)):
        if key in flat:
            b = Decimal(repr(flat[key]))
            if hi is None or b < hi or (b == hi and exclusive):
                hi, hi_x = b, exclusive
    return lo, lo_x, hi, hi_x


def _intervals_disjoint(a: dict, b: dict) -> bool:
    a_lo, a_lx, a_hi, a_hx = _interval(a)
    b_lo, b_lx, b_hi, b_hx = _interval(b)

    def below(hi: Decimal | None, hx: bool, lo: Decimal | None, lx: bool) -> bool:
        return hi is not None and lo is not None and (hi < lo or (hi == lo and (hx or lx)))
    return below(a_hi, a_hx, b_lo, b_lx) or below(b_hi, b_hx, a_lo, a_lx)


def provably_disjoint(a: Schema, b: Schema, ctx: Context) -> bool:
    """True only if no instance satisfies both flattened schemas (by kinds, enums, bounds, discriminators)."""
    if a is False or b is False:
        return True
    if a is True or b is True:
        return False
    for one, other in ((a, b), (b, a)):
        if "enum" in one:
            return not any(conforms(v, other, ctx) and conforms(v, one, ctx) for v in one["enum"])
    for kind in _kinds(a) & _kinds(b):
        if kind in ("integer", "fraction") and _intervals_disjoint(a, b):
            continue
        if kind == "object" and _discriminated(a, b, ctx):
            continue
        return False
    return True


def _discriminated(a: dict, b: dict, ctx: Context) -> bool:
    """Both require a property whose two schemas are provably disjoint, or one requires a property the other forbids."""
    pa, pb = a.get("properties", {}), b.get("properties", {})
    for one, other, props in ((a, b, pb), (b, a, pa)):
        closed = other.get("additionalProperties", True) is False and not other.get("patternProperties")
        for name in one.get("required", []):
            if props.get(name) is False or (closed and name not in props):
                return True
    for name in set(a.get("required", [])) & set(b.get("required", [])):
        if name in pa and name in pb:
            fa = flatten(pa[name], "#", ctx)[0]
            fb = flatten(pb[name], "#", ctx)[0]
            if provably_disjoint(fa, fb, ctx):
                return True
    return False
