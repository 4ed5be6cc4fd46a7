"""multipleOf, patternProperties, propertyNames, min/maxProperties and ignored unknown formats, against `jsonschema`.

For generated instances: every accepted text is valid (soundness), and every valid instance in
the compiler's spelling (compact, schema order, plain keys, exponent-free numbers) is accepted: the exact language
(`strict=False`; test_strict_objects.py checks what the default closes).
"""

from __future__ import annotations

import json
from decimal import Decimal

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema import resolve, schema_merge, validate
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import EmptyLanguageError, SchemaError

KEYS = st.sampled_from(["a", "b", "ab", "x", "xy", "x-1", "A", "a_b", "long_name", "é", "1"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-40, 120), st.sampled_from(["", "s", "xyz", "hello"]))
OBJECTS = st.dictionaries(KEYS, SCALARS, max_size=4)


def _check(schema: dict, instance: object) -> None:
    automaton = build_automaton(schema_to_ir(schema, strict=False))
    valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
    own = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    assert not automaton.accepts(own.encode()) or valid, f"accepted invalid {own}"
    if valid:
        text = dump_in_schema_order(instance, schema)
        assert automaton.accepts(text.encode()) or automaton.accepts(own.encode()), f"rejected valid {text}"


@pytest.mark.parametrize("schema", [
    {"type": "integer", "multipleOf": 7, "minimum": -30, "maximum": 100},
    {"type": "integer", "multipleOf": 3},
    {"type": "integer", "multipleOf": 0.5, "maximum": 50},
    {"allOf": [{"type": "integer", "multipleOf": 4}, {"multipleOf": 6}]},
])
def test_integer_multiple_of_matches_jsonschema(schema: dict) -> None:
    for value in range(-60, 140):
        _check(schema, value)


@pytest.mark.parametrize("multiple", ["0.01", "0.25", "2", "6.75", "1"])
@given(value=st.decimals(min_value=-200, max_value=200, places=3, allow_nan=False))
@settings(max_examples=150, deadline=None)
def test_number_multiple_of_matches_decimal_arithmetic(multiple: str, value: Decimal) -> None:
    schema = {"type": "number", "multipleOf": float(multiple), "minimum": -100}
    automaton = _cached(json.dumps(schema))
    text = format(value, "f")
    expected = value >= -100 and value % Decimal(multiple) == 0 and text not in ("-0", "-0.000")
    if text.startswith("-0") and value == 0:
        return
    assert automaton.accepts(text.encode()) == expected, text


_AUTOMATA: dict = {}


def _cached(key: str):
    if key not in _AUTOMATA:
        _AUTOMATA[key] = build_automaton(schema_to_ir(json.loads(key), strict=False))
    return _AUTOMATA[key]


OBJECT_SCHEMAS = [
    {"type": "object", "patternProperties": {"^[a-z_]+$": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "patternProperties": {"^x": {"type": "string", "maxLength": 3}}},
    {"type": "object", "properties": {"x": {"type": ["string", "null"]}},
     "patternProperties": {"^x": {"maxLength": 2}, "b": {"type": "integer"}}, "additionalProperties": {"type": "null"}},
    {"type": "object", "propertyNames": {"maxLength": 2}},
    {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "integer"}},
    {"type": "object", "propertyNames": {"enum": ["a", "b", "x"]}},
    {"type": "object", "minProperties": 1},
    {"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": False, "maxProperties": 2,
     "minProperties": 1},
    {"type": "object", "maxProperties": 0},
    {"type": "object", "properties": {"a": {"type": "string", "format": "int32"}}},
]


@pytest.mark.parametrize("index", range(len(OBJECT_SCHEMAS)))
@given(instance=OBJECTS)
@settings(max_examples=120, deadline=None)
def test_object_keywords_match_jsonschema(index: int, instance: dict) -> None:
    schema = OBJECT_SCHEMAS[index]
    automaton = _cached(json.dumps(schema))
    valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
    own = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    assert not automaton.accepts(own.encode()) or valid, f"accepted invalid {own}"
    if valid:
        text = dump_in_schema_order(instance, schema)
        assert automaton.accepts(text.encode()), f"rejected valid {text}"


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {}}, "maxProperties": 17},
    {"type": "object", "minProperties": 2},
    {"type": "integer", "multipleOf": 100003},
    {"type": "object", "patternProperties": {p: {"type": "string"} for p in "abcde"}},
    {"type": "object", "propertyNames": {"minimum": 3}},
])
def test_unenforceable_forms_are_refused_with_a_path(schema: dict) -> None:
    with pytest.raises(SchemaError) as caught:
        schema_to_ir(schema, strict=False)
    assert "#" in str(caught.value)


def test_spec_format_we_cannot_enforce_is_still_refused() -> None:
    with pytest.raises(SchemaError):
        schema_to_ir({"type": "string", "format": "idn-hostname"})


DRAFT_FORMS = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "x": {"type": "string"}},
     "dependentRequired": {"a": ["b"], "x": ["a"]}},
    {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["b"], "dependencies": {"b": ["a"]}},
    {"dependentRequired": {"a": ["b", "x"]}, "additionalProperties": {"type": ["integer", "string"]}},
    {"not": {"type": "string"}},
    {"type": ["string", "integer", "null"], "not": {"type": ["integer", "null"]}},
    {"type": "array", "items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False},
    {"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "null"}},
    {"type": "array", "items": {"type": "integer"}, "additionalItems": False},
    {"properties": {"a": {}, "b": {}}, "not": {"required": ["a"]}},
    {"type": "object", "not": {"required": ["a", "b"]}},
]
VALUES = st.one_of(SCALARS, OBJECTS, st.lists(SCALARS, max_size=3))


@pytest.mark.parametrize("index", range(len(DRAFT_FORMS)))
@given(instance=VALUES)
@settings(max_examples=120, deadline=None)
def test_dependencies_not_and_tuple_items_match_jsonschema(index: int, instance: object) -> None:
    schema = DRAFT_FORMS[index]
    automaton = _cached(json.dumps(schema))
    older = any(k in schema for k in ("dependencies", "additionalItems"))
    validator = jsonschema.Draft7Validator if older else jsonschema.Draft202012Validator
    valid = validator(schema).is_valid(instance)
    own = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    assert not automaton.accepts(own.encode()) or valid, f"accepted invalid {own}"
    if valid:
        text = dump_in_schema_order(instance, schema)
        assert automaton.accepts(text.encode()), f"rejected valid {text}"


def test_not_of_a_non_type_schema_is_refused() -> None:
    with pytest.raises(SchemaError) as caught:
        schema_to_ir({"properties": {"a": {"not": {"multipleOf": 3}}}})
    assert "#/properties/a/not/multipleOf" in str(caught.value)


UNIQUE = [
    {"type": "array", "items": {"enum": ["a", "b", "xyz", 1]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 1},
    {"type": "array", "items": {"type": "string", "enum": ["s", "hello", 3]}, "uniqueItems": True},
]
ARRAYS = st.lists(st.sampled_from(["a", "b", "xyz", 1, True, False, None, "s", "hello", 3]), max_size=5)


@pytest.mark.parametrize("index", range(len(UNIQUE)))
@given(instance=ARRAYS)
@settings(max_examples=150, deadline=None)
def test_unique_items_over_finite_sets_is_sound(index: int, instance: list) -> None:
    schema = UNIQUE[index]
    automaton = _cached(json.dumps(schema))
    valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
    own = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    assert not automaton.accepts(own.encode()) or valid, f"accepted invalid {own}"
    values = schema["items"].get("enum", [True, False])
    in_set_order = sorted(instance, key=lambda v: next(i for i, w in enumerate(values) if w == v and type(w) is type(v))
                          ) if valid else instance
    if valid:
        text = json.dumps(in_set_order, separators=(",", ":"), ensure_ascii=False)
        assert automaton.accepts(text.encode()), f"rejected valid {text}"


def test_unique_items_over_open_items_is_refused() -> None:
    with pytest.raises(SchemaError) as caught:
        schema_to_ir({"type": "array", "items": {"type": "string"}, "uniqueItems": True})
    assert "#/uniqueItems" in str(caught.value)


def test_an_enum_is_keyed_once_however_many_members_are_checked_against_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each member of a large unique-items enum is checked against the items schema, which holds the enum: its
    member keys are computed once per list, not once per check (n^2 keys took 4.9 s for 865 members)."""
    counted = [0]
    original = resolve.json_key

    def counting(value: object) -> str:
        counted[0] += 1
        return original(value)

    monkeypatch.setattr(resolve, "json_key", counting)
    monkeypatch.setattr(schema_merge, "json_key", counting)
    monkeypatch.setattr(validate, "json_key", counting)
    members = [f"v{i}" for i in range(400)]
    with pytest.raises(SchemaError, match="more than 24 values"):
        schema_to_ir({"type": "array", "items": {"type": "string", "enum": members}, "uniqueItems": True})
    assert counted[0] < 3 * len(members)


def test_an_enum_beside_a_format_keeps_the_members_of_that_format() -> None:
    """A format's language embeds an automaton (no regex form): an enum or const beside it is checked against that
    automaton, where the regex oracle raised ValueError (found by the large schema fuzz run)."""
    automaton = build_automaton(schema_to_ir({"format": "hostname", "enum": ["a.b", "x y", 3]}))
    assert [automaton.accepts(t) for t in (b'"a.b"', b'"x y"', b"3")] == [True, False, True]
    with pytest.raises(EmptyLanguageError):
        build_automaton(schema_to_ir({"format": "hostname", "const": "https://json-schema.org/draft/2020-12/schema"}))


def test_a_format_automaton_is_built_once_for_all_the_members_of_an_enum_beside_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The members of an enum beside a format are each checked against the format's automaton: it is built once
    per document for the format, not once per member (n builds before), and the members kept are the same."""
    from stdsl.compiler.automata import build

    built = [0]
    original = build.build_automaton

    def counting(*args: object, **kwargs: object) -> object:
        built[0] += 1
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(build, "build_automaton", counting)
    members = [f"host{i}.example" for i in range(30)] + ["not a host", "x y"]
    node = schema_to_ir({"type": "string", "format": "hostname", "enum": members})
    assert built[0] <= 2
    monkeypatch.undo()
    automaton = build_automaton(node)
    assert [automaton.accepts(json.dumps(m).encode()) for m in members] == [True] * 30 + [False, False]


def test_max_length_above_the_count_limit_is_lowered_not_refused() -> None:
    automaton = build_automaton(schema_to_ir({"type": "string", "maxLength": 5000}))
    assert automaton.accepts(json.dumps("a" * 1000).encode())
    assert not automaton.accepts(json.dumps("a" * 1001).encode())


@given(instance=OBJECTS)
@settings(max_examples=150, deadline=None)
def test_one_of_with_a_property_the_other_branch_forbids_is_exact(instance: dict) -> None:
    schema = {"oneOf": [
        {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"], "additionalProperties": False},
        {"type": "object", "properties": {"b": {}, "x": {}}, "required": ["x"], "additionalProperties": False}]}
    automaton = _cached(json.dumps(schema))
    valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
    own = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    assert not automaton.accepts(own.encode()) or valid, f"accepted invalid {own}"


@given(instance=st.one_of(SCALARS, st.dictionaries(st.sampled_from(["url", "category", "x"]),
                                                   st.sampled_from(["a", "b", "c", 1]), max_size=3)))
@settings(max_examples=200, deadline=None)
def test_one_of_with_an_optional_discriminator_is_exact(instance: object) -> None:
    schema = {"oneOf": [{"properties": {"category": {"enum": [k]}}, "required": ["url"]} for k in ("a", "b")]}
    automaton = _cached(json.dumps(schema))
    valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
    own = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
    assert not automaton.accepts(own.encode()) or valid, f"accepted invalid {own}"
    if valid:
        text = dump_in_schema_order(instance, schema)
        assert automaton.accepts(text.encode()), f"rejected valid {text}"


def test_an_embedded_id_without_references_only_changes_the_base_uri() -> None:
    inner = {"$id": "/properties/item", "type": "object", "properties": {"n": {"type": "integer", "minimum": 2}},
             "required": ["n"]}
    schema = {"type": "object", "properties": {"item": inner}}
    automaton = build_automaton(schema_to_ir(schema, strict=False))
    validator = jsonschema.Draft202012Validator(schema)
    for value in [{}, {"item": {"n": 2}}, {"item": {"n": 1}}, {"item": {}}, {"item": {"n": 3, "x": None}}]:
        text = json.dumps(value, separators=(",", ":"))
        assert automaton.accepts(text.encode()) == validator.is_valid(value), text
    with_ref = {"$defs": {"n": {"type": "integer"}},
                "properties": {"item": {"$id": "item.json", "properties": {"n": {"$ref": "#/$defs/n"}}}}}
    with pytest.raises(SchemaError, match="embedded resources"):
        schema_to_ir(with_ref)


def test_schema_order_follows_pattern_properties_into_their_values() -> None:
    inner = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    schema = {"type": "object", "patternProperties": {"^x": inner}, "additionalProperties": {"type": "object"}}
    value = {"x1": {"b": 2, "a": 1}, "y": {"b": 2, "a": 1}}
    text = dump_in_schema_order(value, schema)
    assert text == '{"x1":{"a":1,"b":2},"y":{"b":2,"a":1}}'
    assert build_automaton(schema_to_ir(schema)).accepts(text.encode())
