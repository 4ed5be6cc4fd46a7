"""`product_bound.reaches_more_than` proves only what is true: whenever it says a product reaches more than a limit,
the reachable pairs (counted one by one) do; and `intersect` under a budget refuses exactly when the search without
the bound would."""

from __future__ import annotations

from collections import deque
from unittest.mock import patch

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stdsl.compiler import ir
from stdsl.compiler.automata import ops
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.automata.product_bound import reaches_more_than
from stdsl.errors import EmptyLanguageError, StateBudgetError

PATTERNS = ["[a-c]*", "(?:a+ )*a*", "(?:[a-z]+ ){0,5}[a-z]+", "(?:ab|c)*d?", "[^ ]*", "(?:a|é)*", "x(?:[0-9]{2})*",
            "(?:[a-z]+[ \\t]+){0,9}[a-z]*"]
BOUNDS = [".{0,12}", "(?:.|\\\\[nt]){1,9}", "[a-z ]{0,20}", "(?:é|[a-c]){0,15}", "a*b*", "[ -~]{2,30}"]


def tables(a: Automaton, b: Automaton) -> tuple[np.ndarray, np.ndarray]:
    """Both class tables over the product's common classes, as `intersect` reads them."""
    _, column_a, column_b = ops.common_classes(a, b)
    return a.class_transitions[:, column_a], b.class_transitions[:, column_b]


def reachable_pairs(left: np.ndarray, right: np.ndarray) -> list[tuple[int, int]]:
    """Every reachable pair with both moves live, breadth-first (the oracle)."""
    pairs, seen, order = [], {(0, 0)}, deque([(0, 0)])
    while order:
        pair = order.popleft()
        pairs.append(pair)
        for column in range(left.shape[1]):
            target = (int(left[pair[0], column]), int(right[pair[1], column]))
            if target[0] >= 0 and target[1] >= 0 and target not in seen:
                seen.add(target)
                order.append(target)
    return pairs


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(PATTERNS), st.sampled_from(BOUNDS), st.floats(0.02, 1.0), st.integers(-40, 40),
       st.booleans())
@example("(?:[a-z]+[ \\t]+){0,9}[a-z]*", "[ -~]{2,30}", 0.05, -40, False)
def test_a_proof_is_true(pattern: str, bound: str, met_share: float, slack: int, swap: bool) -> None:
    a, b = compile_regex(pattern), compile_regex(bound)
    if swap:
        a, b = b, a
    left, right = tables(a, b)
    pairs = reachable_pairs(left, right)
    met = pairs[:max(1, int(len(pairs) * met_share))]
    width = max(b.num_states, 1)
    keys = np.array([mine * width + theirs for mine, theirs in met], dtype=np.int64)
    limit = max(len(pairs) + slack, 0)
    if reaches_more_than(left, right, width, keys, limit):
        assert len(pairs) > limit


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(PATTERNS), st.sampled_from(BOUNDS), st.integers(1, 400))
def test_intersect_refuses_as_the_plain_search(pattern: str, bound: str, budget: int) -> None:
    a, b = compile_regex(pattern), compile_regex(bound)

    def outcome() -> object:
        try:
            product = ops.intersect(a, b, budget)
        except (StateBudgetError, EmptyLanguageError) as error:
            return type(error).__name__, str(error)
        return product.transitions.tobytes(), product.accepting.tobytes()

    with_bound = outcome()
    with patch.object(ops, "reaches_more_than", lambda *args: False):
        assert outcome() == with_bound


def test_a_long_length_bound_is_refused_early() -> None:
    """A word pattern beside a long length bound: the bound proves the refusal from the first pairs met."""
    words = compile_regex("(?:[a-z]+ ){0,40}[a-z]+")
    lengths = build_automaton(ir.repeat(ir.byte_set([(0x20, 0x7E)]), 1, 3000))
    left, right = tables(words, lengths)
    width = lengths.num_states
    met = reachable_pairs(left, right)[:2000]
    keys = np.array([mine * width + theirs for mine, theirs in met], dtype=np.int64)
    assert reaches_more_than(left, right, width, keys, 60_000)
