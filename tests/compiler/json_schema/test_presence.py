"""`dependentRequired` lowered as one member chain that tracks presence (`presence.dependent_members`) accepts what
`jsonschema` accepts, and is the very language of the union over presence patterns it replaced (issue 36).

The union is still how `_dependent_objects` lowers the keyword beside `minProperties`/`maxProperties`, and
`minProperties: 0` constrains nothing: the same schema with it added is the old lowering, the oracle here.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.json_schema.order import dump_in_schema_order
from stdsl.compiler.json_schema.presence import allowed_patterns, dependent_members
from stdsl.compiler.json_schema.to_ir import MAX_DEPENDENT_PROPERTIES, schema_to_ir
from stdsl.errors import EmptyLanguageError, SchemaError

NAMES = ["a", "b", "c", "d", "e", "u"]
"""Property names; "u" is never declared in `properties` (a dependency may still name it)."""
VALUE_SCHEMAS = st.sampled_from([{"type": "integer"}, {"type": "string"}, {"type": "null"}, {}, False,
                                 {"enum": [1, "x"]}])
VALUES = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["", "x", "yz"]), st.booleans())


@st.composite
def dependent_schemas(draw: st.DrawFn) -> dict:
    """An object schema with `dependentRequired` among a few properties, some required, extras open or not."""
    declared = draw(st.lists(st.sampled_from(NAMES[:-1]), unique=True, max_size=5))
    schema: dict = {"type": "object", "properties": {name: draw(VALUE_SCHEMAS) for name in declared}}
    schema["required"] = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=2))
    schema["dependentRequired"] = draw(st.dictionaries(
        st.sampled_from(NAMES), st.lists(st.sampled_from(NAMES), unique=True, max_size=3), min_size=1, max_size=4))
    extra = draw(st.sampled_from(["absent", False, {"type": "integer"}, True]))
    if extra != "absent":
        schema["additionalProperties"] = extra
    return schema


def _automaton(schema: dict, strict: bool) -> Automaton | None:
    """The schema's automaton, or None where it is refused or empty (both lowerings alike, checked by the caller)."""
    try:
        return build_automaton(schema_to_ir(schema, strict=strict))
    except EmptyLanguageError:
        return None


def _minimal(automaton: Automaton | None) -> tuple[np.ndarray, np.ndarray] | None:
    if automaton is None:
        return None
    return minimize(automaton.transitions, automaton.accepting)


@settings(max_examples=150, deadline=None)
@given(dependent_schemas(), st.booleans())
def test_the_chain_is_the_language_of_the_presence_variants(schema: dict, strict: bool) -> None:
    try:
        chained = _minimal(_automaton(schema, strict))
    except SchemaError as error:
        try:
            _automaton({**schema, "minProperties": 0}, strict)
        except SchemaError as old:
            assert str(old) == str(error)
            return
        raise
    variants = _minimal(_automaton({**schema, "minProperties": 0}, strict))
    assert (chained is None) == (variants is None)
    if chained is not None and variants is not None:
        assert np.array_equal(chained[0], variants[0]) and np.array_equal(chained[1], variants[1])


@settings(max_examples=150, deadline=None)
@given(dependent_schemas(), st.dictionaries(st.sampled_from(NAMES + ["z"]), VALUES, max_size=5),
       st.sampled_from(NAMES + ["z"]), VALUES)
def test_the_chain_accepts_what_jsonschema_accepts(schema: dict, instance: dict, mutated: str, value: object
                                                   ) -> None:
    try:
        automaton = _automaton(schema, strict=False)
    except SchemaError:
        return
    validator = jsonschema.Draft202012Validator(schema)
    for candidate in (instance, {**instance, mutated: value}, {k: v for k, v in instance.items() if k != mutated}):
        valid = validator.is_valid(candidate)
        own = json.dumps(candidate, separators=(",", ":"), ensure_ascii=False)
        accepted = automaton is not None and automaton.accepts(own.encode())
        assert not accepted or valid, f"accepted invalid {own}"
        if valid:
            text = dump_in_schema_order(candidate, schema)
            assert automaton is not None and automaton.accepts(text.encode()), f"rejected valid {text}"


def test_the_chain_grows_with_the_members_not_with_the_patterns() -> None:
    """Six optional members each needing the one before: 7 allowed patterns of 64, and a chain whose distinct
    nodes grow linearly (the union of patterns repeated every member in each)."""
    names = [f"p{i}" for i in range(MAX_DEPENDENT_PROPERTIES)]
    deps = {names[i]: [names[i - 1]] for i in range(1, len(names))}
    allowed = allowed_patterns(names, set(), deps)
    assert len(allowed) == len(names) + 1
    members = [(name, ir.literal(f'"{name}":1'), False) for name in names]
    first, none_allowed = dependent_members(members, set(names), allowed, ir.literal(","))
    assert none_allowed
    automaton = build_automaton(first)
    for count in range(len(names) + 1):
        assert automaton.accepts(",".join(f'"{name}":1' for name in names[:count]).encode()) == (count > 0)
    assert not automaton.accepts(b'"p1":1')
    assert len(list(ir.distinct_nodes(first))) < 12 * len(names)


def test_writing_no_member_needs_the_pattern_of_all_absent() -> None:
    member = [("a", ir.literal('"a":1'), False)]
    assert dependent_members(member, {"a"}, frozenset({(True,)}), ir.literal(","))[1] is False
    assert dependent_members(member, {"a"}, frozenset({(True,), (False,)}), ir.literal(","))[1] is True
