"""An outlined lowering keys each nonterminal by its schema's JSON text, written once per schema object
(`recursive._CallingCompiler._key`): every key is `json.dumps` of its schema, however often its object or a copy
of it is met, and every nonterminal's name is its own (names met again are numbered)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.json_schema.json_tokens import JsonTokens
from stdsl.compiler.json_schema.recursive import ANY_VALUE, _CallingCompiler, recursive_schema_to_ir
from stdsl.compiler.pushdown.grammar import GrammarConflictError

_MEMBERS: list[Any] = [
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
    {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}},
    {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "boolean"}}}},
    {"type": "string", "maxLength": 3},
    {"anyOf": [{"type": "object"}, {"type": "null"}]},
]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["x", "y", "z"]), st.integers(0, len(_MEMBERS) - 1),
                          st.booleans()), min_size=1, max_size=6))
def test_each_nonterminal_is_keyed_by_its_schema_text(picks: list[tuple[str, int, bool]]) -> None:
    properties = {}
    for i, (name, member, copied) in enumerate(picks):
        schema = _MEMBERS[member]
        properties[f"{name}{i}"] = json.loads(json.dumps(schema)) if copied else schema
    root = {"type": "object", "properties": {"outer": {"type": "object", "properties": properties}, **properties}}
    compiler = _CallingCompiler(JsonTokens(None), {}, root, outline=True)
    recursive_schema_to_ir(root, {}, compiler=compiler)
    outlined = {key: schema for key, (schema, _) in compiler.extra.items() if key != ANY_VALUE}
    assert all(key == json.dumps(schema) for key, schema in outlined.items())
    assert compiler.outlined == set(outlined)
    assert len(set(compiler.names.values())) == len(compiler.names)


def test_a_combination_that_calls_a_recursive_target_is_named_by_its_schema_path() -> None:
    """A combination mentioning a recursive target becomes a nonterminal named where it stands in the schema (the
    path a user can find), not its JSON text cut short; its refusal names that path."""
    combination = {"anyOf": [{"$ref": "#/definitions/node"}, {"type": "object"}]}
    root = {"definitions": {"node": {"type": "object", "properties": {"kid": combination},
                                     "additionalProperties": False}},
            "$ref": "#/definitions/node"}
    with pytest.raises(GrammarConflictError) as refused:
        stdsl.compile(root, strict=False)
    assert "'#/definitions/node/properties/kid'" in str(refused.value)
    assert '"anyOf"' not in str(refused.value)
    assert list(refused.value.nonterminals) == ["#/definitions/node/properties/kid"]
