"""A part of a schema document made standalone validates exactly what the part validates inside its document
(jsonschema, resolving the part's references in the document, is the oracle), and compiles to that language."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from stdsl.compiler.constraint import compile
from stdsl.compiler.json_schema.member_document import DOCUMENT, standalone
from stdsl.compiler.pushdown.grammar import DefinitionError, GrammarConflictError

KEYS = ["a", "b", "c"]
LEAVES = [{"type": "integer", "minimum": 0, "maximum": 3}, {"type": "string", "enum": ["x", "y"]},
          {"type": "boolean"}, {"enum": [1, "x", None]}]
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-1, 4) | st.sampled_from(["x", "y", "z"]),
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3), max_leaves=8)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A tool-like document: `$defs` and `properties` whose schemas refer to one another (`#/$defs/..`,
    `#/properties/..`, `#`, an anchor), in cycles through objects and arrays, under an `$id` or not.  A reference
    not below an object member or an array item points to a target earlier in `TARGETS` (or the root, an object),
    so that no schema refers to itself before reading anything (which the oracle cannot validate either)."""
    count = draw(st.integers(1, 3))
    targets = ["#leaf"] + [f"#/$defs/D{i}" for i in range(count)] + [f"#/properties/{key}" for key in KEYS]

    def schema(depth: int, rank: int, guarded: bool) -> Any:
        kind = draw(st.sampled_from(["leaf", "ref", "object", "array", "anyOf"] if depth < 2 else ["leaf", "ref"]))
        if kind == "leaf":
            return dict(draw(st.sampled_from(LEAVES)))
        if kind == "ref":
            reachable = (targets if guarded else targets[:rank]) + ["#"]
            reference: dict[str, Any] = {"$ref": draw(st.sampled_from(reachable))}
            if draw(st.booleans()):
                reference["description"] = "annotated"
            return reference
        if kind == "object":
            keys = draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
            return {"type": "object", "properties": {key: schema(depth + 1, rank, True) for key in keys},
                    "additionalProperties": False}
        if kind == "array":
            return {"type": "array", "items": schema(depth + 1, rank, True), "maxItems": 2}
        return {"anyOf": [schema(depth + 1, rank, guarded), schema(depth + 1, rank, guarded)]}

    definitions = {"D0": {**dict(draw(st.sampled_from(LEAVES))), "$anchor": "leaf"}}
    for i in range(1, count):
        definitions[f"D{i}"] = schema(0, targets.index(f"#/$defs/D{i}"), False)
    properties = {key: schema(0, targets.index(f"#/properties/{key}"), False) for key in KEYS}
    document: dict[str, Any] = {"$defs": definitions, "type": "object", "properties": properties,
                                "additionalProperties": False}
    if draw(st.booleans()):
        document["$id"] = "https://example.com/tool.json"
        document["properties"]["a"] = {"$ref": "https://example.com/tool.json#/$defs/D0"}
    return document


def valid_inside(document: dict[str, Any], key: str, instance: Any) -> bool:
    """The oracle: whether `instance` is valid against `document`'s property `key`, read in the document."""
    uri = document.get("$id", "urn:stdsl:tool")
    registry: Registry = Registry().with_resource(uri, Resource.from_contents(document, DRAFT202012))
    validator = jsonschema.Draft202012Validator({"$ref": f"{uri}#/properties/{key}"}, registry=registry)
    return validator.is_valid(instance)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.sampled_from(KEYS), st.lists(VALUES, min_size=1, max_size=12))
def test_a_standalone_part_validates_what_it_validates_in_its_document(document: dict[str, Any], key: str,
                                                                         instances: list[Any]) -> None:
    part = document["properties"][key]
    alone = standalone(part, document)
    json.dumps(alone)
    validator = jsonschema.Draft202012Validator(alone)
    for instance in instances:
        assert validator.is_valid(instance) == valid_inside(document, key, instance), (alone, instance)


def test_a_part_without_references_is_itself() -> None:
    part = {"type": "object", "properties": {"$ref": {"type": "string"}}, "enum": [{"$ref": "#/x"}]}
    assert standalone(part, {"properties": {"p": part}}) is part


def test_only_the_targets_reached_are_copied() -> None:
    """Another parameter's change does not change a part that does not reach it (its compile stays cached)."""
    document = {"$defs": {"Unit": {"enum": ["c", "f"]}, "Other": {"type": "integer"}},
                "properties": {"unit": {"$ref": "#/$defs/Unit"}, "n": {"$ref": "#/$defs/Other"}}}
    alone = standalone(document["properties"]["unit"], document)
    assert alone == {"$ref": f"#/$defs/{DOCUMENT}/$defs/Unit",
                     "$defs": {DOCUMENT: {"$defs": {"Unit": {"enum": ["c", "f"]}}}}}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.sampled_from(KEYS), st.lists(VALUES, min_size=1, max_size=8))
def test_a_standalone_part_compiles_to_its_language_in_the_document(document: dict[str, Any], key: str,
                                                                      instances: list[Any]) -> None:
    try:
        constraint = compile(standalone(document["properties"][key], document), strict=False)
    except (GrammarConflictError, DefinitionError):
        assume(False)
    for instance in instances:
        text = json.dumps(instance, separators=(",", ":")).encode()
        assert constraint.accepts(text) == valid_inside(document, key, instance), instance
