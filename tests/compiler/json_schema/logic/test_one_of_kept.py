"""A `oneOf` list read exactly once per document (`Context.one_of`), and only where that reading is the same.

A pushdown compile flattens an outlined member to decide whether to outline it and again as its body, and the
plain and outlined tries read one document: each list's disjointness proofs run once.  A kept reading serves a
context no deeper with no other references entered (another reference may close a cycle: it only refuses), and a
deeper one with the same references where the reading, shifted down, stays below `MAX_NESTING` (an outlined body
is read nearer the root than the plain lowering reads it); nothing is kept between compiles (a list changed in
place reads anew), and the kept reading is what a fresh one gives.
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
from tests.data_files import MASKBENCH, MASKBENCH_ABSENT

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
    assert keywords.one_of_as_any_of(parts, "#/y", _at_depth(deep, 40)) is first
    assert len(computed) == 1
    keywords.one_of_as_any_of(parts, "#/y", root.entering("#/c"))
    keywords.one_of_as_any_of(parts, "#/y", deep.entering("#/d"))
    assert len(computed) == 3


def test_a_reading_serves_deeper_contexts_only_where_it_stays_below_the_nesting_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reading of the outer list enters the inner list's kept reading: its reach counts the inner one's, so
    that near the limit the outer list is read anew and refused as a fresh reading is."""
    inner = {"oneOf": [{"allOf": [{"allOf": [{"allOf": [{"type": "string"}]}]}]}, {"type": "integer"}]}
    outer = {"oneOf": [inner, {"type": "boolean"}]}
    root = document_context({"allOf": [inner, outer]})
    computed = _counting(monkeypatch)
    keywords.one_of_as_any_of(inner["oneOf"], "#/i", root)
    kept = keywords.one_of_as_any_of(outer["oneOf"], "#/o", root)
    assert len(computed) == 2
    assert keywords.one_of_as_any_of(outer["oneOf"], "#/o", _at_depth(root, MAX_NESTING - 8)) is kept
    assert len(computed) == 2
    with pytest.raises(SchemaError, match="nests deeper"):
        keywords.one_of_as_any_of(outer["oneOf"], "#/o", _at_depth(root, MAX_NESTING - 3))
    with pytest.raises(SchemaError, match="nests deeper"):
        keywords._one_of_as_any_of(outer["oneOf"], "#/o", _at_depth(document_context(outer), MAX_NESTING - 3))


def test_a_refusal_is_kept_for_the_path_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused list is raised again without a reading where the same reading would refuse the same way, and read
    anew at another path (its message names the path) or near the nesting limit."""
    schema = {"oneOf": [{"type": "object"}, {"type": "object", "properties": {"a": {"type": "string"}},
                                              "additionalProperties": {"type": "integer"}}]}
    parts = schema["oneOf"]
    root = document_context(schema)
    computed = _counting(monkeypatch)
    messages = []
    readings = [("#/x", root), ("#/x", _at_depth(root, 30)), ("#/y", root), ("#/y", _at_depth(root, MAX_NESTING))]
    for path, ctx in readings:
        with pytest.raises(SchemaError) as refused:
            keywords.one_of_as_any_of(parts, path, ctx)
        messages.append(str(refused.value))
    assert len(computed) == 3
    assert messages[0] == messages[1] != messages[2]
    assert "#/x/1/additionalProperties" in messages[0] and "nests deeper" in messages[3]
    with pytest.raises(SchemaError) as fresh:
        keywords._one_of_as_any_of(parts, "#/y", _at_depth(document_context(schema), MAX_NESTING - 1))
    assert str(fresh.value) == messages[2]


CONFIG_REFUSAL = (
    "'oneOf' branches may overlap and a branch has no exact negation (cannot negate 'additionalProperties' exactly "
    "(its failure is not expressible as a schema) (at schema path #/properties/sources/patternProperties/properties/"
    "spec/properties/changedif/oneOf/1/properties/spec/additionalProperties)) (at schema path #/properties/sources/"
    "patternProperties/properties/spec/properties/changedif/oneOf)")
"""MaskBench `JsonSchemaStore---config.json`'s refusal, as main gave it before its lists were read once."""


@pytest.mark.slow
@pytest.mark.skipif(not MASKBENCH.is_dir(), reason=MASKBENCH_ABSENT)
@pytest.mark.parametrize("strict", [False, True])
def test_a_large_refused_schema_reads_each_list_once(monkeypatch: pytest.MonkeyPatch, strict: bool) -> None:
    """MaskBench's config.json (3,333 members) lowers its outlined bodies first and is refused there, then again in
    the plain lowering, which read four of its `oneOf` lists anew one level deeper (0.12 s of its 0.41 s): each list
    is now read once, and the refusal is main's."""
    schema = json.loads((MASKBENCH / "JsonSchemaStore---config.json").read_text())["schema"]
    computed = _counting(monkeypatch)
    with pytest.raises(SchemaError) as refused:
        compile_constraint(schema, strict=strict)
    assert str(refused.value) == CONFIG_REFUSAL
    assert len(computed) == len(set(computed)) > 4


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
