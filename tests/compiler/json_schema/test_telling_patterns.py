"""`patternProperties` valued by an unconstrained schema beside unconstrained other keys tell no keys apart: the
object is compiled without them (`to_ir.telling_patterns`), accepts exactly what `jsonschema` accepts and what the
same schema accepts with those patterns kept, and builds no key automata for them; invalid patterns still fail."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema import to_ir
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import SchemaError

PATTERNS = ["^a", "b$", "^.{1,3}$", "^x-", "[0-9]", "^$", "^(ab|ba)+$", "é"]
UNCONSTRAINED: list[Any] = [True, {}, {"description": "any"}, {"x-note": 1, "title": "t"}]
CONSTRAINED: list[Any] = [{"type": "integer"}, {"type": "string"}, False]
KEYS = ["a", "ab", "ba", "b", "x-1", "1", "", "é", "abab", "zzzz"]
VALUES: list[Any] = [1, "s", None, True, [], {}, [1, "t"], {"k": 2}]


def kept(schema: Any) -> Any:
    """An equivalent schema that `telling_patterns` does not take for unconstrained (so its pattern is kept)."""
    return {"allOf": [schema]}


@st.composite
def open_objects(draw: st.DrawFn) -> tuple[dict, dict]:
    """An object schema with some patterns valued by unconstrained schemas (and maybe others constrained), and the
    same schema with every pattern kept."""
    patterns = draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3, unique=True))
    valued = {p: draw(st.sampled_from(UNCONSTRAINED + CONSTRAINED if i else UNCONSTRAINED))
              for i, p in enumerate(patterns)}
    schema: dict = {"type": "object", "patternProperties": valued}
    declared = draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    if declared:
        schema["properties"] = {name: draw(st.sampled_from([{}, {"type": "integer"}])) for name in declared}
    extra = draw(st.sampled_from(["absent", *UNCONSTRAINED]))
    if extra != "absent":
        schema["additionalProperties"] = extra
    return schema, {**schema, "patternProperties": {p: kept(s) for p, s in valued.items()}}


@settings(max_examples=60, deadline=None)
@given(open_objects(), st.lists(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3),
                                min_size=1, max_size=6))
def test_an_object_without_its_untelling_patterns_accepts_the_same(schemas: tuple[dict, dict],
                                                                   instances: list[dict]) -> None:
    """Both accept an instance's text alike, in its own member order and in schema order (the order generation
    writes, which a valid instance is accepted in), and accept only valid instances."""
    schema, with_all_kept = schemas
    found, expected = build_automaton(schema_to_ir(schema)), build_automaton(schema_to_ir(with_all_kept))
    for instance in instances:
        valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
        own = json.dumps(instance, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        ordered = dump_in_schema_order(instance, schema).encode("utf-8")
        for text in (own, ordered):
            assert found.accepts(text) == expected.accepts(text), (schema, text)
            assert valid or not found.accepts(text), (schema, text)
        assert found.accepts(ordered) == valid, (schema, instance)


def test_an_unconstrained_pattern_beside_unconstrained_keys_builds_no_key_automata(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """MaskBench o9908 (`^.{1,255}$` valued `{}`, other keys open): an object of any members, 0.37 s of key automata
    before; the same pattern beside `additionalProperties` that differs still splits the keys."""
    asked: list[dict] = []
    classes = to_ir.key_classes

    def counted(patterns: dict, *args: Any) -> Any:
        asked.append(patterns)
        return classes(patterns, *args)

    monkeypatch.setattr(to_ir, "key_classes", counted)
    schema_to_ir({"type": "object", "patternProperties": {"^.{1,255}$": {}}})
    schema_to_ir({"type": "object", "patternProperties": {"^.{1,255}$": {}, "^x-": {"type": "string"}}})
    assert asked == [{"^x-": {"type": "string"}}]
    schema_to_ir({"type": "object", "patternProperties": {"^.{1,255}$": {}}, "additionalProperties": False})
    assert asked[1:] == [{"^.{1,255}$": {}}]


def test_an_invalid_untelling_pattern_is_still_refused() -> None:
    with pytest.raises(SchemaError, match="patternProperties"):
        schema_to_ir({"type": "object", "patternProperties": {"(": {}}})
