"""`multipleOf` automata: exact against decimal arithmetic, and built once per range and modulus however often a
number schema is lowered (`multiple._PRODUCTS`), each lowering still a node of its own; a range is built once per
bounds (`number_schema._RANGES`)."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl.caches
from stdsl.compiler import ir
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.scalars import multiple, number_schema
from stdsl.compiler.json_schema.scalars.number_schema import number_node
from stdsl.compiler.json_schema.to_ir import schema_to_ir

MULTIPLES = st.sampled_from([Decimal("0.01"), Decimal("0.5"), Decimal("1"), Decimal("3"), Decimal("2.5"),
                             Decimal("0.25"), Decimal("7")])
CANDIDATES = [Decimal(x) for x in ("0", "1", "2", "3", "5", "7", "10", "14", "-3", "-7", "0.5", "0.25", "0.01",
                                   "2.5", "7.5", "99.99", "100", "-0.75", "12.34", "21", "1000.5", "0.010")]


@settings(max_examples=40, deadline=None)
@given(MULTIPLES, st.integers(-50, 50), st.integers(0, 2000), st.booleans())
def test_the_kept_product_is_exact_and_a_node_of_its_own(step: Decimal, lo: int, span: int, integer: bool) -> None:
    flat = {"multipleOf": float(step), "minimum": lo, "maximum": lo + span}
    kind = "integer" if integer else "number"
    first, second = number_node(kind, flat, "#"), number_node(kind, flat, "#")
    stdsl.caches.clear()
    fresh = number_node(kind, flat, "#")
    if first == ir.NOTHING:
        assert second == ir.NOTHING and fresh == ir.NOTHING
        return
    assert isinstance(first, ir.Embedded) and isinstance(second, ir.Embedded) and first is not second
    for node in (second, fresh):
        assert isinstance(node, ir.Embedded)
        assert np.array_equal(node.transitions, first.transitions)
        assert np.array_equal(node.accepting, first.accepting)
    automaton = build_automaton(first)
    for value in CANDIDATES:
        text = str(value)
        wanted = lo <= value <= lo + span and value % step == 0 and (not integer or value == value.to_integral())
        if integer and "." in text:
            wanted = False
        assert automaton.accepts(text.encode()) == wanted, (text, flat, kind)


def test_a_number_schema_merged_into_many_places_is_intersected_once() -> None:
    price = {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 99.99}
    schema = {"type": "object", "properties": {f"p{i}": {"allOf": [price, {"description": f"#{i}"}]}
                                               for i in range(12)}}
    stdsl.caches.clear()
    before = multiple._PRODUCTS.stats()
    schema_to_ir(schema)
    after = multiple._PRODUCTS.stats()
    assert after.misses - before.misses == 1 and after.hits - before.hits == 11


def test_a_range_under_a_multiple_is_built_once_and_found_by_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """The range under a `multipleOf` is one node per bounds (`number_schema._RANGES`), so the kept product's key is
    found without comparing two equal trees; bounds written with other digits are another range of the same language;
    a range without a multiple is a node of its own each time (the IR's shape, which the outline's size estimate
    counts, is as before); `stdsl.caches.clear()` empties them."""
    built: list[tuple] = []
    decimal_in_range = number_schema.decimal_in_range

    def counted(*bounds: object) -> ir.Node:
        built.append(bounds)
        return decimal_in_range(*bounds)  # type: ignore[arg-type]

    monkeypatch.setattr(number_schema, "decimal_in_range", counted)
    stdsl.caches.clear()
    flat = {"multipleOf": 0.01, "minimum": -100000000.0, "maximum": 100000000.0}
    nodes = [number_node("number", flat, f"#/{i}") for i in range(5)]
    assert len(built) == 1
    assert all(isinstance(node, ir.Embedded) for node in nodes) and len({id(node) for node in nodes}) == 5
    cents = {"multipleOf": 0.01, "minimum": 0, "maximum": 99.99}
    first = number_node("number", cents, "#")
    other_digits = number_node("number", {**cents, "minimum": 0.0}, "#")
    assert len(built) == 3
    assert np.array_equal(build_automaton(other_digits).transitions, build_automaton(first).transitions)
    plain = [number_node("number", {"minimum": 0, "maximum": 99.99}, "#") for _ in range(2)]
    assert len(built) == 5 and plain[0] is not plain[1] and plain[0] == plain[1]
    stdsl.caches.clear()
    number_node("number", cents, "#")
    assert len(built) == 6
