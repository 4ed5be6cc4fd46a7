"""Flattening: one schema as a single dict of plain keywords, `$ref`, `allOf` and the logic keywords folded in.

It sits above both `resolve.py` (references, keyword checks, `merge`) and `logic/keywords.py` (the logic
keywords as exact plain schemas); contexts made by `document_context` carry it, so `logic/keywords.py`
and `validate.py` flatten through `resolve.flatten` without importing this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.json_schema.logic import keywords as logic
from stdsl.compiler.json_schema.resolve import (
    FOLDED,
    INEXACT,
    LOGIC,
    MAX_COUNT,
    MORE_PATTERNS,
    SPEC_FORMATS,
    SUPPORTED,
    Context,
    Negation,
    Schema,
    check_keywords,
    check_schema,
    json_key,
    older_drafts,
    pointer_token,
    resolve_ref,
)
from stdsl.compiler.json_schema.schema_merge import merge
from stdsl.errors import SchemaError

T = TypeVar("T")


def document_context(root: Schema) -> Context:
    """The context at the top of the document `root`: no reference entered, flattening by `flatten_schema`."""
    return Context(root, flatten_schema)


def within_document(root: Schema, run: Callable[[Context], T]) -> T:
    """`run` in a new document context for `root`, whose memos are dropped (`Context.forget`) if it raises."""
    context = document_context(root)
    try:
        return run(context)
    except BaseException:
        context.forget()
        raise


def flatten_schema(schema: Schema, path: str, ctx: Context,
                   negations: list[Negation] | None = None) -> tuple[Schema, Context, str]:
    """One schema with `$ref`, `allOf`, `const` and the logic keywords folded into plain keywords (exactly).

    Returns the flattened schema, the context and the path to report for its keywords: the
    target's (reference entered, for cycles) when the schema is only a reference.  A reference
    beside other keywords, and `allOf` parts, are flattened side by side with them, so one part's
    reference is no cycle for another's members (true cycles are found on the reference graph).  `not`s met here and in
    `allOf` parts and `$ref` targets are applied last, to the merged result: over a finite `enum`
    by deciding each value, otherwise as an exact negation; given `negations`, they are left there.
    """
    check_schema(schema, path)
    if isinstance(schema, bool):
        return schema, ctx, path
    check_deadline("flattening the schema")
    schema = older_drafts(schema, path)
    check_keywords(schema, path, ctx.warned)
    pending: list[Negation] = [] if negations is None else negations
    own: dict = {k: v for k, v in schema.items()
                 if (k in SUPPORTED and k not in FOLDED) or k in (INEXACT, MORE_PATTERNS)}
    more = own.get(MORE_PATTERNS, [])
    if not isinstance(more, list) or not all(isinstance(p, str) for p in more):
        own.pop(MORE_PATTERNS)
    if own.get("format") not in SPEC_FORMATS:
        own.pop("format", None)
    for key in ("maxLength", "maxItems"):
        if own.get(key, 0) > MAX_COUNT:
            own[key] = MAX_COUNT
            own[INEXACT] = True
    if "not" in schema:
        pending.append((schema["not"], f"{path}/not", ctx))
    if "const" in schema:
        own["enum"] = [v for v in own.get("enum", [schema["const"]]) if json_key(v) == json_key(schema["const"])]
    result: Schema = own
    if "$ref" in schema:
        target, target_path = resolve_ref(schema["$ref"], ctx, f"{path}/$ref")
        if target_path in ctx.refs:
            cycle = " -> ".join(ctx.refs[ctx.refs.index(target_path):] + (target_path,))
            raise SchemaError(f"recursive $ref is not supported yet (cycle {cycle})", f"{path}/$ref")
        flat, target_ctx, flat_path = flatten_schema(target, target_path, ctx.entering(target_path), pending)
        if not own and not any(k in schema for k in LOGIC):
            path, ctx = flat_path, target_ctx
        result = merge(result, flat, path)
    for i, part in enumerate(schema.get("allOf", [])):
        flat = flatten_schema(part, f"{path}/allOf/{i}", ctx.entering(), pending)[0]
        result = merge(result, flat, f"{path}/allOf")
    if "oneOf" in schema:
        result = merge(result, logic.one_of_as_any_of(schema["oneOf"], f"{path}/oneOf", ctx), path)
    if "if" in schema and ("then" in schema or "else" in schema):
        result = merge(result, logic.conditional(schema, path, ctx), path)
    for name, sub in schema.get("dependentSchemas", {}).items():
        where = f"{path}/dependentSchemas/{pointer_token(name)}"
        result = merge(result, logic.dependent_schema(name, sub, where, ctx), path)
    if negations is None:
        result = logic.apply_negations(result, pending, path)
    return result, ctx, path
