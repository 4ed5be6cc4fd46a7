"""Two or more `pattern`s merged by `allOf`/`$ref` are all asserted: the string languages are intersected.

Oracle: Python `re.search` of every pattern (the patterns use only syntax both flavours read alike), and
`jsonschema` on the same instances; negating a merged pattern set stays refused or exact (never a pattern dropped).
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.flatten import document_context, flatten_schema
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import SchemaError

PATTERNS = ["^[a-z]+$", "^.{2,4}$", "b", "^a", "c$", "^[^x]*$", "[0-9]"]
TEXTS = st.text(alphabet="abcx1", max_size=6)


@pytest.mark.parametrize("chosen", [(0, 1), (2, 3, 4), (1, 5, 6), (5, 6, 3)])
@given(text=TEXTS)
@settings(max_examples=60, deadline=None)
def test_merged_patterns_intersect(chosen: tuple[int, ...], text: str) -> None:
    patterns = [PATTERNS[i] for i in chosen]
    schema = {"type": "string", "allOf": [{"pattern": p} for p in patterns[1:]], "pattern": patterns[0]}
    automaton = build_automaton(schema_to_ir(schema))
    expected = all(re.search(p, text) for p in patterns)
    assert automaton.accepts(json.dumps(text).encode()) is expected, (patterns, text)
    assert jsonschema.Draft202012Validator(schema).is_valid(text) is expected


def test_merging_through_refs_and_anyof_keeps_every_pattern() -> None:
    schema = {"$defs": {"lower": {"pattern": "^[a-z]+$"}, "short": {"pattern": "^.{1,3}$"}},
              "anyOf": [{"$ref": "#/$defs/lower", "allOf": [{"$ref": "#/$defs/short"}]}, {"type": "integer"}],
              "pattern": "a"}
    automaton = build_automaton(schema_to_ir(schema))
    for text, ok in (('"ab"', True), ('"abcd"', False), ('"Ab"', False), ('"bb"', False), ("7", True)):
        assert automaton.accepts(text.encode()) is ok, text
    flat = flatten_schema({"allOf": [{"pattern": "a"}, {"pattern": "b"}, {"pattern": "a"}]}, "#",
                          document_context({}))[0]
    assert isinstance(flat, dict) and flat["pattern"] == "a" and flat["_more_patterns"] == ["b"]


def test_negating_merged_patterns_never_drops_one() -> None:
    schema = {"not": {"allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}, "type": "string"}
    try:
        automaton = build_automaton(schema_to_ir(schema))
    except SchemaError:
        return
    for text in ("ab", "a", "b", "xb", "axb", ""):
        expected = not (re.search("^a", text) and re.search("b$", text))
        assert automaton.accepts(json.dumps(text).encode()) is expected, text
