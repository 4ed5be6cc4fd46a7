"""`product_operands` against `build_automaton`: intersecting the laid-out (unminimized) counted chains gives the very
tables intersecting the minimal operands gives, and refuses exactly where that refuses."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, product_operands
from stdsl.compiler.automata.ops import intersect
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import EmptyLanguageError, StateBudgetError
from tests.compiler.automata.counted_regexes import counted_regexes

BODIES = ["a", "ab|a", "[a-c]d?x", "é|ab", "xy|x|zz", "\\w\\w", "a*b", "(?:ba)*c", "(?:ab)+c|d", "[^a]"]
"""Bodies of counted chains: prefix-free ones (a JSON character's kind) and ones whose start is entered again ("a*b":
its laid-out chain is not minimal)."""


def _product(automata: list[Automaton], max_states: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | str:
    """The intersection of `automata` as (class table, accepting, byte classes), or how it was refused."""
    try:
        product = automata[0]
        for other in automata[1:]:
            product = intersect(product, other, max_states)
    except (StateBudgetError, EmptyLanguageError) as error:
        return type(error).__name__
    return (np.asarray(product.class_transitions), np.asarray(product.accepting), np.asarray(product.byte_class))


def _same(got: tuple[np.ndarray, ...] | str, expected: tuple[np.ndarray, ...] | str) -> bool:
    if isinstance(got, str) or isinstance(expected, str):
        return got == expected
    return all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, expected))


@settings(max_examples=150, deadline=None)
@given(body=st.sampled_from(BODIES), low=st.integers(0, 6), high=st.integers(8, 24),
       patterns=st.lists(counted_regexes(depth=2, most_low=3, most_span=4), min_size=1, max_size=2),
       chain_first=st.booleans(), max_states=st.sampled_from([4, 40, 400, 200_000]))
@example(body="a*b", low=2, high=9, patterns=["[ab]*"], chain_first=True, max_states=200_000)
def test_a_product_of_laid_out_chains_is_the_product_of_minimal_operands(
        body: str, low: int, high: int, patterns: list[str], chain_first: bool, max_states: int) -> None:
    chain = ir.repeat(parse_regex(body), low, high)
    parts = [parse_regex(pattern) for pattern in patterns]
    parts = [chain, *parts] if chain_first else [*parts, chain]
    try:
        minimal = [build_automaton(part, max_states) for part in parts]
    except StateBudgetError:
        return
    expected = _product(minimal, max_states)
    assert _same(_product(product_operands(parts, max_states), max_states), expected)


def test_a_chain_that_is_not_minimal_is_intersected_as_laid_out() -> None:
    """`a*b` repeated lays out equivalent states apart; the product is minimized to the same table."""
    chain = ir.repeat(parse_regex("a*b"), 2, 9)
    parts = [parse_regex("[ab]*"), chain]
    operands = product_operands(parts, 200_000)
    assert operands[1].num_states > build_automaton(chain).num_states
    assert _same(_product(operands, 200_000), _product([build_automaton(part) for part in parts], 200_000))


def test_past_the_budget_every_operand_is_minimal() -> None:
    chain = ir.repeat(parse_regex("a*b"), 2, 9)
    parts = [parse_regex("[ab]*"), chain]
    minimal_states = [build_automaton(part).num_states for part in parts]
    operands = product_operands(parts, minimal_states[0] * minimal_states[1])
    assert [operand.num_states for operand in operands] == minimal_states
