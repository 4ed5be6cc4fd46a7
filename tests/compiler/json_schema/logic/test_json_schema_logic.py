"""Exact `not`, `oneOf`, `if`/`then`/`else` and `dependentSchemas`, checked against the `jsonschema` validator.

The compiled automaton must never accept a text whose value the validator rejects (in any of the
compact spellings), and must accept every valid instance written in schema order, except the
documented gaps: non-integer numbers failing a negated `integer` type, strings with `"` under a pattern.
That is the exact language (`strict=False`); the strict default accepts part of it, never an invalid text.
"""

from __future__ import annotations

import json
import re
import warnings

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.ir import to_pattern
from stdsl.compiler.json_schema.logic.complement import string_complement_pattern
from stdsl.compiler.json_schema.logic.disjoint import string_subset
from stdsl.compiler.json_schema.logic.negation import finite_language
from stdsl.compiler.json_schema.logic.pattern_complement import pattern_complement
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.resolve import IgnoredKeywordWarning
from stdsl.compiler.json_schema.scalars.keys import pattern_matcher
from stdsl.compiler.json_schema.scalars.strings import ecma_to_python, pattern_search
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import EmptyLanguageError, SchemaError
from tests.data_files import MASKBENCH, MASKBENCH_ABSENT

INSTANCES = [None, True, False, 0, 1, 1.0, 2, 2.5, -3, 7, "", "a", "ab", "abc", "é", "x\"y", [], [1], ["a", 2],
             [1, 2, 3], {}, {"a": 1}, {"a": "x"}, {"b": 2}, {"a": 1, "b": None}, {"a": [1], "c": "z"},
             {"c": 1, "b": "q"}, {"a": 2.5, "b": True}]

leaves = st.one_of(
    st.sampled_from([{"type": t} for t in ("null", "boolean", "integer", "number", "string", "array", "object")]),
    st.builds(lambda k, n: {k: n}, st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
              st.sampled_from([-1, 0, 1, 2, 2.5])),
    st.builds(lambda k, n: {k: n}, st.sampled_from(["minLength", "maxLength", "minItems", "maxItems"]),
              st.integers(0, 3)),
    st.builds(lambda vs: {"enum": vs}, st.lists(st.sampled_from(INSTANCES[:16] + [{}, []]), min_size=1, max_size=3)),
    st.builds(lambda v: {"const": v}, st.sampled_from(INSTANCES[:16])),
    st.builds(lambda names: {"required": names}, st.lists(st.sampled_from("abc"), min_size=1, max_size=2, unique=True)),
    st.builds(lambda t: {"properties": {"a": {"type": t}}}, st.sampled_from(["integer", "string", "array"])),
    st.builds(lambda v: {"properties": {"b": {"const": v}}, "required": ["b"]}, st.sampled_from([2, "q", None])),
    st.just({"dependentRequired": {"a": ["b"]}}),
    st.just({"prefixItems": [{"type": "integer"}]}),
    st.just({"items": {"type": "integer"}, "maxItems": 3}),
    st.sampled_from([True, False, {}]),
)


def _combine(children: st.SearchStrategy) -> st.SearchStrategy:
    pairs = st.lists(children, min_size=1, max_size=3)
    return st.one_of(
        st.builds(lambda s: {"not": s}, children),
        st.builds(lambda xs: {"anyOf": xs}, pairs),
        st.builds(lambda xs: {"allOf": xs}, pairs),
        st.builds(lambda xs: {"oneOf": xs}, pairs),
        st.builds(lambda i, t, e: {"if": i, "then": t, "else": e}, children, children, children),
        st.builds(lambda i, t: {"if": i, "then": t}, children, children),
        st.builds(lambda s: {"dependentSchemas": {"a": s}}, children),
        st.builds(lambda a, b: {**a, **b} if isinstance(a, dict) and isinstance(b, dict) else a, children, children),
    )


schemas = st.recursive(leaves, _combine, max_leaves=5)


def _spellings(instance: object, schema: object) -> list[str]:
    """Schema order first, then the instance's own compact spellings (UTF-8 and ASCII escapes)."""
    out = [json.dumps(instance, separators=(",", ":"), ensure_ascii=False),
           json.dumps(instance, separators=(",", ":"))]
    return list(dict.fromkeys([dump_in_schema_order(instance, schema)] + out))


def _automaton(schema: dict | bool, strict: bool) -> Automaton | None:
    """The schema's automaton (None: it admits no text); SchemaError when refused."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return build_automaton(schema_to_ir(schema, strict=strict))
    except EmptyLanguageError:
        return None


def _check_against_validator(schema: dict | bool, instances: list) -> int:
    """Assert soundness (and completeness unless approximated) of the exact language on the instances, and
    soundness of the strict one; the number the exact one accepts."""
    try:
        automaton = _automaton(schema, strict=False)
        closed = _automaton(schema, strict=True)
    except SchemaError:
        return -1
    uses_dependencies = isinstance(schema, dict) and "dependencies" in json.dumps(schema)
    approximated = "integer" in json.dumps(schema)
    validator = (jsonschema.Draft7Validator if uses_dependencies else jsonschema.Draft202012Validator)(schema)
    accepted = 0
    for instance in instances:
        valid = validator.is_valid(instance)
        texts = _spellings(instance, schema)
        hits = [t for t in texts if automaton is not None and automaton.accepts(t.encode("utf-8"))]
        assert valid or not hits, f"invalid instance accepted: {hits[0]} for {json.dumps(schema)}"
        strict_hits = [t for t in texts if closed is not None and closed.accepts(t.encode("utf-8"))]
        assert set(strict_hits) <= set(hits), f"strict accepts {strict_hits} outside the exact language"
        if valid and not (approximated and "2.5" in texts[0]) and "x\\\"y" not in texts[0]:
            assert automaton is not None and automaton.accepts(texts[0].encode("utf-8")), \
                f"valid instance rejected: {texts[0]} for {json.dumps(schema)}"
        accepted += bool(hits)
    return accepted


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas)
def test_logic_keywords_match_the_validator(schema: dict | bool) -> None:
    _check_against_validator(schema, INSTANCES)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas)
def test_logic_keywords_match_the_validator_long(schema: dict | bool) -> None:
    _check_against_validator(schema, INSTANCES)


@pytest.mark.parametrize("schema", [
    {"not": {"enum": [1, "a", None]}},
    {"not": {"const": 1.0}},
    {"type": "object", "properties": {"k": {"type": "string"}}, "not": {"properties": {"k": {"const": "ab"}},
                                                                        "required": ["k"]}},
    {"not": {"anyOf": [{"required": ["a"]}, {"type": "string"}]}},
    {"anyOf": [{"not": {"required": ["a"]}, "required": ["b"]}, {"required": ["a"]}]},
    {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
    {"oneOf": [{"enum": ["a", 1, {"a": 1}]}, {"type": "string", "minLength": 1}]},
    {"oneOf": [{"type": "integer"}, {"minimum": 2, "type": "integer"}]},
    {"oneOf": [{"additionalProperties": False, "properties": {"a": {}}, "required": ["a"]},
               {"additionalProperties": False, "properties": {"b": {}}, "required": ["b"]}]},
    {"dependencies": {"a": {"required": ["b"]}, "c": ["a"]}},
    {"if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]}, "else": {"required": ["c"]}},
    {"if": {"type": "string"}, "then": {"minLength": 2}},
    {"allOf": [{"enum": [{"a": 1}, {"a": "x"}, {"b": 2}, 3]}, {"not": {"properties": {"a": {"type": "integer"}}}}]},
])
def test_exact_forms(schema: dict) -> None:
    assert _check_against_validator(schema, INSTANCES) > 0


def test_excluded_strings_are_excluded_in_every_spelling() -> None:
    automaton = build_automaton(schema_to_ir({"type": "string", "not": {"enum": ["a", "ab"]}}))
    assert not automaton.accepts(b'"a"') and not automaton.accepts(b'"\\u0061"') and not automaton.accepts(b'"ab"')
    assert automaton.accepts(b'"abc"') and automaton.accepts(b'""') and automaton.accepts(b'"b"')


def test_excluded_numbers_compare_as_values() -> None:
    automaton = build_automaton(schema_to_ir({"type": "number", "not": {"enum": [1]}}))
    assert not automaton.accepts(b"1") and not automaton.accepts(b"1.0") and not automaton.accepts(b"1.00")
    assert automaton.accepts(b"1.5") and automaton.accepts(b"0")


@given(st.lists(st.text(max_size=3), max_size=4), st.text(max_size=4))
@settings(max_examples=100, deadline=None)
def test_string_complement_pattern(excluded: list[str], text: str) -> None:
    node = pattern_search(string_complement_pattern(excluded), "#", True)
    matched = re.fullmatch(to_pattern(node), text.encode("utf-8", "surrogatepass").decode("latin-1"), re.DOTALL)
    assert (matched is not None) == (text not in excluded)


def test_misspelled_keyword_is_ignored_with_a_warning() -> None:
    with pytest.warns(IgnoredKeywordWarning, match=r"'require'.*#/require.*'required'"):
        automaton = build_automaton(schema_to_ir({"type": "object", "require": ["a"]}))
    assert automaton.accepts(b"{}")


@pytest.mark.parametrize("schema", [
    {"enum": ["a", "bb", "ccc"], "not": {"maxLength": 1, "requird": ["x"]}},
    {"enum": ["a", "bb", "ccc"], "not": {"enum": ["a"], "requird": ["x"]}},
    {"type": "string", "maxLength": 4, "not": {"maxLength": 1, "requird": ["x"]}},
])
def test_a_misspelt_keyword_inside_a_not_is_warned_of_once(schema: dict) -> None:
    """A `not` over an enum's members is decided member by member on the raw schema (`satisfies`) and flattened too:
    its misspelt keyword is one warning for its one place, however many members or readings reach it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        schema_to_ir(schema)
    ignored = [str(w.message) for w in caught if issubclass(w.category, IgnoredKeywordWarning)]
    assert len(ignored) == 1 and "#/not/requird" in ignored[0], ignored


def test_negation_without_exact_form_is_refused() -> None:
    with pytest.raises(SchemaError, match="multipleOf"):
        schema_to_ir({"type": "integer", "not": {"multipleOf": 3}})
    with pytest.raises(SchemaError, match="oneOf"):
        schema_to_ir({"oneOf": [{"type": "number"}, {"type": "integer"}]})



SELF_ANY_OF = {"X": {"anyOf": [{"$ref": "#/$defs/X"}]}, "Y": {"anyOf": [{"$ref": "#/$defs/Y"}, {"type": "string"}]}}


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"$ref": "#/$defs/X"}, {"type": "integer"}], "$defs": SELF_ANY_OF},
    {"oneOf": [{"type": "integer"}, {"$ref": "#/$defs/X"}], "$defs": SELF_ANY_OF},
    {"oneOf": [{"$ref": "#/$defs/Y"}, {"type": "string"}], "$defs": SELF_ANY_OF},
    {"type": "string", "not": {"$ref": "#/$defs/Y"}, "$defs": SELF_ANY_OF},
])
def test_a_difference_through_a_self_referencing_any_of_is_refused(schema: dict) -> None:
    """A schema that is its own `anyOf` branch, subtracted for `oneOf` or `not`, is refused with a SchemaError
    naming where (the difference recursed until Python's stack ran out)."""
    for strict in (True, False):
        with pytest.raises(SchemaError, match=r"at schema path #"):
            compile_constraint(schema, strict=strict)


FIXED_SAMPLES = [
    "Github_easy---o67056.json", "Github_medium---o5027.json", "Github_medium---o5327.json",
    "Github_medium---o83807.json", "Github_medium---o27148.json", "Github_medium---o71820.json",
    "Github_trivial---o75109.json", "Glaiveai2K---calculate_area_d4217661.json",
    "Glaiveai2K---calculate_area_e6818129.json", "Github_hard---o69586.json",
    "Synthesized---draft2019_09_nonvalid_anyOf_id7_subschema1_not_2.json",
    "Synthesized---draft2019_09_valid_oneOf_id14_subschema1_not_2.json",
]


@pytest.mark.slow
@pytest.mark.skipif(not MASKBENCH.is_dir(), reason=MASKBENCH_ABSENT)
@pytest.mark.parametrize("name", FIXED_SAMPLES)
def test_maskbench_samples(name: str) -> None:
    path = MASKBENCH / name
    data = json.loads(path.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            automaton = build_automaton(schema_to_ir(data["schema"], strict=False))
        except EmptyLanguageError:
            automaton = None
    for test in data["tests"]:
        hits = [s for s in _spellings(test["data"], data["schema"])
                if automaton is not None and automaton.accepts(s.encode("utf-8"))]
        assert bool(hits) == test["valid"], (test["valid"], _spellings(test["data"], data["schema"]))


@pytest.mark.parametrize("schema", [
    {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"x": {"type": "integer"}},
     "not": {"$ref": "#/definitions/x", "minimum": 3}},
    {"not": {"dependencies": {"a": ["b"]}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "if": {"prefixItems": [{"type": "integer"}]},
     "then": {"minItems": 2}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"x": {"required": ["a"]}},
     "oneOf": [{"$ref": "#/definitions/x", "required": ["b"]}, {"properties": {"b": False}}]},
])
def test_draft_dependent_keywords_are_not_negated(schema: dict) -> None:
    with pytest.raises(SchemaError, match="draft"):
        schema_to_ir(schema)


CONTEXT_INSTANCES = INSTANCES + [{"0": [1, 2]}, {"1": [1]}, {"0": [], "a": 1}, {"a": 1, "c": 2}, {"b": "x", "a": "y"},
                                 "ab", "ba", "bb", "a1", [1, "a"], ["a", "b", "c", "d"], [[1], 2], {"a": None}]

context_leaves = st.one_of(
    st.builds(lambda names, extra: {"type": "object", "properties": {n: {"type": t} for n, t in names},
                                    "additionalProperties": extra},
              st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(["integer", "string", "null"])),
                       max_size=2, unique_by=lambda p: p[0]),
              st.sampled_from([False, {"type": "integer"}, True])),
    st.builds(lambda p: {"type": "object", "patternProperties": {p: {"type": "array", "minItems": 1}},
                         "additionalProperties": False}, st.sampled_from(["^[0-9]$", "^[ab]$"])),
    st.builds(lambda names: {"propertyNames": {"not": {"enum": names}}},
              st.lists(st.sampled_from(["a", "b", "0"]), min_size=1, max_size=2, unique=True)),
    st.just({"propertyNames": False}),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(["^a", "b$", "^[ab]+$", "1"])),
    st.builds(lambda t, high: {"type": "array", "items": {"type": t}, **({"maxItems": high} if high else {})},
              st.sampled_from(["integer", "string"]), st.sampled_from([None, 2])),
    st.builds(lambda t: {"type": "array", "items": {"type": t}}, st.sampled_from(["integer", "string", "array"])),
    leaves,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(context_leaves, _combine, max_leaves=4))
def test_negations_in_context_match_the_validator(schema: dict | bool) -> None:
    _check_against_validator(schema, CONTEXT_INSTANCES)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(context_leaves, _combine, max_leaves=5))
def test_negations_in_context_match_the_validator_long(schema: dict | bool) -> None:
    _check_against_validator(schema, CONTEXT_INSTANCES)


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "object", "additionalProperties": False, "properties": {"a": {"type": "integer"}}},
               {"type": "object", "additionalProperties": False, "properties": {"b": {"type": "string"}}}]},
    {"oneOf": [{"properties": {"a": {}, "c": {}}, "additionalProperties": False},
               {"properties": {"a": {"type": "integer"}, "b": {}}, "additionalProperties": False}]},
    {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}]},
    {"oneOf": [{"type": "string", "pattern": "^[ab]+$"}, {"type": "string", "maxLength": 0}]},
    {"anyOf": [{"type": "string", "pattern": "^a+$", "not": {"pattern": "^a"}}, {"type": "integer"}]},
    {"type": "string", "pattern": "^a+$", "not": {"pattern": "^b"}},
    {"type": "string", "not": {"pattern": "^[ab]{2}$"}},
    {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "string", "pattern": "^a"}]},
    {"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "string"}}]},
    {"oneOf": [{"type": "array", "items": {"type": "integer"}, "maxItems": 3}, {"type": "array", "minItems": 2}]},
    {"oneOf": [{"enum": [{"a": 1}]}, {"type": "object", "properties": {"a": {}}, "additionalProperties": False}]},
    {"type": "object", "not": {"propertyNames": {"not": {"const": "a"}}}},
    {"type": "object", "not": {"propertyNames": False}},
    {"type": "object", "patternProperties": {"^[0-9]$": {"type": "array"}}, "additionalProperties": False,
     "not": {"propertyNames": {"not": {"enum": ["1", "3"]}}}},
    {"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": False,
     "not": {"properties": {"a": {"type": "integer"}}, "additionalProperties": False}},
    {"if": {"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     "then": {"required": ["a"]}, "else": {"properties": {"a": {}, "b": {}}, "additionalProperties": False}},
])
def test_negations_in_context(schema: dict) -> None:
    assert _check_against_validator(schema, CONTEXT_INSTANCES) > 0


def test_negation_outside_its_context_stays_refused() -> None:
    with pytest.raises(SchemaError, match="additionalProperties"):
        schema_to_ir({"type": "object", "not": {"additionalProperties": False}})
    with pytest.raises(SchemaError, match="format"):
        schema_to_ir({"type": "string", "not": {"format": "date"}})
    with pytest.raises(SchemaError, match="items"):
        schema_to_ir({"type": "array", "not": {"items": {"type": "integer"}}})
    with pytest.raises(SchemaError, match="propertyNames"):
        schema_to_ir({"type": "object", "not": {"propertyNames": {"pattern": "^a"}}})


def test_approximated_branches_are_never_called_disjoint() -> None:
    """`not integer` drops non-integer numbers (no `type` spells them); 2.5 still meets both branches."""
    schema = {"oneOf": [{"not": {"type": "integer"}}, {"type": "number"}]}
    try:
        automaton = build_automaton(schema_to_ir(schema))
    except SchemaError:
        return
    assert not automaton.accepts(b"2.5")


def test_finite_key_languages_are_enumerated() -> None:
    assert sorted(finite_language(pattern_matcher("^(ab|c)$", "#"))) == ["ab", "c"]
    assert finite_language(pattern_matcher("^a+$", "#")) is None
    assert finite_language(pattern_matcher("a", "#")) is None
    assert len(finite_language(pattern_matcher("^[0-9]$", "#")) or []) == 10


@pytest.mark.parametrize(("a", "b", "expected"), [
    ({"pattern": "^a+$"}, {"pattern": "^a"}, True),
    ({"pattern": "^a"}, {"pattern": "^a+$"}, False),
    ({"maxLength": 0}, {"pattern": "x"}, False),
    ({"minLength": 3, "maxLength": 2}, {"pattern": "x"}, True),
    ({"pattern": "^[0-9]{2}$"}, {"maxLength": 2}, True),
])
def test_string_subset(a: dict, b: dict, expected: bool) -> None:
    assert string_subset(a, b) is expected


NEGATED_PATTERNS = ["^a", "b$", "^[a-f0-9]{4}$", "^/d[^/]+(/[^/]+)*$", "é|\U0001F600", "", "^\\d+\\.\\d+$", "a.b"]


@given(st.sampled_from(NEGATED_PATTERNS), st.text(alphabet="ab/df0129.é\U0001F600\u4e2d\n", max_size=8))
@settings(max_examples=300, deadline=None)
def test_pattern_complement_matches_where_the_pattern_does_not(pattern: str, text: str) -> None:
    """Python `re` is the oracle, with ECMA's end anchor (`$` only at the very end: `\\Z`)."""
    node = pattern_search(pattern_complement(pattern, "#"), "#", True)
    matched = re.fullmatch(to_pattern(node), text.encode("utf-8").decode("latin-1"), re.DOTALL) is not None
    ecma_end = ecma_to_python(pattern, "#").replace("$", "\\Z")
    assert matched == (re.search(ecma_end, text) is None)
