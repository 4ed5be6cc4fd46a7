"""`%json` with `$ref` cycles inside a grammar: the schema's pushdown is embedded in the grammar's, so the strings
accepted are exactly lark's reading of the grammar around the value (Earley, the value standing as one token)
with a value jsonschema validates; a cycle next to the grammar's own recursion is merged with it."""
from __future__ import annotations

import functools
import json

import jsonschema
import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.grammar import Grammar
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.errors import GrammarError

NODE = {"$defs": {"node": {"anyOf": [
    {"type": "integer", "minimum": 0, "maximum": 99},
    {"type": "object", "properties": {"and": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
     "required": ["and"], "additionalProperties": False}]}},
    "$ref": "#/$defs/node"}
OUTER = 'start: ("filter" | "where") " " {value} (";" | "!")'
GRAMMAR = OUTER.format(value="%json " + json.dumps(NODE))
WITH_RULES = 'start: "(" start* ")" | "<" %json ' + json.dumps(NODE) + ' ">"'

values = st.recursive(st.integers(-5, 120), lambda inner: st.fixed_dictionaries({"and": st.lists(inner, max_size=4)}),
                      max_leaves=8)


@functools.cache
def _outer_oracle() -> lark.Lark:
    """The grammar around the value, the value standing as the one token J."""
    return lark.Lark(OUTER.format(value='"J"'), parser="earley")


def _outer_parses(text: str) -> bool:
    try:
        _outer_oracle().parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


@settings(max_examples=80, deadline=None)
@given(value=values, head=st.sampled_from(["filter", "where", "find"]), tail=st.sampled_from([";", "!", "", ";;", "."]),
       spaced=st.booleans())
def test_accepted_strings_are_lark_around_a_value_jsonschema_validates(value: object, head: str, tail: str,
                                                                      spaced: bool) -> None:
    constraint = stdsl.compile(Grammar(GRAMMAR, syntax="lark"))
    assert isinstance(constraint, PushdownConstraint)
    written = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":"))
    expected = _outer_parses(f"{head} J{tail}") and jsonschema.Draft202012Validator(NODE).is_valid(value)
    assert constraint.accepts(f"{head} {written}{tail}") == expected, written


@settings(max_examples=40, deadline=None)
@given(value=values, depth=st.integers(0, 3))
def test_a_cycle_inside_the_grammars_own_recursion(value: object, depth: int) -> None:
    constraint = stdsl.compile(Grammar(WITH_RULES, syntax="lark"))
    written = json.dumps(value, separators=(",", ":"))
    text = "(" * depth + f"<{written}>" + ")" * depth
    valid = jsonschema.Draft202012Validator(NODE).is_valid(value)
    assert constraint.accepts(text) == valid
    assert not constraint.accepts("(" * depth + f"<{written}" + ")" * depth)


def test_a_cycle_whose_values_clash_with_what_follows_is_refused_naming_the_json_block() -> None:
    numbers = {"$defs": {"n": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}},
               "$ref": "#/$defs/n"}
    with pytest.raises(GrammarError) as error:
        stdsl.compile(Grammar('start: "=" %json ' + json.dumps(numbers) + ' "7"', syntax="lark", source="g.lark"))
    assert "the %json schema at g.lark:1:" in str(error.value) and "'7'" in str(error.value)
