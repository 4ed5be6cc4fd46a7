"""Integral numbers written with a zero fraction (`1.0`): integers from draft 6 on, never under draft 4.

`const`/`enum` numbers compare by value in every draft, so `0.0` matches `const: 0`.  The
oracle is `jsonschema` with the document's own draft.  One zero only: `7.00` is refused (a subset of the
valid texts), so a bounded integer stays a finite language and no output runs on writing zeros.
"""

from __future__ import annotations

import json

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint import compile as compile_constraint

DRAFT_4 = "http://json-schema.org/draft-04/schema#"
SCHEMAS = [
    {"type": "integer"},
    {"type": "integer", "minimum": -3, "maximum": 40, "multipleOf": 3},
    {"$schema": DRAFT_4, "type": "integer"},
    {"$schema": DRAFT_4, "type": "integer", "maximum": 9},
    {"const": 0},
    {"enum": [1.0, -2, "1", True, [3]]},
    {"$schema": DRAFT_4, "enum": [0, 5]},
    {"type": "object", "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}}, "required": ["n"],
     "additionalProperties": False},
]


def _validator(schema: dict) -> jsonschema.protocols.Validator:
    cls = jsonschema.Draft4Validator if schema.get("$schema") == DRAFT_4 else jsonschema.Draft202012Validator
    return cls(schema)


numbers = st.builds(lambda sign, whole, zeros, digit: f"{sign}{whole}" + (f".{'0' * zeros}{digit}"
                                                                          if zeros or digit else ""),
                    st.sampled_from(["", "-"]), st.integers(0, 60), st.integers(0, 3), st.sampled_from(["", "5"]))
"""Number texts: integers, integers with a zero fraction (`7.00`), and fractions (`7.005`)."""


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(range(len(SCHEMAS))), numbers, st.booleans())
def test_zero_fractions_follow_the_draft(index: int, text: str, wrap: bool) -> None:
    schema = SCHEMAS[index]
    wrapped = f'{{"n":{text}}}' if "properties" in schema else (f"[{text}]" if wrap and "enum" in schema else text)
    valid = _validator(schema).is_valid(json.loads(wrapped))
    accepted = compile_constraint(schema).accepts(wrapped)
    assert not accepted or valid, (schema, wrapped)
    if valid and not text.startswith("-0") and ".00" not in text:
        assert accepted, (schema, wrapped)
    if ".00" in text:
        assert not accepted, (schema, wrapped)


def test_examples() -> None:
    assert compile_constraint({"type": "integer"}).accepts("1.0")
    assert not compile_constraint({"$schema": DRAFT_4, "type": "integer"}).accepts("1.0")
    assert compile_constraint({"const": 0}).accepts("0.0")
    assert not compile_constraint({"const": 0}).accepts("0.00")
    assert not compile_constraint({"type": "integer", "maximum": 9}).accepts("8.000000")
    assert not compile_constraint({"const": 0}).accepts("0.01")
