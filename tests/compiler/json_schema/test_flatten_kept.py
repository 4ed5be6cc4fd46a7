"""A schema flattened once per schema object and path, and kept for asks where it is the same (`resolve.flatten`:
references entered there a subset, the nesting limit out of reach from there): every ask, first or kept, gives
what a fresh flattening gives (schema, path, the context's references and depth) or the same refusal, a fresh top
level each time, and, where it gives a schema, counts in `Context.reach` no less than the deepest level a fresh
flattening enters (more where a kept `oneOf` reading, or a flattening kept from one, counts a bound: such a kept
reading then serves fewer asks).  After a refusal the count may be less, as it was before flattenings were kept: a
kept `oneOf` refusal raised again counts no level."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.json_schema.flatten import document_context, flatten_schema
from stdsl.compiler.json_schema.resolve import MAX_NESTING, Context, flatten
from stdsl.errors import SchemaError

PARTS: list[Any] = [
    {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
    {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string", "maxLength": 3}},
     "required": ["kind"]},
    {"type": "integer", "minimum": 2},
    {"enum": [1, "x", None, {"a": 1}]},
    {"type": "string", "pattern": "^a+$"},
    {"$ref": "#/$defs/leaf"},
    {"$ref": "#/$defs/cycle"},
    {"$ref": "#/$defs/missing"},
    {"type": "array", "items": {"$ref": "#/$defs/leaf"}, "maxItems": 2},
    True,
    False,
]


def _combined(draw: Any, depth: int) -> Any:
    """A schema of `PARTS` joined by the logic keywords, `depth` levels deep."""
    if depth == 0:
        return draw(st.sampled_from(PARTS))
    keyword = draw(st.sampled_from(["allOf", "anyOf", "oneOf", "not", "if", "plain", "ref-beside"]))
    parts = [_combined(draw, depth - 1) for _ in range(draw(st.integers(1, 3)))]
    if keyword == "not":
        return {"not": parts[0]}
    if keyword == "if":
        return {"if": parts[0], "then": parts[-1], "else": {"type": "string"}}
    if keyword == "plain":
        return {"type": "object", "properties": {f"p{i}": part for i, part in enumerate(parts)}}
    if keyword == "ref-beside":
        return {"$ref": "#/$defs/leaf", "maxLength": 4}
    return {keyword: parts}


@st.composite
def documents(draw: Any) -> dict:
    """A document whose `$defs` hold a leaf, a reference cycle (refused where it is flattened) and a combined schema,
    and whose root refers to them."""
    return {"$defs": {"leaf": {"type": "string", "minLength": 1}, "cycle": {"allOf": [{"$ref": "#/$defs/cycle"}]},
                      "combined": _combined(draw, draw(st.integers(0, 3)))},
            "anyOf": [{"$ref": "#/$defs/combined"}, _combined(draw, draw(st.integers(0, 2)))]}


def _subschemas(node: Any, out: list[tuple[Any, str]], path: str = "#") -> None:
    """Every schema object or boolean of the document under a schema keyword, with its path."""
    out.append((node, path))
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("$defs", "properties"):
                for name, sub in value.items():
                    _subschemas(sub, out, f"{path}/{key}/{name}")
            elif key in ("allOf", "anyOf", "oneOf"):
                for i, sub in enumerate(value):
                    _subschemas(sub, out, f"{path}/{key}/{i}")
            elif key in ("not", "if", "then", "else", "items"):
                _subschemas(value, out, f"{path}/{key}")


class _Forgetful(dict[Any, Any]):
    """A `Context.flattened` or `Context.one_of` that keeps nothing: each flattening or `oneOf` reading runs anew."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def _outcome(flattener: Any, schema: Any, path: str, ctx: Context) -> tuple[Any, ...]:
    """What one flattening gives (as text) or refuses, and the deepest level the context then says was entered."""
    try:
        flat, flat_ctx, flat_path = flattener(schema, path, ctx)
    except SchemaError as refusal:
        return ("refused", str(refusal), ctx.reach[0])
    return (json.dumps(flat), flat_ctx.refs, flat_ctx.depth, flat_path, ctx.reach[0])


@settings(max_examples=150, deadline=None)
@given(documents(), st.integers(0, 3), st.permutations(range(4)))
def test_a_kept_flattening_is_a_fresh_one(document: dict, levels: int, order: list[int]) -> None:
    kept, fresh = document_context(document), Context(document, flatten_schema, one_of=_Forgetful(),
                                                      flattened=_Forgetful())
    for _ in range(levels):
        kept, fresh = kept.entering(), fresh.entering()
    contexts = [(kept, fresh), (kept.entering("#/$defs/leaf"), fresh.entering("#/$defs/leaf")),
                (kept.entering("#/$defs/leaf").entering("#/$defs/combined"),
                 fresh.entering("#/$defs/leaf").entering("#/$defs/combined")),
                (kept.entering().entering().entering(), fresh.entering().entering().entering())]
    parts: list[tuple[Any, str]] = []
    _subschemas(document, parts)
    for _ in range(2):
        for schema, path in parts:
            for ask in order:
                in_kept, in_fresh = contexts[ask]
                got = _outcome(flatten, schema, path, in_kept)
                expected = _outcome(flatten, schema, path, in_fresh)
                assert got[:-1] == expected[:-1]
                assert got[0] == "refused" or got[-1] >= expected[-1]
                in_kept.reach[0] = in_fresh.reach[0]


def test_a_flattening_with_more_references_entered_serves_one_with_fewer_but_not_past_the_nesting_limit() -> None:
    document = {"$defs": {"leaf": {"type": "string"}, "via": {"$ref": "#/$defs/leaf"}},
                "allOf": [{"$ref": "#/$defs/via"}], "maxLength": 3}
    ctx = document_context(document)
    deep = ctx.entering("#/$defs/other").entering()
    flat, flat_ctx, flat_path = flatten(document["$defs"]["via"], "#/$defs/via", deep)
    assert (flat, flat_ctx.refs, flat_ctx.depth, flat_path) == ({"type": "string"}, ("#/$defs/other", "#/$defs/leaf"),
                                                                3, "#/$defs/leaf")
    flat, flat_ctx, flat_path = flatten(document["$defs"]["via"], "#/$defs/via", ctx)
    assert (flat, flat_ctx.refs, flat_ctx.depth) == ({"type": "string"}, ("#/$defs/leaf",), 1)
    assert flat_path == "#/$defs/leaf"
    assert len(ctx.flattened[(id(document["$defs"]["via"]), "#/$defs/via")]) == 1
    flatten(document, "#", ctx)
    near_limit = ctx
    for _ in range(MAX_NESTING - 1):
        near_limit = near_limit.entering()
    with pytest.raises(SchemaError, match="nests deeper"):
        flatten(document, "#", near_limit)


def test_each_ask_gets_a_fresh_top_level_and_the_kept_one_is_not_changed() -> None:
    document = {"$defs": {"leaf": {"type": "string"}}, "$ref": "#/$defs/leaf", "maxLength": 3}
    ctx = document_context(document)
    first, _, _ = flatten(document, "#", ctx)
    assert isinstance(first, dict)
    first["minLength"] = 9
    second, _, _ = flatten(document, "#", ctx)
    assert second == {"type": "string", "maxLength": 3} and second is not first
    assert len(ctx.flattened) == 1
