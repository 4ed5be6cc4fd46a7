"""The logic keywords (`not`, `oneOf`, `if`/`then`/`else`, `dependentSchemas`) as exact plain schemas.

`negation(flat)` is the schema of the instances that *fail* `flat` — a union, kind by kind, of
one branch per keyword (a failed bound is the opposite bound, a failed `required` an absent
member, a failed `properties` entry a present member whose value fails it, a failed finite set
its complement: other constants, open intervals between excluded numbers, a pattern matching
every string but the excluded ones).  Negations are taken over *values* (schemas), never over
spellings.  A keyword whose failure has no exact form (`multipleOf`, `pattern`,
`additionalProperties`, …) raises SchemaError.  `satisfies` decides one value against a raw
schema (all logic keywords), which makes any negation exact over a finite `enum`.  From these,
`oneOf` is each branch minus the branches it may overlap, `if`/`then`/`else` is
anyOf [if ∧ then, ¬if ∧ else], and `dependentSchemas` is "not an object, or the name absent,
or the name present and the schema met".  `json_schema_resolve.flatten` calls them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from stdsl.compiler.json_schema.resolve import (
    INEXACT,
    KINDS,
    Context,
    Schema,
    flatten,
    json_key,
    kinds_of_types,
    kinds_of_value,
    merge,
    resolve_ref,
)
from stdsl.errors import SchemaError

ALL_KINDS = frozenset(KINDS)
NUMBER_KINDS = frozenset({"integer", "fraction"})
MAX_ITEM_POSITIONS = 8
NUMBER_KEYWORDS = {"minimum": "exclusiveMaximum", "exclusiveMinimum": "maximum",
                   "maximum": "exclusiveMinimum", "exclusiveMaximum": "minimum"}
KIND_OF_KEYWORD = {
    "minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
    "minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number",
    "multipleOf": "number", "items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array",
    "uniqueItems": "array", "properties": "object", "required": "object", "additionalProperties": "object",
    "patternProperties": "object", "propertyNames": "object", "minProperties": "object",
    "maxProperties": "object", "dependentRequired": "object"}


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


def _typed_object(kinds: set[str] | frozenset[str], strict: bool) -> dict:
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


def _types(flat: dict) -> list[str]:
    value = flat.get("type", ["null", "boolean", "object", "array", "number", "string"])
    return value if isinstance(value, list) else [value]


def negation(flat: Schema, ctx: Context, path: str, kinds: frozenset[str] = ALL_KINDS,
             strict: bool = False) -> Schema:
    """The instances of `kinds` that fail the flattened schema `flat`, exactly, or SchemaError.

    Non-integer numbers failing an `integer` type have no `type` spelling: at this level `strict`
    refuses them; otherwise, and always inside members and items, they are left out and the result
    marked `_inexact` (an under-approximation: sound, those values are valid but not produced).
    """
    if flat is True or flat == {}:
        return False
    if flat is False:
        return typed(kinds, strict)
    if flat.get(INEXACT):
        raise SchemaError("cannot negate a schema that was already approximated (a negated integer type or a "
                          "length above 1000)", path)
    own = frozenset(kinds_of_types(_types(flat))) & kinds
    parts: list[Schema] = [typed(kinds - own, strict)]
    if "enum" in flat:
        from stdsl.compiler.json_schema.validate import conforms
        if _asserts_format(flat):
            raise SchemaError("cannot negate a 'format' (assertion and annotation readings differ)", path)
        values = [v for v in flat["enum"] if kinds_of_value(v) & own and conforms(v, flat, ctx, path)]
        parts.append(outside_values(values, own, path, strict))
        return union(parts)
    if "anyOf" in flat:
        parts.append(negation({k: v for k, v in flat.items() if k != "anyOf"}, ctx, path, own, strict))
        every: Schema = typed(own, strict)
        for i, branch in enumerate(flat["anyOf"]):
            branch_flat, branch_ctx, _ = flatten(branch, f"{path}/anyOf/{i}", ctx.entering())
            every = merge(every, negation(branch_flat, branch_ctx, path, own, strict), path)
        parts.append(every)
        return union(parts)
    for key, value in flat.items():
        if key != "type":
            parts.extend(_keyword_failures(key, value, flat, own, ctx, f"{path}/{key}", strict))
    return union(parts)


def _asserts_format(node: Any) -> bool:
    """Whether a flattened schema has a `format` the compiler asserts, at any depth."""
    from stdsl.compiler.json_schema.resolve import SPEC_FORMATS
    if isinstance(node, dict):
        return node.get("format") in SPEC_FORMATS or any(_asserts_format(v) for k, v in node.items() if k != "enum")
    return isinstance(node, list) and any(_asserts_format(v) for v in node)


def _keyword_failures(key: str, value: Any, flat: dict, own: frozenset[str], ctx: Context,
                      where: str, strict: bool) -> list[Schema]:
    """The instances of kinds `own` that fail one keyword, as a list of schemas to unite."""
    kind = KIND_OF_KEYWORD.get(key)
    if kind is None:
        raise SchemaError(f"cannot negate '{key}' exactly", where)
    kinds = own & (NUMBER_KINDS if kind == "number" else {kind})
    if not kinds:
        return []
    base = _typed_object(kinds, strict)
    if key in NUMBER_KEYWORDS:
        return [{**base, NUMBER_KEYWORDS[key]: value}]
    if key in ("minLength", "minItems"):
        return [{**base, key.replace("min", "max"): value - 1}] if value > 0 else []
    if key in ("maxLength", "maxItems"):
        return [{**base, key.replace("max", "min"): value + 1}]
    if key == "required":
        return [{**base, "properties": {name: False}} for name in value]
    if key == "properties":
        out: list[Schema] = []
        for name, sub in value.items():
            sub_flat, sub_ctx, _ = flatten(sub, f"{where}/{name}", ctx.entering())
            failing = negation(sub_flat, sub_ctx, f"{where}/{name}")
            if failing is not False:
                out.append({**base, "required": [name], "properties": {name: failing}})
        return out
    if key == "prefixItems":
        out = []
        for i, sub in enumerate(value):
            sub_flat, sub_ctx, _ = flatten(sub, f"{where}/{i}", ctx.entering())
            failing = negation(sub_flat, sub_ctx, f"{where}/{i}")
            if failing is not False:
                out.append({**base, "minItems": i + 1, "prefixItems": [True] * i + [failing]})
        return out
    if key == "items":
        return _items_failures(value, flat, base, ctx, where)
    if key == "dependentRequired":
        return [{**base, "required": [name], "properties": {other: False}}
                for name, others in value.items() for other in others if other != name]
    if key == "minProperties" and value <= 1:
        return [{**base, "maxProperties": 0}] if value == 1 else []
    if key == "maxProperties" and value == 0:
        return [{**base, "minProperties": 1}]
    if (key == "additionalProperties" and value in (True, {})) or (key == "uniqueItems" and value is False):
        return []
    raise SchemaError(f"cannot negate '{key}' exactly (its failure is not expressible as a schema)", where)


def _items_failures(items: Schema, flat: dict, base: dict, ctx: Context, where: str) -> list[Schema]:
    """Arrays with some item past the prefix failing `items`: exact only when `maxItems` bounds the positions."""
    item_flat, item_ctx, _ = flatten(items, where, ctx.entering())
    failing = negation(item_flat, item_ctx, where)
    if failing is False:
        return []
    start, high = len(flat.get("prefixItems", [])), flat.get("maxItems")
    if high is None or high - start > MAX_ITEM_POSITIONS:
        raise SchemaError("cannot negate 'items' without a small 'maxItems' ('some item fails' is 'contains')", where)
    return [{**base, "minItems": i + 1, "prefixItems": [True] * i + [failing]} for i in range(start, int(high))]


def outside_values(values: list[Any], kinds: frozenset[str], path: str, strict: bool = False) -> Schema:
    """The values of `kinds` that are none of `values` (compared as JSON values: 1 equals 1.0)."""
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
    base = _typed_object(kinds, strict)
    ordered = sorted({Decimal(repr(v)) if isinstance(v, float) else Decimal(v): v for v in values}.items())
    if not ordered:
        return base
    points = [v for _, v in ordered]
    parts = [{**base, "exclusiveMaximum": points[0]}, {**base, "exclusiveMinimum": points[-1]}]
    parts += [{**base, "exclusiveMinimum": lo, "exclusiveMaximum": hi} for lo, hi in zip(points, points[1:])]
    return union(parts)


def _char(ch: str) -> str:
    """One character as a regex escape valid in and out of classes."""
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


ANY_CHAR = "[\\x00-\\U0010ffff]"
ANY_TEXT = ANY_CHAR + "*"


def string_complement_pattern(strings: list[str]) -> str:
    """An anchored pattern matching exactly the strings (decoded) that are none of `strings`."""
    trie: dict = {}
    for text in strings:
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[None] = {}
    return f"^{_outside(trie)}$"


def _outside(trie: dict) -> str:
    """Regex of the continuations from this trie node that spell none of the stored strings."""
    children = sorted(c for c in trie if c is not None)
    parts = [] if None in trie else [""]
    parts.append(f"[^{''.join(_char(c) for c in children)}]{ANY_TEXT}" if children else f"{ANY_CHAR}{ANY_TEXT}")
    parts += [f"{_char(c)}{_outside(trie[c])}" for c in children]
    return "(?:" + "|".join(parts) + ")"


def exact_one_of(branches: list[Schema], parts: list[Schema], ctx: Context, path: str) -> Schema:
    """`oneOf` as the union of each branch minus the others it may overlap (negated only where needed).

    `branches` are the flattened `parts`.  A branch with a finite `enum` keeps the values that no
    other part accepts (decided value by value); elsewhere, where two branches can share values
    of a kind only because neither constrains that kind, the kind is removed from both, and
    otherwise the other branch's exact negation is used.
    """
    terms: list[Schema] = []
    for i, mine in enumerate(branches):
        if isinstance(mine, dict) and "enum" in mine:
            others = [(j, part) for j, part in enumerate(parts) if j != i]
            terms.append({**mine, "enum": [v for v in mine["enum"]
                                           if not any(satisfies(v, part, ctx, f"{path}/{j}") for j, part in others)]})
            continue
        term, universe = mine, possible_kinds(mine)
        for j, other in enumerate(branches):
            if j == i or term is False:
                continue
            shared = frozenset(_overlap_kinds(mine, other, ctx))
            if not shared:
                continue
            failing = negation(other, ctx, f"{path}/{j}", shared, strict=True)
            term = merge(term, union([typed(universe - shared, strict=True), failing]), path)
        terms.append(term)
    return union(terms)


def possible_kinds(flat: Schema) -> frozenset[str]:
    """A superset of the kinds of the instances of a flattened schema (by `type` and `enum`)."""
    if flat is False:
        return frozenset()
    if flat is True:
        return ALL_KINDS
    kinds = frozenset(kinds_of_types(_types(flat)))
    if "enum" in flat:
        kinds &= frozenset().union(*(kinds_of_value(v) for v in flat["enum"]))
    return kinds


def _overlap_kinds(a: Schema, b: Schema, ctx: Context) -> set[str]:
    """The kinds on which `a` and `b` may share an instance (a kind is dropped when provably disjoint there)."""
    from stdsl.compiler.json_schema.validate import provably_disjoint
    if a is False or b is False:
        return set()
    shared = possible_kinds(a) & possible_kinds(b)
    out = set()
    for kind in shared:
        name = {"integer": "number", "fraction": "number"}.get(kind, kind)
        try:
            if provably_disjoint(merge(a, {"type": name}, "#"), merge(b, {"type": name}, "#"), ctx):
                continue
        except SchemaError:
            pass
        out.add(kind)
    return out


def satisfies(value: Any, schema: Schema, ctx: Context, path: str) -> bool:
    """Whether one JSON value is valid against a raw schema, evaluating every logic keyword directly.

    Used to apply a negation to a finite `enum`; `format` is refused here, since a negated format
    means different things to validators that assert formats and to those that only annotate them.
    """
    from stdsl.compiler.json_schema.keys import name_matches, pattern_matcher
    from stdsl.compiler.json_schema.resolve import LOGIC, SPEC_FORMATS, older_drafts
    from stdsl.compiler.json_schema.validate import conforms
    if isinstance(schema, bool):
        return schema
    schema = older_drafts(schema, path)
    if schema.get("format") in SPEC_FORMATS:
        raise SchemaError("cannot decide a negated 'format' (assertion and annotation readings differ)", path)
    if "$ref" in schema:
        target, target_path = resolve_ref(schema["$ref"], ctx, f"{path}/$ref")
        if not satisfies(value, target, ctx.entering(target_path), target_path):
            return False
    checks = [all(satisfies(value, s, ctx, f"{path}/allOf/{i}") for i, s in enumerate(schema.get("allOf", [])))]
    if "anyOf" in schema:
        checks.append(any(satisfies(value, s, ctx, f"{path}/anyOf/{i}") for i, s in enumerate(schema["anyOf"])))
    if "oneOf" in schema:
        checks.append(sum(satisfies(value, s, ctx, f"{path}/oneOf/{i}") for i, s in enumerate(schema["oneOf"])) == 1)
    if "not" in schema:
        checks.append(not satisfies(value, schema["not"], ctx, f"{path}/not"))
    if "if" in schema:
        branch = "then" if satisfies(value, schema["if"], ctx, f"{path}/if") else "else"
        checks.append(satisfies(value, schema.get(branch, True), ctx, f"{path}/{branch}"))
    if not all(checks):
        return False
    if isinstance(value, dict):
        for name, sub in schema.get("dependentSchemas", {}).items():
            if name in value and not satisfies(value, sub, ctx, f"{path}/dependentSchemas/{name}"):
                return False
        props, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        matchers = {p: pattern_matcher(p, f"{path}/patternProperties") for p in patterns}
        for name, item in value.items():
            matched = [s for p, s in patterns.items() if name_matches(matchers[p], name)]
            own = [props[name]] if name in props else [] if matched else [schema.get("additionalProperties", True)]
            if not all(satisfies(item, s, ctx, f"{path}/properties") for s in own + matched):
                return False
            if not satisfies(name, schema.get("propertyNames", True), ctx, f"{path}/propertyNames"):
                return False
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        for i, item in enumerate(value):
            if not satisfies(item, prefix[i] if i < len(prefix) else schema.get("items", True), ctx, f"{path}/items"):
                return False
    children = LOGIC | {"$ref", "properties", "patternProperties", "additionalProperties", "prefixItems", "items",
                        "propertyNames", "dependentSchemas"}
    return conforms(value, {k: v for k, v in schema.items() if k not in children}, ctx, path)


def apply_negations(result: Schema, pending: list[tuple[Schema, str, Context]], path: str) -> Schema:
    """`result` minus the instances of each pending `not`: values of a finite enum decided one by one, else merged."""
    for negated, where, ctx in pending:
        if result is False:
            return False
        check_draft_neutral(negated, ctx, where)
        if isinstance(result, dict) and "enum" in result:
            result = {**result, "enum": [v for v in result["enum"] if not satisfies(v, negated, ctx, where)]}
            continue
        flat, flat_ctx, _ = flatten(negated, where, ctx.entering())
        result = merge(result, negation(flat, flat_ctx, where), path)
    return result


def one_of_as_any_of(parts: list[Schema], path: str, ctx: Context) -> Schema:
    """`oneOf` as an `anyOf`: directly when the branches are provably disjoint, else each minus the others.

    Either way a branch's failure matters, so draft-dependent keywords are refused (`check_draft_neutral`).
    """
    from stdsl.compiler.json_schema.validate import provably_disjoint
    branches = [flatten(part, f"{path}/{i}", ctx.entering())[0] for i, part in enumerate(parts)]
    if len(branches) > 1:
        for i, part in enumerate(parts):
            check_draft_neutral(part, ctx, f"{path}/{i}")
    branches = _optional_discriminator(branches, ctx) or branches
    if all(provably_disjoint(branches[i], branches[j], ctx)
           for i in range(len(branches)) for j in range(i + 1, len(branches))):
        return {"anyOf": branches}
    try:
        return exact_one_of(branches, parts, ctx, path)
    except SchemaError as exc:
        raise SchemaError(f"'oneOf' branches may overlap and a branch has no exact negation ({exc.args[0]})",
                          path) from exc


def conditional(schema: dict, path: str, ctx: Context) -> Schema:
    """`if`/`then`/`else` as anyOf [if ∧ then, ¬if ∧ else] (a missing branch is `true`)."""
    check_draft_neutral(schema["if"], ctx, f"{path}/if")
    condition, cond_ctx, _ = flatten(schema["if"], f"{path}/if", ctx.entering())
    then = flatten(schema.get("then", True), f"{path}/then", ctx.entering())[0]
    otherwise = flatten(schema.get("else", True), f"{path}/else", ctx.entering())[0]
    failing = negation(condition, cond_ctx, f"{path}/if")
    return union([merge(condition, then, f"{path}/then"), merge(failing, otherwise, f"{path}/else")])


def dependent_schema(name: str, sub: Schema, path: str, ctx: Context) -> Schema:
    """`dependentSchemas` {name: sub}: a non-object, an object without `name`, or one with it that meets `sub`."""
    flat = flatten(sub, path, ctx.entering())[0]
    with_name = merge({"type": "object", "required": [name]}, flat, path)
    return union([typed(ALL_KINDS - {"object"}), {"type": "object", "properties": {name: False}}, with_name])


def _optional_discriminator(branches: list[Schema], ctx: Context) -> list[Schema] | None:
    """`oneOf` branches equal except for one optional property with pairwise disjoint schemas, made exact.

    An instance lacking that property (or not an object) meets every branch alike, so it matches
    none or several and is invalid; requiring the property (and an object) in each branch is exact.
    """
    from stdsl.compiler.json_schema.validate import provably_disjoint
    objects = [b for b in branches if isinstance(b, dict) and isinstance(b.get("properties"), dict)]
    if len(branches) < 2 or len(objects) != len(branches):
        return None
    for name in objects[0]["properties"]:
        if not all(name in b["properties"] for b in objects):
            continue
        rests = {json.dumps({**b, "properties": {k: v for k, v in b["properties"].items() if k != name}},
                            sort_keys=True, default=str) for b in objects}
        if len(rests) != 1:
            continue
        values = [flatten(b["properties"][name], "#", ctx)[0] for b in objects]
        if all(provably_disjoint(values[i], values[j], ctx)
               for i in range(len(values)) for j in range(i + 1, len(values))):
            return [merge(b, {"type": "object", "required": [name]}, "#") for b in objects]
    return None


DRAFT_LACKS = {
    "draft-04": {"const", "contains", "propertyNames", "if", "then", "else", "dependentRequired",
                 "dependentSchemas", "prefixItems"},
    "draft-06": {"if", "then", "else", "dependentRequired", "dependentSchemas", "prefixItems"},
    "draft-07": {"dependentRequired", "dependentSchemas", "prefixItems"},
    "2019-09": {"dependencies", "prefixItems"},
    "2020-12": {"dependencies", "additionalItems", "items[]"},
}
SUBSCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "dependencies")
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
SUBSCHEMAS = ("not", "if", "then", "else", "items", "additionalItems", "additionalProperties", "propertyNames",
              "contains")


def check_draft_neutral(schema: Schema, ctx: Context, path: str) -> None:
    """Refuse, in a schema about to be negated, keywords whose meaning depends on the draft.

    The compiler reads every draft's keywords in every document (stricter than a validator that
    ignores a keyword unknown to its draft, which is sound); under a negation stricter turns
    looser, so keywords the document's draft lacks and `$ref` siblings (ignored up to draft 7) are refused.
    """
    meta = ctx.root.get("$schema", "") if isinstance(ctx.root, dict) else ""
    draft = next((d for d in DRAFT_LACKS if isinstance(meta, str) and d in meta), "2020-12")
    _walk_neutral(schema, ctx, path, DRAFT_LACKS[draft], draft.startswith("draft"), set())


def _walk_neutral(schema: Any, ctx: Context, path: str, lacks: set[str], ref_overrides: bool, seen: set[str]) -> None:
    """Visit every subschema (following references once) for `check_draft_neutral`; remember the clean ones."""
    from stdsl.compiler.json_schema.resolve import SUPPORTED
    if not isinstance(schema, dict) or id(schema) in ctx.draft_neutral:
        return
    present = sorted(lacks & set(schema))
    if isinstance(schema.get("items"), list) and "items[]" in lacks:
        present.append("items (array form)")
    if present:
        raise SchemaError(f"cannot negate '{present[0]}': the document's draft does not define it", path)
    if "$ref" in schema and isinstance(schema["$ref"], str):
        if ref_overrides and any(k in SUPPORTED and k != "$ref" for k in schema):
            raise SchemaError("cannot negate a '$ref' with sibling keywords (draft 7 and earlier ignore them)", path)
        target, target_path = resolve_ref(schema["$ref"], ctx, f"{path}/$ref")
        if target_path not in seen:
            seen.add(target_path)
            _walk_neutral(target, ctx, target_path, lacks, ref_overrides, seen)
    for key in SUBSCHEMA_MAPS:
        if isinstance(schema.get(key), dict):
            for name, sub in schema[key].items():
                _walk_neutral(sub, ctx, f"{path}/{key}/{name}", lacks, ref_overrides, seen)
    for key in SUBSCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            for i, sub in enumerate(schema[key]):
                _walk_neutral(sub, ctx, f"{path}/{key}/{i}", lacks, ref_overrides, seen)
    for key in SUBSCHEMAS:
        _walk_neutral(schema.get(key), ctx, f"{path}/{key}", lacks, ref_overrides, seen)
    ctx.draft_neutral.add(id(schema))
