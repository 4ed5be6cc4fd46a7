"""Serialize an instance exactly the way `schema_to_ir` writes it: compact, keys in schema order.

Object keys come in the compiler's order (declared `properties` in schema order, then
`required` names not in `properties`, then the instance's other keys in its own order, each
valued by the `patternProperties` it matches or `additionalProperties`);
values under `const`/`enum` take the key order of the matching enum member; `$ref`, `allOf`
and `anyOf` are followed as the compiler follows them.  Numbers are positional: an integral
float keeps its fraction (`2.0`, still a non-integer under draft 4) unless the schema admits
integers only; strings use `json.dumps(ensure_ascii=False)`.
"""

from __future__ import annotations

from typing import Any

from stdsl.compiler.json_schema.flatten import document_context
from stdsl.compiler.json_schema.resolve import Context, Schema, flatten, json_key
from stdsl.compiler.json_schema.scalars.keys import name_matches, pattern_matcher
from stdsl.compiler.json_schema.schema_merge import merge
from stdsl.compiler.json_schema.to_ir import canonical_scalar
from stdsl.compiler.json_schema.validate import conforms


def dump_in_schema_order(instance: Any, schema: dict | bool) -> str:
    """Compact JSON for `instance` with object keys in the order the compiled schema expects."""
    return _dump(instance, schema, "#", document_context(schema))


def _dump(value: Any, schema: Schema, path: str, ctx: Context) -> str:
    flat, ctx, path = flatten(schema, path, ctx.entering())
    if isinstance(flat, bool):
        return _plain(value)
    if "anyOf" in flat:
        rest = {k: v for k, v in flat.items() if k != "anyOf"}
        for i, branch in enumerate(flat["anyOf"]):
            merged = merge(rest, flatten(branch, f"{path}/anyOf/{i}", ctx.entering())[0], path)
            if conforms(value, merged, ctx, path):
                return _dump(value, merged, path, ctx)
        return _plain(value)
    if "enum" in flat:
        key = json_key(value)
        for member in flat["enum"]:
            if json_key(member) == key:
                return _in_member_order(value, member)
        return _plain(value)
    if isinstance(value, dict):
        props = flat.get("properties", {})
        extra = flat.get("additionalProperties", True)
        deps = flat.get("dependentRequired", {})
        involved = dict.fromkeys([*deps, *(n for names in deps.values() for n in names)])
        declared = list(dict.fromkeys([*props, *(n for n in involved if n not in props), *flat.get("required", [])]))
        order = [k for k in declared if k in value] + [k for k in value if k not in declared]
        patterns = flat.get("patternProperties", {})
        matchers = {p: pattern_matcher(p, f"{path}/patternProperties") for p in patterns}
        members, ctx = [], ctx.descending()
        for k in order:
            matched = [patterns[p] for p, m in matchers.items() if name_matches(m, k)]
            own = props.get(k, True if matched else extra)
            member_schema = {"allOf": [own, *matched]} if matched else own
            members.append(f"{canonical_scalar(k)}:{_dump(value[k], member_schema, path, ctx)}")
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        prefix, items, ctx = flat.get("prefixItems", []), flat.get("items", True), ctx.descending()
        parts = [_dump(v, prefix[i] if i < len(prefix) else items, path, ctx) for i, v in enumerate(value)]
        return "[" + ",".join(parts) + "]"
    types = flat.get("type", ["number"])
    if isinstance(value, float) and value.is_integer() and "number" in (types if isinstance(types, list) else [types]):
        return _float_text(value)
    return canonical_scalar(value)


def _float_text(value: float) -> str:
    """An integral float positionally with a fraction (`2.0`), as its JSON number type is kept."""
    return f"{canonical_scalar(value)}.0"


def _in_member_order(value: Any, member: Any) -> str:
    """`value` written with the key order of the JSON-equal enum member."""
    if isinstance(value, dict) and isinstance(member, dict):
        return "{" + ",".join(f"{canonical_scalar(k)}:{_in_member_order(value[k], member[k])}" for k in member) + "}"
    if isinstance(value, list) and isinstance(member, list):
        return "[" + ",".join(_in_member_order(v, m) for v, m in zip(value, member)) + "]"
    return canonical_scalar(member)


def _plain(value: Any) -> str:
    """Compact JSON in the instance's own key order, with canonical scalars."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{canonical_scalar(k)}:{_plain(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_plain(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return _float_text(value)
    return canonical_scalar(value)
