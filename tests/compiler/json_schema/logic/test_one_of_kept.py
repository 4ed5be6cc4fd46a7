"""A `oneOf` list read exactly once per document (`Context.one_of`), and only where that reading is the same.

A pushdown compile flattens an outlined member to decide whether to outline it and again as its body, and the
plain and outlined tries read one document: each list's disjointness proofs run once.  A kept reading serves a
context no deeper with no other references entered (a deeper one may pass `MAX_NESTING`, another reference may
close a cycle: both only refuse), nothing is kept between compiles (a list changed in place reads anew), and the
kept reading is what a fresh one gives.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.json_schema.flatten import document_context
from stdsl.compiler.json_schema.logic import keywords
from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.compiler.json_schema.resolve import MAX_NESTING, Context
from stdsl.errors import SchemaError

SHAPES = [
    {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
    {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string", "maxLength": 3}},
     "required": ["kind"]},
    {"type": "object", "properties": {"z": {"type": "number", "minimum": 3}}, "required": ["z"]},
]
"""Branches whose disjointness needs proofs (a discriminator for two, nothing for the third: it is subtracted)."""


def _schema(shapes: list[dict]) -> dict:
    one_of = {"oneOf": shapes}
    return {"type": "object", "additionalProperties": False,
            "properties": {"first": {"type": "array", "items": one_of}, "second": {"type": "array", "items": one_of},
                           "third": {"type": "object", "properties": {"inner": one_of}}}}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the readings that are computed (not served from `Context.one_of`), by list id."""
    computed: list[int] = []
    real = keywords._one_of_as_any_of

    def reading(parts, path, ctx):  # type: ignore[no-untyped-def]
        computed.append(id(parts))
        return real(parts, path, ctx)

    monkeypatch.setattr(keywords, "_one_of_as_any_of", reading)
    return computed


def test_an_outlined_compile_reads_each_list_once(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = _schema(SHAPES)
    computed = _counting(monkeypatch)
    compile_recursive(schema, outline=True, strict=False)
    assert computed == [id(schema["properties"]["first"]["items"]["oneOf"])]


def test_a_reading_serves_shallower_contexts_with_fewer_references(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = _schema(SHAPES)
    parts = schema["properties"]["first"]["items"]["oneOf"]
    computed = _counting(monkeypatch)
    root = document_context(schema)
    deep = root.entering("#/a").entering().entering("#/b")
    first = keywords.one_of_as_any_of(parts, "#/x", deep)
    assert keywords.one_of_as_any_of(parts, "#/y", root.entering("#/b")) is first
    assert keywords.one_of_as_any_of(parts, "#/y", root) is first
    assert len(computed) == 1
    keywords.one_of_as_any_of(parts, "#/y", root.entering("#/c"))
    keywords.one_of_as_any_of(parts, "#/y", deep.entering())
    assert len(computed) == 3


def _at_depth(ctx: Context, depth: int) -> Context:
    while ctx.depth < depth:
        ctx = ctx.entering()
    return ctx


def test_a_reading_never_hides_a_refusal_past_the_nesting_limit() -> None:
    nested = {"oneOf": [{"allOf": [{"allOf": [{"type": "string"}]}]}, {"type": "integer"}]}
    parts = nested["oneOf"]
    root = document_context(nested)
    keywords.one_of_as_any_of(parts, "#", root)
    with pytest.raises(SchemaError, match="nests deeper"):
        keywords.one_of_as_any_of(parts, "#", _at_depth(root, MAX_NESTING - 1))


def test_nothing_is_kept_between_compiles() -> None:
    shapes = [dict(shape) for shape in SHAPES]
    schema = _schema(shapes)
    text = '{"first":[{"z":4}]}'
    assert compile_constraint(schema, strict=False).accepts(text)
    shapes[2] = {"type": "object", "properties": {"z": {"type": "number", "maximum": 3}}, "required": ["z"]}
    assert not compile_constraint(schema, strict=False).accepts(text)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(range(len(SHAPES))), min_size=2, max_size=3, unique=True),
       st.lists(st.integers(0, 6), min_size=1, max_size=4))
def test_a_kept_reading_is_a_fresh_reading(chosen: list[int], depths: list[int]) -> None:
    schema = {"oneOf": [SHAPES[i] for i in chosen]}
    parts = schema["oneOf"]
    shared = document_context(schema)
    for depth in depths:
        kept = keywords.one_of_as_any_of(parts, "#", _at_depth(shared, depth))
        fresh = keywords._one_of_as_any_of(parts, "#", _at_depth(document_context(schema), depth))
        assert json.dumps(kept, sort_keys=True) == json.dumps(fresh, sort_keys=True)
    compiled = compile_constraint(schema, strict=False)
    validator = jsonschema.Draft202012Validator(schema)
    for value in ({"kind": "a", "x": 1}, {"kind": "b", "y": "s"}, {"z": 4, "kind": "b", "y": "long"}, {"z": 5},
                  {"kind": "a", "z": 3}, {"z": 1}, {"kind": "c"}):
        text = json.dumps(value, separators=(",", ":"))
        assert validator.is_valid(value) or not compiled.accepts(text), text
