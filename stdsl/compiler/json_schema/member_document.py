"""A part of a schema document as a document of its own: the same language, its references still resolving.

Tool-call formats that write each parameter apart (XML-like tags, Python keyword arguments) lower each parameter's
schema alone, yet a parameter may refer into its tool's schema: `{"$ref": "#/$defs/Unit"}`, as Pydantic writes an
enum or a nested model, or `#/properties/origin`, as zod-to-json-schema writes a repeated one.  `standalone` gives
such a part the targets it reaches, copied under one `$defs` entry at their paths in the document, its references
pointing there; a part without references is returned as it is (the same compile, the same cache key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from stdsl.compiler.json_schema.flatten import document_context
from stdsl.compiler.json_schema.resolve import INSTANCE_DATA, pointer_token, resolve_ref
from stdsl.errors import SchemaError

DOCUMENT = "stdsl:document"
"""The `$defs` entry that holds the copied targets, at their paths in the original document (its `#` there)."""
ANNOTATIONS = frozenset({"$ref", "title", "description", "examples", "default", "$comment", "deprecated",
                         "readOnly", "writeOnly"})
"""What a schema that only refers may hold beside its `$ref` (Pydantic writes a field's description there)."""


def standalone(part: Any, document: Any) -> Any:
    """`part` (a schema inside `document`) as a document with the same language: itself when it holds no
    reference, else with every target its references reach, directly or through other targets, copied under
    `$defs[DOCUMENT]` and every reference moved there.  A reference that does not resolve is left for the
    compile to refuse where it stands."""
    if not isinstance(part, Mapping) or not isinstance(document, Mapping) or not references(part):
        return part
    if not isinstance(part.get("$defs", {}), Mapping):
        return part
    base = _base(document)
    context = document_context(dict(document))
    copied: dict[str, Any] = {}
    pending = references(part)
    seen: set[str] = set()
    while pending:
        reference = pending.pop()
        if reference in seen:
            continue
        seen.add(reference)
        try:
            target, path = resolve_ref(_local(reference, base), context, "#")
        except SchemaError:
            continue
        if path not in copied:
            copied[path] = target
            pending += references(target)
    held: dict[str, Any] = {}
    for path in sorted(copied, key=len):
        _place(held, document, path, _moved(copied[path], base))
    held.pop("$id", None)
    moved = _moved(part, base)
    return {**moved, "$defs": {**moved.get("$defs", {}), DOCUMENT: held}}


def dereferenced(part: Any, document: Any) -> Any:
    """The schema `part` only refers to: a chain of schemas holding a `$ref`, annotations and at most the `type`
    of what it refers to, followed to the first that holds more (the same language); `part` itself where the
    chain does not resolve, comes back, or states another type."""
    if not isinstance(document, Mapping):
        return part
    base, context, seen = _base(document), document_context(dict(document)), set()
    found = part
    while isinstance(found, Mapping) and isinstance(found.get("$ref"), str) and set(found) <= ANNOTATIONS | {"type"}:
        reference = _local(found["$ref"], base)
        if reference in seen:
            return part
        seen.add(reference)
        try:
            target = resolve_ref(reference, context, "#")[0]
        except SchemaError:
            return part
        if "type" in found and (not isinstance(target, Mapping) or target.get("type") != found["type"]):
            return part
        found = target
    return found


def _base(document: Mapping[str, Any]) -> str:
    """The document's base URI (its root `$id` without a fragment), which a reference may spell before `#`."""
    root_id = document.get("$id")
    return root_id.split("#")[0] if isinstance(root_id, str) else ""


def _local(reference: str, base: str) -> str:
    """`reference` without the document's base URI in front."""
    return (reference[len(base):] or "#") if base and reference.startswith(base) else reference


def references(node: Any) -> list[str]:
    """Every `$ref` string in a schema's schema positions (not in instance data such as `enum` values)."""
    found: list[str] = []
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            for key, value in item.items():
                if key == "$ref" and isinstance(value, str):
                    found.append(value)
                elif key not in INSTANCE_DATA:
                    pending.append(value)
        elif isinstance(item, list):
            pending.extend(item)
    return found


def _moved(node: Any, base: str) -> Any:
    """`node` with every JSON pointer reference pointing under `$defs[DOCUMENT]` (an anchor reference, which
    names its schema anywhere in the document, stays as it is)."""
    if isinstance(node, Mapping):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                local = _local(value, base)
                out[key] = (f"#/$defs/{pointer_token(DOCUMENT)}{local[1:]}"
                            if local == "#" or local.startswith("#/") else value)
            elif key in INSTANCE_DATA:
                out[key] = value
            else:
                out[key] = _moved(value, base)
        return out
    if isinstance(node, list):
        return [_moved(item, base) for item in node]
    return node


def _place(held: dict[str, Any], document: Mapping[str, Any], path: str, value: Any) -> None:
    """Put `value` in `held` at the JSON pointer `path` ("#/a/0/b") of `document`, making on the way the objects
    and lists `document` has there (a list's other items `{}`, never read: only the targets are referred to)."""
    tokens = [unquote(token).replace("~1", "/").replace("~0", "~") for token in path[2:].split("/")] \
        if path.startswith("#/") else []
    if not tokens:
        held.update(value)
        return
    node: Any = held
    original: Any = document
    for token in tokens[:-1]:
        original = original[int(token)] if isinstance(original, list) else original[token]
        key: Any = int(token) if isinstance(node, list) else token
        if isinstance(node, list) and node[key] == {} or isinstance(node, dict) and key not in node:
            node[key] = [{} for _ in original] if isinstance(original, list) else {}
        node = node[key]
    last = tokens[-1]
    node[int(last) if isinstance(node, list) else last] = value
