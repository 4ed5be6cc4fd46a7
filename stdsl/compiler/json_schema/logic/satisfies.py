"""Whether one JSON value is valid against a raw schema, every logic keyword evaluated directly.

A negation applied to a finite set of values (an `enum` beside a `not`, a `oneOf` branch that is
an `enum`) is decided value by value with it, which is exact for any negated keyword.
"""

from __future__ import annotations

from typing import Any

from stdsl.compiler.json_schema.resolve import (
    LOGIC,
    SPEC_FORMATS,
    Context,
    Schema,
    check_keywords,
    check_schema,
    older_drafts,
    resolve_ref,
)
from stdsl.compiler.json_schema.scalars.keys import name_matches, pattern_matcher
from stdsl.compiler.json_schema.validate import conforms
from stdsl.errors import SchemaError

CHILDREN = LOGIC | {"$ref", "properties", "patternProperties", "additionalProperties", "prefixItems", "items",
                    "propertyNames", "dependentSchemas"}


def satisfies(value: Any, schema: Schema, ctx: Context, path: str) -> bool:
    """Whether one JSON value is valid against a raw schema, evaluating every logic keyword directly.

    `format` is refused here, since a negated format means different things to validators that
    assert formats and to those that only annotate them.
    """
    if isinstance(schema, bool):
        return schema
    check_schema(schema, path)
    check_keywords(schema, path, ctx.warned)
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
    if isinstance(value, dict) and not _object_satisfies(value, schema, ctx, path):
        return False
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        for i, item in enumerate(value):
            if not satisfies(item, prefix[i] if i < len(prefix) else schema.get("items", True), ctx, f"{path}/items"):
                return False
    return conforms(value, {k: v for k, v in schema.items() if k not in CHILDREN}, ctx, path)


def _object_satisfies(value: dict, schema: dict, ctx: Context, path: str) -> bool:
    """The member keywords (`properties`, `patternProperties`, `additionalProperties`, names, dependents)."""
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
    return True
