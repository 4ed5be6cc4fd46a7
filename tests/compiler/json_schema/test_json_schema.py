"""JSON Schema → IR: the benchmark schemas, the supported keywords against `jsonschema`, and clear refusals."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.json_tokens import Whitespace
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.to_ir import ANY_VALUE_DEPTH, schema_to_ir
from stdsl.errors import SchemaError
from tests.data_files import EXTRACTION, FIELDS

TASK_FILES = sorted(EXTRACTION.glob("*.json")) + sorted(FIELDS.glob("fields_*.json"))


def _accepts(schema: dict | bool, text: str, whitespace: Whitespace | None = None) -> bool:
    return build_automaton(schema_to_ir(schema, whitespace=whitespace)).accepts(text.encode("utf-8"))


def _mutations(schema: dict, gold: dict) -> list[dict]:
    """Invalid variants of a gold document: a required key removed, a wrong enum value, a wrong type."""
    out = []
    for name in schema.get("required", []):
        out.append({k: v for k, v in gold.items() if k != name})
    for name, sub in schema["properties"].items():
        if "enum" in sub:
            out.append({**gold, name: "not_an_option"})
        wrong = 12345 if sub.get("type") in ("string", "array", "object", "boolean") else "text"
        out.append({**gold, name: wrong})
    return out


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: p.stem)
def test_task_schemas(path: Path) -> None:
    task = json.loads(path.read_text())
    schema, gold = task["schema"], task.get("gold", task.get("example"))
    automaton = build_automaton(schema_to_ir(schema))
    assert automaton.accepts(dump_in_schema_order(gold, schema).encode("utf-8"))
    for bad in _mutations(schema, gold):
        assert not automaton.accepts(dump_in_schema_order(bad, schema).encode("utf-8")), bad
        assert not automaton.accepts(json.dumps(bad, separators=(",", ":")).encode("utf-8"))


@pytest.mark.parametrize("schema, path, words", [
    ({"type": "foo"}, "#/type", "'type'"),
    ({"properties": {"n": {"minimum": "3"}}}, "#/properties/n/minimum", "must be a number"),
    ({"properties": {"n": {"type": "integer", "multipleOf": 100003}}}, "#/properties/n/multipleOf", "multipleOf"),
    ({"items": {"not": {"multipleOf": 3}}}, "#/items/not/multipleOf", "'multipleOf'"),
    ({"patternProperties": {p: {"type": "string"} for p in "abcde"}}, "#/patternProperties", "patternProperties"),
    ({"required": "a"}, "#/required", "required"),
    ({"$defs": {"n": {"properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"},
     "#/$defs/n/properties/next/$ref", "recursive"),
    ({"$ref": "#/$defs/missing"}, "#/$ref", "does not resolve"),
    ({"$ref": "other.json"}, "#/$ref", "inside the document"),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, "#/oneOf", "overlap"),
    ({"allOf": [{"format": "date"}, {"format": "uuid"}]}, "#/allOf", "format"),
    ({"type": "string", "format": "regex"}, "#/format", "regex"),
    ({"uniqueItems": True}, "#/uniqueItems", "uniqueItems"),
    ({"properties": {"a": 3}}, "#/properties/a", "object or a boolean"),
    ({"allOf": [{"enum": ["x"]}, {"not": {"not": {"$ref": ["a"]}}}]}, "#/allOf/1/not/not/$ref", "must be a string"),
    ({"properties": {"\ud800v": {}}, "patternProperties": {"^v": {}}, "additionalProperties": False},
     "#/patternProperties", "lone surrogate"),
])
def test_refusals_name_the_keyword(schema: dict, path: str, words: str) -> None:
    with pytest.raises(SchemaError) as info:
        schema_to_ir(schema)
    assert info.value.path == path
    assert words in str(info.value)


def test_recursion_error_names_the_cycle() -> None:
    schema = {"$defs": {"a": {"items": {"$ref": "#/$defs/b"}}, "b": {"items": {"$ref": "#/$defs/a"}}},
              "$ref": "#/$defs/a"}
    with pytest.raises(SchemaError, match=r"#/\$defs/a -> #/\$defs/b -> #/\$defs/a"):
        schema_to_ir(schema)


def test_annotations_and_unknown_keywords_are_ignored() -> None:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "t", "description": "d",
              "type": "integer", "default": 3, "examples": [1], "$comment": "c", "deprecated": False,
              "markdownDescription": "m", "x-vendor": 1}
    assert _accepts(schema, "3")


@pytest.mark.parametrize("key", ["minimun", "Type", "maxLenght", "requried"])
def test_misspelled_constraints_are_ignored_with_a_warning(key: str) -> None:
    from stdsl.compiler.json_schema.resolve import IgnoredKeywordWarning

    with pytest.warns(IgnoredKeywordWarning, match="did you mean"):
        automaton = build_automaton(schema_to_ir({key: 3}))
    assert automaton.accepts(b'"anything"') and automaton.accepts(b"1")


def test_optional_properties_keep_order_and_extras_follow() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
              "additionalProperties": {"type": "boolean"}}
    automaton = build_automaton(schema_to_ir(schema))
    for text in ('{}', '{"a":1}', '{"b":"x"}', '{"a":1,"b":"x"}', '{"a":1,"z":true}', '{"z":true,"y":false}'):
        assert automaton.accepts(text.encode()), text
    for text in ('{"b":"x","a":1}', '{"z":true,"a":1}', '{"a":true}', '{"z":1}', '{"\\u0061":true}', '{,}',
                 '{"a":1,}'):
        assert not automaton.accepts(text.encode()), text


def test_required_key_not_in_properties() -> None:
    schema = {"properties": {"a": {"type": "integer"}}, "required": ["a", "b"],
              "additionalProperties": {"type": "null"}}
    assert _accepts(schema, '{"a":1,"b":null}')
    assert not _accepts(schema, '{"a":1}')
    assert dump_in_schema_order({"b": None, "c": None, "a": 1}, schema) == '{"a":1,"b":null,"c":null}'


def test_schema_order_keeps_an_integral_float_a_float() -> None:
    """`2.0` is not an integer under draft 4, so the schema-order spelling keeps its fraction where numbers are
    allowed (and it is accepted there); an integer-only schema writes `2`."""
    schema = {"properties": {"n": {"type": "integer"}, "x": {"type": "number", "multipleOf": 0.25, "minimum": 0},
                             "free": {}}}
    instance = {"free": [1.0, {"k": -3.0}], "x": 2.0, "n": 7.0}
    text = dump_in_schema_order(instance, schema)
    assert text == '{"n":7,"x":2.0,"free":[1.0,{"k":-3.0}]}'
    assert _accepts(schema, text) and json.loads(text)["x"] == 2.0 and isinstance(json.loads(text)["x"], float)

def test_arrays_prefix_items_and_length() -> None:
    schema = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": {"type": "null"},
              "minItems": 1, "maxItems": 3}
    automaton = build_automaton(schema_to_ir(schema))
    for text in ('[1]', '[1,"a"]', '[1,"a",null]'):
        assert automaton.accepts(text.encode()), text
    for text in ('[]', '["a"]', '[1,2]', '[1,"a",null,null]', '[1,"a",1]'):
        assert not automaton.accepts(text.encode()), text
    closed = {"prefixItems": [{"const": 1}], "items": False}
    assert _accepts(closed, "[1]") and _accepts(closed, "[]") and not _accepts(closed, "[1,1]")


def test_one_of_with_discriminator_and_all_of_merge() -> None:
    cat = {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
           "required": ["kind"]}
    dog = {"type": "object", "properties": {"kind": {"const": "dog"}, "bark": {"type": "boolean"}},
           "required": ["kind"]}
    schema = {"oneOf": [cat, dog]}
    assert _accepts(schema, '{"kind":"cat","lives":9}') and _accepts(schema, '{"kind":"dog","bark":true}')
    assert not _accepts(schema, '{"kind":"cow"}')
    merged = {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"properties": {"a": {"minimum": 5}, "b": {"type": "string"}}, "required": ["b"]}]}
    assert _accepts(merged, '{"a":5,"b":"x"}')
    assert not _accepts(merged, '{"a":4,"b":"x"}') and not _accepts(merged, '{"a":5}')


def test_const_and_enum_objects_keep_their_key_order() -> None:
    schema = {"enum": [{"b": 1, "a": [1.0, "x"]}, None, 2.5]}
    automaton = build_automaton(schema_to_ir(schema))
    text = dump_in_schema_order({"a": [1, "x"], "b": 1}, schema)
    assert text == '{"b":1,"a":[1,"x"]}' and automaton.accepts(text.encode())
    assert automaton.accepts(b"null") and automaton.accepts(b"2.5") and not automaton.accepts(b"2")


def test_whitespace_is_bounded() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}, "required": ["a"]}
    ws = Whitespace(max_run=2)
    assert _accepts(schema, ' { "a" :\n[ 1 ,2 ] } ', ws)
    assert not _accepts(schema, '{   "a":[1]}', ws)
    assert not _accepts(schema, '{ "a":[1]}')


def test_unconstrained_value_depth_is_bounded() -> None:
    deep = [[["x"]]]
    assert _accepts(True, json.dumps(deep, separators=(",", ":")))
    too_deep = deep
    for _ in range(ANY_VALUE_DEPTH - 2):
        too_deep = [too_deep]
    assert not _accepts(True, json.dumps([too_deep], separators=(",", ":")))


SCHEMAS = [
    {"type": "object", "properties": {"id": {"type": "integer", "minimum": -5, "exclusiveMaximum": 40},
                                      "tag": {"enum": ["x", "y", 3]},
                                      "v": {"type": ["string", "null"], "maxLength": 3}},
     "required": ["id"], "additionalProperties": {"type": "boolean"}},
    {"type": "array", "prefixItems": [{"type": "number", "minimum": -1.5, "maximum": 2}], "items": {"type": "string"},
     "maxItems": 3},
    {"anyOf": [{"type": "integer", "maximum": 0}, {"type": "string", "minLength": 2},
               {"type": "object", "properties": {"k": {"const": [1, {"z": None}]}}, "required": ["k"]}]},
    {"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "integer"}, "minItems": 1}]},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-50, 50) | st.floats(-3, 3, allow_nan=False).map(lambda x: round(x, 2))
    | st.text(alphabet="xyzk\"\\é", max_size=4) | st.sampled_from(["x", "y", 3, True]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["id", "tag", "v", "k", "z", "w"]),
                                                                 inner, max_size=4),
    max_leaves=8)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_agrees_with_jsonschema_on_random_instances(index: int) -> None:
    schema = SCHEMAS[index]
    automaton = build_automaton(schema_to_ir(schema))
    validator = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=300, deadline=None)
    @given(json_values)
    def check(instance: object) -> None:
        valid = validator.is_valid(instance)
        for text in {dump_in_schema_order(instance, schema), json.dumps(instance, separators=(",", ":"))}:
            if automaton.accepts(text.encode("utf-8")):
                assert valid, text
        if valid:
            assert automaton.accepts(dump_in_schema_order(instance, schema).encode("utf-8")), instance

    check()


def test_schema_is_not_mutated() -> None:
    schema = {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"required": ["a"]}], "$defs": {"x": {}}}
    before = copy.deepcopy(schema)
    schema_to_ir(schema)
    dump_in_schema_order({"a": 1}, schema)
    assert schema == before


@pytest.mark.parametrize("schema, good, bad", [
    ({"definitions": {"base": {"properties": {"ignore": {"type": "string"}}},
                      "rules": {"$ref": "#/definitions/base", "properties": {"level": {"type": "integer"}}}},
      "$ref": "#/definitions/base", "properties": {"rule": {"$ref": "#/definitions/rules"}}},
     '{"rule":{"level":1,"ignore":"x"},"ignore":"y"}', '{"rule":{"ignore":1}}'),
    ({"definitions": {"base": {"type": "object", "properties": {"a": {"type": "integer"}}},
                      "palette": {"anyOf": [{"$ref": "#/definitions/base"}],
                                  "properties": {"p": {"$ref": "#/definitions/base"}}}},
      "$ref": "#/definitions/palette"}, '{"p":{"a":1},"a":2}', '{"p":{"a":"x"}}'),
    ({"definitions": {"edition": {"type": "object", "properties": {"n": {"type": "integer"}}}},
      "properties": {"editions": {"patternProperties": {"^[a-z]*$": {"$ref": "#/definitions/edition"}},
                                  "properties": {"default": {"$ref": "#/definitions/edition"}}}}},
     '{"editions":{"default":{"n":1},"x":{"n":2}}}', '{"editions":{"default":{"n":"1"}}}'),
])
def test_a_definition_met_twice_side_by_side_is_no_cycle(schema: dict, good: str, bad: str) -> None:
    """A `$ref` beside other keywords, an `anyOf` branch beside sibling members and the `allOf` a declared name
    and a matching pattern make each reach the same definition without recursion: compiled, not refused."""
    automaton = build_automaton(schema_to_ir(schema))
    assert automaton.accepts(good.encode()) and not automaton.accepts(bad.encode())
