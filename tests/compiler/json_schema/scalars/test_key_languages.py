"""Key languages: `complement_within` over joint byte classes is the byte-by-byte product difference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import compile_regex
from stdsl.compiler.automata.minimize import minimize
from stdsl.compiler.json_schema.scalars.keys import complement_within
from stdsl.errors import EmptyLanguageError

PIECES = ["a", "b", "ab", "[a-c]", "[^a]", "\\d", "é", "[é-ü]", "x?", "(?:ab|ac)", "[0-9a-f]", "."]
QUANTIFIERS = ["", "*", "+", "?", "{2}", "{0,3}"]

regexes = st.recursive(
    st.tuples(st.sampled_from(PIECES), st.sampled_from(QUANTIFIERS)).map(lambda t: f"(?:{t[0]}){t[1]}"),
    lambda inner: st.one_of(st.tuples(inner, inner).map("".join), st.tuples(inner, inner).map("|".join)),
    max_leaves=6)


def byte_product_difference(universe: Automaton, excluded: Automaton) -> tuple[np.ndarray, np.ndarray]:
    """The oracle: the product with the completed `excluded`, one byte at a time, minimized."""
    tu, te = universe.transitions.astype(np.int64), excluded.transitions.astype(np.int64)
    index, pairs, rows = {(0, 0): 0}, [(0, 0)], []
    for pu, pe in pairs:
        row = np.full(256, -1, dtype=np.int64)
        for byte in np.flatnonzero(tu[pu] >= 0).tolist():
            key = (int(tu[pu, byte]), int(te[pe, byte]) if pe >= 0 else -1)
            if key not in index:
                index[key] = len(pairs)
                pairs.append(key)
            row[byte] = index[key]
        rows.append(row)
    accepting = np.array([bool(universe.accepting[u]) and not (e >= 0 and excluded.accepting[e]) for u, e in pairs])
    return minimize(np.vstack(rows), accepting)


@settings(max_examples=80, deadline=None)
@given(regexes, regexes)
def test_complement_within_is_the_byte_product_difference(universe: str, excluded: str) -> None:
    left, right = compile_regex(universe), compile_regex(excluded)
    try:
        expected = byte_product_difference(left, right)
    except EmptyLanguageError:
        try:
            complement_within(left, right)
        except EmptyLanguageError:
            return
        raise AssertionError("the difference is empty, but complement_within built an automaton") from None
    found = complement_within(left, right)
    assert np.array_equal(found.transitions, expected[0]) and np.array_equal(found.accepting, expected[1])
