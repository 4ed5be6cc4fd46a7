"""The free-form value's nonterminal DFA built ahead (shipped, or built once per process) is, table for table, the
one `pushdown.grammar` builds from the body when it is met (issue 36, item 3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.json_schema import any_value, recursive
from stdsl.compiler.json_schema.json_tokens import JsonTokens, Whitespace
from stdsl.compiler.json_schema.recursive import ANY_VALUE, _CallingCompiler, free_form_grammar
from stdsl.compiler.pushdown import grammar as grammar_module
from stdsl.compiler.pushdown.grammar import CALL_BASE, PushdownGrammar, call_symbol

WHITESPACES = [None, Whitespace(), Whitespace(max_run=1, chars=" "), Whitespace(max_run=0)]


@pytest.fixture
def fresh_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing built or read yet in this process, and no body DFA kept."""
    monkeypatch.setattr(any_value, "_BUILT", {})
    monkeypatch.setattr(any_value, "_PLACED", {})
    caches.clear()


def _placed_dfa(whitespace: Whitespace | None, call_index: int, alphabet: int) -> tuple[np.ndarray, np.ndarray]:
    """The canonical DFA over `alphabet` symbols as a full table, its call symbol 0 moved to definition
    `call_index`'s: the table `any_value_classes` stands for."""
    table, byte_class, accepting = any_value.canonical_dfa(whitespace)
    placed = np.full((len(table), alphabet), -1, dtype=np.int32)
    placed[:, :CALL_BASE] = table[:, byte_class]
    placed[:, CALL_BASE + call_index] = table[:, -1]
    return placed, accepting


def _lazy(whitespace: Whitespace | None, index: int, alphabet: int) -> tuple[np.ndarray, np.ndarray]:
    """The body DFA `compile_pushdown` builds when the free-form nonterminal is definition `index`."""
    calls = {f"#/$defs/d{i}": call_symbol(i) for i in range(index)}
    compiler = _CallingCompiler(JsonTokens(whitespace), calls, {})
    body = compiler.any_value_body()
    assert compiler.calls[ANY_VALUE] == call_symbol(index)
    caches.clear()
    table, symbol_class, accepting = grammar_module._body_dfa(body, 100_000, alphabet)
    return table[:, symbol_class], accepting


@pytest.mark.parametrize("whitespace", WHITESPACES)
@pytest.mark.parametrize("index,extra", [(0, 0), (0, 3), (2, 0), (5, 7)])
def test_the_placed_dfa_is_the_one_built_from_the_body(fresh_builds: None, whitespace: Whitespace | None,
                                                       index: int, extra: int) -> None:
    alphabet = CALL_BASE + index + 1 + extra
    table, accepting = _placed_dfa(whitespace, index, alphabet)
    expected_table, expected_accepting = _lazy(whitespace, index, alphabet)
    assert table.dtype == expected_table.dtype and np.array_equal(table, expected_table)
    assert np.array_equal(accepting, expected_accepting)


@pytest.mark.parametrize("whitespace", WHITESPACES)
@pytest.mark.parametrize("index,extra", [(0, 0), (0, 3), (2, 0), (5, 7)])
def test_the_placed_classes_are_those_of_the_placed_dfa(fresh_builds: None, whitespace: Whitespace | None,
                                                        index: int, extra: int) -> None:
    """Placed from the canonical classes, they are what `over_classes` makes of the placed table, array for
    array and dtype for dtype."""
    alphabet = CALL_BASE + index + 1 + extra
    placed = any_value.any_value_classes(whitespace, index, alphabet)
    expected = grammar_module.over_classes(*_placed_dfa(whitespace, index, alphabet))
    for found, wanted in zip(placed, expected, strict=True):
        assert found.dtype == wanted.dtype and np.array_equal(found, wanted)


@pytest.mark.parametrize("whitespace", any_value.SHIPPED_WHITESPACE)
def test_the_shipped_tables_are_current(fresh_builds: None, whitespace: Whitespace | None) -> None:
    """A stale file would only be ignored (its structure text no longer matches), but then every process pays the
    build again: rewrite it with `python -m stdsl.compiler.json_schema.any_value`."""
    body = any_value.canonical_body(whitespace)
    structure = ir.structure_text(body)
    assert structure is not None
    shipped = any_value.shipped_dfa(whitespace, structure)
    assert shipped is not None, "run python -m stdsl.compiler.json_schema.any_value"
    for read, built in zip(shipped, any_value._build(body)):
        assert read.dtype == built.dtype and np.array_equal(read, built)


def test_a_missing_or_stale_file_is_built_instead(fresh_builds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(any_value, "SHIPPED", any_value.SHIPPED.with_name("absent"))
    table, accepting = _placed_dfa(None, 1, CALL_BASE + 2)
    expected_table, expected_accepting = _lazy(None, 1, CALL_BASE + 2)
    assert np.array_equal(table, expected_table) and np.array_equal(accepting, expected_accepting)


def test_a_table_built_from_another_body_is_not_read(fresh_builds: None) -> None:
    """The compact table's file is there, but the body asked about is `Whitespace()`'s: its structure differs."""
    other = ir.structure_text(any_value.canonical_body(Whitespace()))
    assert other is not None
    assert any_value.shipped_dfa(None, other) is None
    assert any_value.shipped_dfa(Whitespace(max_run=1, chars=" "), other) is None


def test_the_structure_text_follows_the_structure_not_the_objects() -> None:
    text = ir.structure_text
    assert text(any_value.canonical_body(None)) == text(any_value.canonical_body(None))
    assert text(any_value.canonical_body(None)) != text(any_value.canonical_body(Whitespace()))
    assert text(ir.seq(ir.literal("ab"), ir.literal("c"))) == text(ir.literal("abc"))
    assert text(ir.alt(ir.literal("a"), ir.literal("b"))) != text(ir.literal("ab"))
    assert text(ir.repeat(ir.literal("a"), 1, 2)) != text(ir.repeat(ir.literal("a"), 1, 3))
    shared = ir.literal("a")
    assert text(ir.seq(shared, shared)) == text(ir.seq(ir.literal("a"), ir.literal("a")))


FREE_FORM_SCHEMAS = st.one_of(
    st.just({}), st.just({"type": "array"}),
    st.dictionaries(st.sampled_from(["a", "b", "c"]),
                    st.sampled_from([{"type": "integer"}, {}, {"type": "object"}, {"items": {}},
                                     {"type": "object", "properties": {"x": {"type": "string"}}}]),
                    max_size=3).map(lambda props: {"type": "object", "properties": props,
                                                   "additionalProperties": len(props) != 2}))


@settings(max_examples=25, deadline=None)
@given(FREE_FORM_SCHEMAS, st.sampled_from(WHITESPACES))
def test_a_grammar_with_the_dfa_built_ahead_equals_one_built_from_its_bodies(schema: dict,
                                                                            whitespace: Whitespace | None) -> None:
    ahead = free_form_grammar(schema, whitespace=whitespace)
    original = recursive._any_value_dfa
    recursive._any_value_dfa = lambda *args: None  # type: ignore[assignment,return-value]
    try:
        caches.clear()
        lazy = free_form_grammar(schema, whitespace=whitespace)
    finally:
        recursive._any_value_dfa = original
    assert isinstance(ahead, PushdownGrammar) == isinstance(lazy, PushdownGrammar)
    if isinstance(ahead, PushdownGrammar):
        assert isinstance(lazy, PushdownGrammar) and ahead.names == lazy.names
        for name in ("starts", "owner", "byte_table", "accepting", "call_state", "call_callee", "call_return"):
            assert np.array_equal(getattr(ahead, name), getattr(lazy, name)), name
