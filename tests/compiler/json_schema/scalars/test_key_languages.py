"""Key languages: `complement_within` over joint byte classes is the byte-by-byte product difference, and objects
that share patternProperties split their keys once."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl.caches
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.json_schema.scalars.keys import complement_within
from stdsl.compiler.json_schema.to_ir import schema_to_ir
from stdsl.errors import EmptyLanguageError
from tests.compiler.generated_regexes import quantified_regexes

PIECES = ["a", "b", "ab", "[a-c]", "[^a]", "\\d", "é", "[é-ü]", "x?", "(?:ab|ac)", "[0-9a-f]", "."]
QUANTIFIERS = ["", "*", "+", "?", "{2}", "{0,3}"]

regexes = quantified_regexes(PIECES, QUANTIFIERS, max_leaves=6, groups_quantified=False)


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


PATTERNED = {"patternProperties": {"^x": {"type": "integer"}, "y$": {"type": "string"}},
             "properties": {"n": {"type": "boolean"}}, "additionalProperties": {"type": "null"}}
SHARED_PATTERNS = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/B"}},
                   "required": ["a", "b"], "additionalProperties": False,
                   "$defs": {"A": PATTERNED, "B": {**PATTERNED, "title": "the same keys"}}}
members = st.dictionaries(st.sampled_from(["n", "x", "xy", "y", "ny", "q", ""]),
                          st.one_of(st.integers(-2, 2), st.sampled_from(["s", True, None])), max_size=3)


@settings(max_examples=100, deadline=None)
@given(members, members)
def test_objects_sharing_patterns_split_their_keys_once(first: dict, second: dict) -> None:
    # Two definitions with the same patternProperties and names: one key split and one matcher per pattern;
    # the objects still accept exactly what jsonschema accepts.
    stdsl.caches.clear()
    stats = stdsl.caches.stats
    before = stats()["undeclared key classes"], stats()["property name matchers"]
    automaton = build_automaton(schema_to_ir(SHARED_PATTERNS))
    after = stats()["undeclared key classes"], stats()["property name matchers"]
    assert [a.misses - b.misses for a, b in zip(after, before)] == [1, 2]
    assert after[0].hits > before[0].hits
    first, second = ({**{k: v for k, v in m.items() if k == "n"}, **m} for m in (first, second))  # declared first
    instance = {"a": first, "b": second}
    expected = jsonschema.Draft202012Validator(SHARED_PATTERNS).is_valid(instance)
    assert automaton.accepts(json.dumps(instance, separators=(",", ":")).encode()) == expected, instance
