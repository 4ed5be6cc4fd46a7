"""The outline choice read off the outlined bodies (`outline_size.plain_size_reaches`) against the plain bodies'
count (`outline_pays`, the old path), and a schema with many declared members compiled to the very grammar the old
path built, with its plain bodies never lowered.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.json_schema import recursive
from stdsl.compiler.json_schema.json_tokens import JsonTokens
from stdsl.compiler.json_schema.outline_size import MANY_MEMBERS_FROM, declared_members, outline_pays
from stdsl.compiler.json_schema.pushdown_constraint import compile_free_form, compile_recursive
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.grammar import PushdownGrammar, call_symbol
from stdsl.errors import CompileError
from tests.compiler.accepting_walks import random_accepted
from tests.compiler.json_schema.test_outline_choice import _mutated as mutated

SCALARS = ({"type": "string"}, {"type": "integer"}, {"type": ["string", "null"]}, {"enum": ["a", "b"]},
           {"type": "number", "maximum": 9}, {"type": "string", "maxLength": 3}, {})


@st.composite
def member_schemas(draw: st.DrawFn) -> dict:
    """An object of `count` members, each a row object (directly, or as the items of an array, bounded or not), a
    scalar or a free-form value, the rows possibly shared through `$defs` or nested once; sized from tiny to about
    ten times `OUTLINE_FROM`, so that both choices are drawn."""
    width = draw(st.integers(1, 9))
    row: dict = {"type": "object", "properties": {
        f"k{j}": draw(st.sampled_from(SCALARS)) for j in range(width)},
        "additionalProperties": draw(st.sampled_from([False, True, {"type": "integer"}]))}
    if draw(st.booleans()):
        row["properties"]["inner"] = {"type": "object", "properties": {"z": {"type": "integer"}}}
    shared = draw(st.booleans())
    members: dict[str, Any] = {}
    for i in range(draw(st.integers(1, 40))):
        item = {"$ref": "#/$defs/row"} if shared else row
        shape = draw(st.sampled_from(["row", "array", "bounded", "scalar"]))
        if shape == "array":
            item = {"type": "array", "items": item}
        elif shape == "bounded":
            item = {"type": "array", "items": item, "maxItems": draw(st.integers(1, 4))}
        elif shape == "scalar":
            item = draw(st.sampled_from(SCALARS))
        members[f"p{i}"] = item
    members["free"] = {}
    schema: dict = {"type": "object", "properties": members,
                    "additionalProperties": draw(st.sampled_from([False, True]))}
    if shared:
        schema["$defs"] = {"row": row}
    return schema


def _old_choice(schema: dict) -> bool | None:
    """What the old path decided: `outline_pays` of the plain root and bodies (None: no nonterminal, a DFA)."""
    calls = {target: call_symbol(i) for i, target in enumerate(recursive.recursive_targets(schema))}
    compiler = recursive._CallingCompiler(JsonTokens(None), calls, schema, strict=False)
    main, bodies = recursive.recursive_schema_to_ir(schema, calls, compiler=compiler)
    return outline_pays(main, *bodies.values()) if bodies else None


def _compiled(schema: dict, members_from: int) -> PushdownConstraint | str:
    """`compile_free_form(schema, outline=None)` with `MANY_MEMBERS_FROM` set to `members_from` (0: the outlined
    bodies measured first, whatever the member count; 10**9: the plain bodies first, the old path)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(recursive, "MANY_MEMBERS_FROM", members_from)
        try:
            compiled = compile_free_form(schema, outline=None, strict=False)
        except CompileError as error:
            return f"{type(error).__name__}: {error}"
    return compiled if isinstance(compiled, PushdownConstraint) else "a DFA's IR"


@settings(max_examples=40, deadline=None)
@given(member_schemas(), st.integers(0, 2**32 - 1))
def test_measured_first_or_not_the_outcome_is_the_old_one(schema: dict, seed: int) -> None:
    """The road may differ (the outlined count is an estimate of the plain one: a member written out in several
    equal schemas is one nonterminal, counted once, where the plain lowering counts each), the outcome may not: the
    same refusal, the same grammar where the same road is taken, else the same language (random accepted walks of
    each, and those walks with a byte changed, read by both)."""
    new, old = _compiled(schema, 0), _compiled(schema, 10**9)
    if isinstance(new, str) or isinstance(old, str):
        assert new == old
        return
    if new.grammar.names == old.grammar.names:
        for mine, theirs in zip(_arrays(new.grammar), _arrays(old.grammar)):
            assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)
        return
    rng = np.random.default_rng(seed)
    for machine in (new, old):
        for _ in range(3):
            text = random_accepted(machine.machine, rng, wander=120)
            assert new.accepts(text) and old.accepts(text), text
            for _ in range(4):
                near = mutated(text, rng)
                assert new.accepts(near) == old.accepts(near), near


def _arrays(grammar: PushdownGrammar) -> list[np.ndarray]:
    return [grammar.starts, grammar.owner, grammar.own_classes, grammar.byte_class, grammar.accepting,
            grammar.call_state, grammar.call_callee, grammar.call_return, grammar.bn, grammar.bn_within]


def _wide(members: int) -> dict:
    """An object of `members` arrays of one row object and a free-form member: past `OUTLINE_FROM` once wide."""
    row = {"type": "object", "properties": {f"k{j}": {"type": ["string", "integer"]} for j in range(4)},
           "additionalProperties": False}
    return {"type": "object", "additionalProperties": False,
            "properties": {**{f"p{i}": {"type": "array", "items": row, "maxItems": 3} for i in range(members)},
                           "free": {}}}


@pytest.mark.parametrize("recursive_root", [False, True])
def test_many_members_build_the_old_grammar_without_the_plain_bodies(monkeypatch: pytest.MonkeyPatch,
                                                                      recursive_root: bool) -> None:
    schema = _wide(MANY_MEMBERS_FROM)
    if recursive_root:
        schema["properties"]["self"] = {"$ref": "#"}
    compile_one = compile_recursive if recursive_root else compile_free_form
    assert declared_members(schema) >= MANY_MEMBERS_FROM and _old_choice(schema)
    lowered: list[bool] = []
    real = recursive.recursive_schema_to_ir

    def counted(*args: Any, **options: Any) -> Any:
        lowered.append(options["compiler"].outline)
        return real(*args, **options)

    monkeypatch.setattr(recursive, "recursive_schema_to_ir", counted)
    chosen = compile_one(schema, outline=None)
    assert lowered == [True]
    monkeypatch.setattr(recursive, "MANY_MEMBERS_FROM", 10**9)
    lowered.clear()
    old = compile_one(schema, outline=None)
    assert lowered == [False, True]
    assert isinstance(chosen, PushdownConstraint) and isinstance(old, PushdownConstraint)
    assert chosen.grammar.names == old.grammar.names
    for mine, theirs in zip(_arrays(chosen.grammar), _arrays(old.grammar)):
        assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)


def test_many_small_members_are_lowered_plain_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {"type": "object", "properties": {f"m{i}": {"type": "integer"} for i in range(MANY_MEMBERS_FROM)}
              | {"free": {}, "o": {"type": "object", "properties": {"x": {"type": "string"}}}}}
    assert _old_choice(schema) is False
    lowered: list[bool] = []
    real = recursive.recursive_schema_to_ir

    def counted(*args: Any, **options: Any) -> Any:
        lowered.append(options["compiler"].outline)
        return real(*args, **options)

    monkeypatch.setattr(recursive, "recursive_schema_to_ir", counted)
    compiled = compile_free_form(schema, outline=None)
    assert lowered == [True, False]
    assert isinstance(compiled, PushdownConstraint) and len(compiled.grammar.names) == 2


def test_without_a_free_form_value_the_dfa_compiler_still_gets_the_ir() -> None:
    schema = _wide(MANY_MEMBERS_FROM)
    del schema["properties"]["free"]
    assert not isinstance(compile_free_form(schema, outline=None), PushdownConstraint)


def test_a_refusal_in_the_outlined_lowering_is_the_plain_lowering_s() -> None:
    schema = _wide(MANY_MEMBERS_FROM)
    schema["properties"]["bad"] = {"type": "string", "pattern": "(a"}
    with pytest.raises(CompileError) as outlined_first:
        compile_free_form(schema, outline=None)
    with pytest.raises(CompileError) as plain:
        compile_free_form(schema, outline=False)
    assert type(outlined_first.value) is type(plain.value) and str(outlined_first.value) == str(plain.value)


def test_declared_members_count_the_document_up_to_enough() -> None:
    schema = {"properties": {"a": {}, "b": {"properties": {"c": {}}}},
              "$defs": {"d": {"properties": {"e": {}, "f": {}}}},
              "enum": [{"properties": {"x": {}}}], "default": {"properties": {"y": {}}}}
    assert declared_members(schema) == 5
    assert declared_members(schema, enough=2) == 2
    assert declared_members({"properties": ["not", "a", "dict"]}) == 0
