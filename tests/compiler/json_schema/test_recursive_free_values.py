"""In the pushdown path an unconstrained value is a nonterminal of its own: it nests as deep as the stack allows.

The DFA compiler stops free-form values at `ANY_VALUE_DEPTH`; a recursive schema's free-form
member takes deeper values, and every random accepting walk still validates (`jsonschema`).
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.json_schema.to_ir import ANY_VALUE_DEPTH
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from tests.compiler.accepting_walks import random_accepted

TREE = {"$defs": {"node": {"type": "object", "properties": {"meta": {}, "kids": {"type": "array",
                                                                                  "items": {"$ref": "#/$defs/node"}}},
                           "required": ["meta"], "additionalProperties": {"type": "object"}}},
        "$ref": "#/$defs/node"}


def nested(depth: int) -> object:
    """A value with `depth` levels of alternating objects and arrays."""
    value: object = 1
    for level in range(depth):
        value = {"k": value} if level % 2 else [value, "x"]
    return value


def test_free_values_nest_deeper_than_the_dfa_bound() -> None:
    constraint = stdsl.compile(TREE)
    assert isinstance(constraint, PushdownConstraint)
    deep = nested(ANY_VALUE_DEPTH + 4)
    for doc in ({"meta": deep}, {"meta": 1, "kids": [{"meta": deep, "extra": {"a": deep}}]}):
        assert constraint.accepts(json.dumps(doc, separators=(",", ":")))
    assert not constraint.accepts('{"meta":1,"extra":[1]}') and not constraint.accepts('{"kids":[]}')


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_accepting_walks_validate(seed: int) -> None:
    constraint = stdsl.compile(TREE)
    rng = np.random.default_rng(seed)
    validator = jsonschema.Draft202012Validator(TREE)
    for _ in range(10):
        text = random_accepted(constraint.machine, rng).decode("utf-8")
        assert validator.is_valid(json.loads(text)), text
