"""The logic keywords (`not`, `oneOf`, `if`/`then`/`else`, `dependentSchemas`) as exact plain schemas.

Each becomes a union of plain schemas through `negation.difference` (`mine ∧ ¬other`, exact or
SchemaError): `not` is the merged result minus the negated schema (values of a finite `enum`
decided one by one), `oneOf` each branch minus the branches it may overlap (an `anyOf` outright
when the branches are provably disjoint, `disjoint.py`), `if`/`then`/`else` anyOf [if ∧ then,
else minus if], and `dependentSchemas` "not an object, or the name absent, or the name present
and the schema met".  Schemas about to be negated are first checked for keywords whose meaning
depends on the draft.  `resolve.flatten` calls them.
"""

from __future__ import annotations

from typing import Any

from stdsl.compiler.json_schema.logic.complement import ALL_KINDS, typed, union
from stdsl.compiler.json_schema.logic.disjoint import disjoint, same_schema
from stdsl.compiler.json_schema.logic.negation import difference
from stdsl.compiler.json_schema.logic.satisfies import satisfies
from stdsl.compiler.json_schema.resolve import (
    MAX_NESTING,
    SUPPORTED,
    Context,
    OneOfReading,
    Schema,
    flatten,
    resolve_ref,
)
from stdsl.compiler.json_schema.schema_merge import merge
from stdsl.errors import SchemaError


def exact_one_of(branches: list[Schema], parts: list[Schema], ctx: Context, path: str) -> Schema:
    """`oneOf` as the union of each branch minus the others it may overlap.

    `branches` are the flattened `parts`.  A branch with a finite `enum` keeps the values that no
    other part accepts (decided value by value); otherwise each other branch not provably disjoint
    from it is subtracted (`negation.difference`).
    """
    terms: list[Schema] = []
    for i, mine in enumerate(branches):
        if isinstance(mine, dict) and "enum" in mine:
            others = [(j, part) for j, part in enumerate(parts) if j != i]
            terms.append({**mine, "enum": [v for v in mine["enum"]
                                           if not any(satisfies(v, part, ctx, f"{path}/{j}") for j, part in others)]})
            continue
        term = mine
        for j, other in enumerate(branches):
            if j != i and term is not False:
                term = difference(term, other, ctx, f"{path}/{j}", strict=True)
        terms.append(term)
    return union(terms)


def apply_negations(result: Schema, pending: list[tuple[Schema, str, Context]], path: str) -> Schema:
    """`result` minus the instances of each pending `not`: a finite enum decided value by value, else subtracted."""
    for negated, where, ctx in pending:
        if result is False:
            return False
        check_draft_neutral(negated, ctx, where)
        if isinstance(result, dict) and "enum" in result:
            result = {**result, "enum": [v for v in result["enum"] if not satisfies(v, negated, ctx, where)]}
            continue
        flat, flat_ctx, _ = flatten(negated, where, ctx.entering())
        result = difference(result, flat, flat_ctx, where)
    return result


def one_of_as_any_of(parts: list[Schema], path: str, ctx: Context) -> Schema:
    """`oneOf` as an `anyOf`: directly when the branches are provably disjoint, else each minus the others.

    Either way a branch's failure matters, so draft-dependent keywords are refused (`check_draft_neutral`).
    Kept per list for the document (`Context.one_of`): a pushdown compile flattens a member to decide whether to
    outline it and again as the nonterminal's body, and the disjointness proofs were most of a `oneOf`-heavy
    schema's lowering.  A list read at some depth with some references entered reads the same at a depth no
    greater with no other references (those can only refuse, past `MAX_NESTING` or on a cycle), so that is
    what a kept reading serves; and so does it at a greater depth where the reading, shifted down, would still
    not reach `MAX_NESTING` with the same references (the depth is read nowhere else): an outlined grammar's body
    reads a list nearer the root than the plain grammar's lowering does.  A kept reading used counts in `reach` as
    the reading it stands for (as the limit, where that is not known).  A refusal is kept too, and raised again
    where the same reading would meet it: at the same path (its message names it), with the same references, the
    limit out of reach.
    """
    known = ctx.one_of.get(id(parts))
    if known is not None and known.parts is parts and known.refs.issuperset(ctx.refs):
        same = known.refs == frozenset(ctx.refs) and known.depth + known.below < MAX_NESTING
        if isinstance(known.result, SchemaError):
            if same and known.path == path and ctx.depth + known.below < MAX_NESTING:
                raise _detached(known.result)
        elif ctx.depth <= known.depth or (same and ctx.depth + known.below < MAX_NESTING):
            ctx.reach[0] = max(ctx.reach[0], ctx.depth + known.below if same else MAX_NESTING)
            return known.result
    reach = ctx.reach
    outer, reach[0] = reach[0], ctx.depth
    result: Schema | SchemaError
    try:
        result = _one_of_as_any_of(parts, path, ctx)
    except SchemaError as refusal:
        result = _detached(refusal)
    finally:
        below, reach[0] = reach[0] - ctx.depth, max(outer, reach[0])
    ctx.one_of[id(parts)] = OneOfReading(parts, ctx.depth, frozenset(ctx.refs), result, below, path)
    if isinstance(result, SchemaError):
        raise _detached(result)
    return result


def _detached(refusal: SchemaError) -> SchemaError:
    """A copy of `refusal` without its traceback or the errors it was raised from: a refusal kept in the document's
    context is raised as such a copy, since one holding its frames (which hold the context) would be a reference
    cycle the collector alone frees."""
    copy = type(refusal).__new__(type(refusal))
    copy.__dict__.update(refusal.__dict__)
    copy.args = refusal.args
    return copy


def _one_of_as_any_of(parts: list[Schema], path: str, ctx: Context) -> Schema:
    """`one_of_as_any_of` past its memo."""
    branches = [flatten(part, f"{path}/{i}", ctx.entering())[0] for i, part in enumerate(parts)]
    if len(branches) > 1:
        for i, part in enumerate(parts):
            check_draft_neutral(part, ctx, f"{path}/{i}")
    branches = _optional_discriminator(branches, ctx) or branches
    if all(disjoint(branches[i], branches[j], ctx)
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
    return union([merge(condition, then, f"{path}/then"), difference(otherwise, condition, cond_ctx, f"{path}/if")])


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
    objects = [b for b in branches if isinstance(b, dict) and isinstance(b.get("properties"), dict)]
    if len(branches) < 2 or len(objects) != len(branches):
        return None
    for name in objects[0]["properties"]:
        if not all(name in b["properties"] for b in objects):
            continue
        rests = [{**b, "properties": {k: v for k, v in b["properties"].items() if k != name}} for b in objects]
        if not all(same_schema(rests[0], rest) for rest in rests[1:]):
            continue
        values = [flatten(b["properties"][name], "#", ctx)[0] for b in objects]
        if all(disjoint(values[i], values[j], ctx)
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
    if not isinstance(schema, dict) or id(schema) in ctx.draft_neutral:
        return
    present = [] if lacks.isdisjoint(schema) else sorted(lacks.intersection(schema))
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
