"""A pushdown whose plain bodies are large is outlined at once (`recursive.outline_pays`), without changing what it
accepts or how a compile ends.

The outlined grammar must accept exactly what the plain grammar accepts (random accepting walks of each, and
those walks with a byte changed, read by both), small bodies stay plain, and an outlined grammar that fails or
meets an L(1) conflict hands over to the plain one; when that passes the state budget too, the outlined grammar's
own outcome stands (its error after two tries, or its conflicts resolved), as before the choice (plain first,
outlined on a budget refusal).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.json_schema import outline_size, recursive
from stdsl.compiler.json_schema.json_tokens import JsonTokens
from stdsl.compiler.json_schema.outline_size import OUTLINE_FROM, outline_pays
from stdsl.compiler.json_schema.pushdown_constraint import compile_free_form, compile_recursive
from stdsl.compiler.json_schema.recursive import _CallingCompiler
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.grammar import GrammarConflictError
from stdsl.errors import SchemaError, StateBudgetError
from tests.compiler.accepting_walks import random_accepted


def _rows(count: int, width: int) -> dict:
    """An object of `count` arrays of one closed object with `width` members, and one free-form member."""
    row = {"type": "object", "properties": {f"k{j}": {"type": ["string", "integer", "null"]} for j in range(width)},
           "additionalProperties": False}
    return {"type": "object", "additionalProperties": False,
            "properties": {**{f"p{i}": {"type": "array", "items": row} for i in range(count)}, "free": {}}}


LARGE = _rows(14, 8)
"""A plain root past `OUTLINE_FROM` (about 33,400 estimated NFA states)."""
SMALL = _rows(2, 3)
RECURSIVE = {"$defs": {"node": {"type": "object", "additionalProperties": False, "properties": {
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
    **{f"v{i}": {"type": "object", "properties": {f"k{j}": {"type": "number"} for j in range(8)},
                 "additionalProperties": False} for i in range(30)}}}},
    "$ref": "#/$defs/node"}
"""A recursive definition whose body is past `OUTLINE_FROM` (the root is only its call)."""


CONFLICTED = {**LARGE, "properties": {**LARGE["properties"], "a": {"anyOf": [
    {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "integer"}}}, "required": ["x"],
     "additionalProperties": False},
    {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
     "additionalProperties": False}]}}}
"""`LARGE` with a member whose two branches call different nonterminals for `x` once outlined (an L(1) conflict)."""


def _root_size_passes(schema: dict) -> bool:
    compiler = _CallingCompiler(JsonTokens(None), {}, schema)
    main, _ = recursive.recursive_schema_to_ir(schema, {}, compiler=compiler)
    return outline_pays(main)


def test_the_choice_follows_the_root_size() -> None:
    assert OUTLINE_FROM == 30_000
    assert _root_size_passes(LARGE) and not _root_size_passes(SMALL)
    large = compile_constraint(LARGE)
    assert isinstance(large, PushdownConstraint) and len(large.grammar.names) > 2
    plain = compile_free_form(LARGE, outline=False)
    assert isinstance(plain, PushdownConstraint) and len(plain.grammar.names) == 2
    assert large.num_states < plain.num_states
    small = compile_constraint(SMALL)
    assert isinstance(small, PushdownConstraint) and len(small.grammar.names) == 2


def test_a_recursive_schema_chooses_too() -> None:
    chosen = compile_recursive(RECURSIVE, outline=None)
    plain = compile_recursive(RECURSIVE, outline=False)
    assert len(chosen.grammar.names) > len(plain.grammar.names)
    rng = np.random.default_rng(7)
    for machine, other in ((chosen, plain), (plain, chosen)):
        for _ in range(20):
            text = random_accepted(machine.machine, rng)
            assert other.accepts(text), text


def _mutated(text: bytes, rng: np.random.Generator) -> bytes:
    """`text` with one byte replaced, inserted or deleted (often still valid JSON-ish, so a close miss)."""
    where = int(rng.integers(0, len(text) + 1))
    byte = bytes([int(rng.choice(list(b'{}[],:"0123456789 aknulltrue')))])
    kind = int(rng.integers(0, 3))
    if kind == 0 and where < len(text):
        return text[:where] + byte + text[where + 1:]
    if kind == 1:
        return text[:where] + byte + text[where:]
    return text[:where] + text[where + 1:]


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_outlined_grammar_accepts_what_the_plain_one_accepts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    chosen = compile_free_form(LARGE, outline=None)
    plain = compile_free_form(LARGE, outline=False)
    assert isinstance(chosen, PushdownConstraint) and isinstance(plain, PushdownConstraint)
    for machine in (chosen, plain):
        for _ in range(4):
            text = random_accepted(machine.machine, rng, wander=200)
            assert chosen.accepts(text) and plain.accepts(text), text
            for _ in range(5):
                near = _mutated(text, rng)
                assert chosen.accepts(near) == plain.accepts(near), near


def _failing_outline(monkeypatch: pytest.MonkeyPatch, outlined: Exception, plain: Exception | None) -> list[int]:
    """Make the outlined grammar (more than one definition) raise `outlined`, and the plain one `plain` if given;
    returns the list of definition counts `compile_pushdown` was called with."""
    calls: list[int] = []
    real = recursive.compile_pushdown

    def compile_pushdown(main, definitions, **options):  # type: ignore[no-untyped-def]
        calls.append(len(definitions))
        if len(definitions) > 1:
            raise outlined
        if plain is not None:
            raise plain
        return real(main, definitions, **options)

    monkeypatch.setattr(recursive, "compile_pushdown", compile_pushdown)
    return calls


def test_an_outlined_grammar_that_fails_hands_over_to_the_plain_one(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _failing_outline(monkeypatch, GrammarConflictError("two calls meet", ()), None)
    compiled = compile_free_form(LARGE, outline=None)
    assert isinstance(compiled, PushdownConstraint) and len(compiled.grammar.names) == 2
    assert calls[0] > 1 and calls[-1] == 1


def test_when_both_fail_on_the_budget_the_outlined_error_is_raised_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _failing_outline(monkeypatch, SchemaError("outlined refused", "#"), StateBudgetError("plain too large"))
    with pytest.raises(SchemaError, match="outlined refused"):
        compile_free_form(LARGE, outline=None)
    assert len(calls) == 2 and calls[0] > 1 and calls[1] == 1


def test_a_conflict_no_member_resolves_is_raised_without_compiling_the_outline_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An outlined grammar whose conflict names no member that could be inlined, beside a plain grammar past the
    budget: the conflict stands, raised from the first try (before, the outline was compiled a second time to meet
    it again)."""
    calls = _failing_outline(monkeypatch, GrammarConflictError("two calls meet", ()), StateBudgetError("too large"))
    with pytest.raises(GrammarConflictError, match="two calls meet"):
        compile_free_form(LARGE, outline=None)
    assert len(calls) == 2 and calls[0] > 1 and calls[1] == 1


def test_a_plain_grammar_past_the_budget_is_outlined_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _plain_refused_at_the_budget(monkeypatch)
    compiled = compile_free_form(SMALL, outline=None)
    assert isinstance(compiled, PushdownConstraint) and len(compiled.grammar.names) > 2
    assert calls[0] == 1 and calls[-1] > 1


def test_an_outlined_grammar_with_a_conflict_leaves_the_choice_to_the_plain_one() -> None:
    assert _root_size_passes(CONFLICTED)
    chosen = compile_free_form(CONFLICTED, outline=None)
    plain = compile_free_form(CONFLICTED, outline=False)
    assert isinstance(chosen, PushdownConstraint) and isinstance(plain, PushdownConstraint)
    assert chosen.grammar.names == plain.grammar.names
    assert len(compile_free_form(CONFLICTED, outline=True).grammar.names) > 2


def test_a_conflicted_outline_is_resolved_when_the_plain_grammar_passes_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The outlined grammar's retries start after the conflict its first try met: that try is not compiled again
    (it was, before: 6, 1, 6, 4 definitions), and the grammar is the one an outlined compile resolves to."""
    calls = _plain_refused_at_the_budget(monkeypatch)
    compiled = compile_free_form(CONFLICTED, outline=None)
    assert isinstance(compiled, PushdownConstraint) and len(compiled.grammar.names) > 2
    assert calls == [calls[0], 1, calls[-1]] and calls[0] > calls[-1] > 1
    outlined = compile_free_form(CONFLICTED, outline=True)
    assert isinstance(outlined, PushdownConstraint) and compiled.grammar.names == outlined.grammar.names


def test_a_conflicted_outline_lowered_at_once_is_resolved_after_its_first_try(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for a schema whose outlined bodies are lowered first (`_outlined_at_once`, here for any member
    count): the conflict of that first try is where the later outlined grammar resumes (6, 1, 4 definitions; it
    was 6, 1, 6, 4), and the grammar is the one an outlined compile resolves to.  (Its plain bodies measured on
    the outlined ones count 23,285, below `OUTLINE_FROM`, which is lowered to take that road.)"""
    monkeypatch.setattr(recursive, "MANY_MEMBERS_FROM", 1)
    monkeypatch.setattr(outline_size, "OUTLINE_FROM", 20_000)
    calls = _plain_refused_at_the_budget(monkeypatch)
    compiled = compile_free_form(CONFLICTED, outline=None)
    assert isinstance(compiled, PushdownConstraint) and len(compiled.grammar.names) > 2
    assert calls == [calls[0], 1, calls[-1]] and calls[0] > calls[-1] > 1
    outlined = compile_free_form(CONFLICTED, outline=True)
    assert isinstance(outlined, PushdownConstraint) and compiled.grammar.names == outlined.grammar.names


def _plain_refused_at_the_budget(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """`compile_pushdown` refusing every plain grammar (one definition) at the state budget; the definitions of each
    call, in order, gather in the list returned."""
    calls: list[int] = []
    real = recursive.compile_pushdown

    def compile_pushdown(main, definitions, **options):  # type: ignore[no-untyped-def]
        calls.append(len(definitions))
        if len(definitions) == 1:
            raise StateBudgetError("plain too large")
        return real(main, definitions, **options)

    monkeypatch.setattr(recursive, "compile_pushdown", compile_pushdown)
    return calls
