"""Property-name languages for `patternProperties` and `propertyNames`, as exact key automata.

When a schema constrains names by pattern, undeclared keys are written *plain* (every character
raw, no escapes; names containing `"`, `\\` or control characters are not produced), so that the
decoded name is the spelled bytes and "matches the pattern" and its complement are exact regular
languages.  Undeclared keys fall into classes by the set of patterns they match; each class is a
key automaton (quotes included) paired with the pattern schemas its values must satisfy.
"""

from __future__ import annotations

from functools import cache
from itertools import product as cartesian

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.automata.ops import common_classes, intersect
from stdsl.compiler.json_schema.resolve import MORE_PATTERNS
from stdsl.compiler.json_schema.scalars.strings import QUOTE, pattern_search, restrict_to_plain_text, string_body
from stdsl.compiler.json_schema.schema_merge import patterns_of
from stdsl.errors import EmptyLanguageError, SchemaError

MAX_PATTERNS = 4
PLAIN_NAME = restrict_to_plain_text(ir.star(ir.any_char()))


@cache
def plain_names() -> Automaton:
    """The minimal automaton of `PLAIN_NAME`, built once per process: every object that splits its undeclared keys
    starts from it (0.5-1 ms a build; 7% of the MaskBench files have `patternProperties` or `propertyNames`)."""
    return build_automaton(PLAIN_NAME)


def complement_within(universe: Automaton, excluded: Automaton) -> Automaton:
    """The minimal automaton of L(universe) minus L(excluded): the product with the completed `excluded`, built over
    the classes of bytes that neither automaton tells apart (`common_classes`: a few dozen where bytes would be
    256)."""
    byte_class, column_u, column_e = common_classes(universe, excluded)
    moves_u = universe.class_transitions[:, column_u].tolist()
    moves_e = excluded.class_transitions[:, column_e].tolist()
    dead_e = [-1] * len(column_u)
    index = {(0, 0): 0}
    pairs = [(0, 0)]
    rows = []
    i = 0
    while i < len(pairs):
        pu, pe = pairs[i]
        i += 1
        row = []
        for target_u, target_e in zip(moves_u[pu], moves_e[pe] if pe >= 0 else dead_e):
            if target_u < 0:
                row.append(-1)
                continue
            target = index.get((target_u, target_e))
            if target is None:
                target = index[(target_u, target_e)] = len(pairs)
                pairs.append((target_u, target_e))
            row.append(target)
        rows.append(row)
    accepting = np.array([bool(universe.accepting[u]) and not (e >= 0 and excluded.accepting[e]) for u, e in pairs])
    table, accepting = minimize(np.array(rows, dtype=np.int64), accepting)
    return Automaton.from_classes(table, accepting, byte_class)


_MATCHERS = caches.kind("property name matchers")
"""`pattern_matcher` per pattern: objects, their checks and their `oneOf` proofs ask for the matchers of the same
patternProperties again and again."""


def pattern_matcher(pattern: str, where: str) -> Automaton:
    """Decoded names (UTF-8) in which the ECMA-262 `pattern` matches somewhere, built once per pattern (an invalid
    pattern is refused at each `where` that asks)."""
    return _MATCHERS.get((), lambda: _matcher(pattern, where), (pattern,))


def _matcher(pattern: str, where: str) -> Automaton:
    try:
        return build_automaton(pattern_search(pattern, where, True))
    except EmptyLanguageError:
        return _empty()


def _empty() -> Automaton:
    """The automaton of the empty language."""
    return Automaton(np.full((1, 256), -1, dtype=np.int64), np.zeros(1, dtype=bool))


def name_matches(matcher: Automaton, name: str, where: str = "#/patternProperties") -> bool:
    """Whether a property name is in a matcher's language.

    A name holding a lone surrogate has no UTF-8 bytes for the byte-level matcher to read, so no
    exact answer exists here: it is refused (naming `where`) rather than guessed.
    """
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise SchemaError(f"cannot match the property name {name!r} (it holds a lone surrogate) against a "
                          "pattern exactly", where) from None
    return matcher.accepts(encoded)


def names_automaton(names: list[str]) -> Automaton:
    """The automaton of exactly the given names (the empty language for none)."""
    if not names:
        return _empty()
    return build_automaton(ir.alt(*(ir.literal(n) for n in names)))


_KEY_CLASSES = caches.kind("undeclared key classes")
"""`key_classes` per (patterns, declared names, name language, unmatched class): definitions that share their
patternProperties and names (or an object met at several places) split the keys once."""


def key_classes(patterns: dict, declared: list[str], names_body: ir.Node | None, with_unmatched: bool,
                where: str) -> list[tuple[ir.Node, list[str]]]:
    """The undeclared-key classes: (quoted key IR, the patterns it matches), each class non-empty.

    A key is plain text, not a declared name, in `names_body`'s language when given, and matches
    exactly the listed patterns; the class matching none is included when `with_unmatched`.
    Built once per distinct inputs (a refusal is raised again at each `where`); the list is shared, not to be changed.
    """
    inputs = (tuple(patterns), tuple(declared), names_body, with_unmatched)
    return _KEY_CLASSES.get((), lambda: _key_classes(patterns, declared, names_body, with_unmatched, where), inputs)


def _key_classes(patterns: dict, declared: list[str], names_body: ir.Node | None, with_unmatched: bool,
                 where: str) -> list[tuple[ir.Node, list[str]]]:
    refuse_many_patterns(patterns, where)
    universe = plain_names()
    if names_body is not None:
        try:
            universe = intersect(universe, build_automaton(names_body))
        except EmptyLanguageError:
            return []
    try:
        universe = complement_within(universe, names_automaton(declared))
    except EmptyLanguageError:
        return []
    matchers = {p: pattern_matcher(p, f"{where}/{p}") for p in patterns}
    out = []
    for choice in cartesian((True, False), repeat=len(matchers)):
        if not with_unmatched and not any(choice):
            continue
        language, empty = universe, False
        for matcher, inside in zip(matchers.values(), choice):
            try:
                language = intersect(language, matcher) if inside else complement_within(language, matcher)
            except EmptyLanguageError:
                empty = True
                break
        if not empty:
            key = ir.seq(QUOTE, ir.Embedded(language.transitions, language.accepting), QUOTE)
            out.append((key, [p for p, inside in zip(matchers, choice) if inside]))
    return out


def refuse_many_patterns(patterns: dict, where: str) -> None:
    """Refuse more than `MAX_PATTERNS` patternProperties on one object, naming `where`."""
    if len(patterns) > MAX_PATTERNS:
        raise SchemaError(f"more than {MAX_PATTERNS} patternProperties are not supported "
                          "(the key classes grow as 2^n)", where)


def names_body(schema: dict, where: str) -> ir.Node | None:
    """The decoded-text language of a `propertyNames` schema's string keywords, or None if it has none."""
    keys = {k: v for k, v in schema.items() if k in ("minLength", "maxLength", "pattern", MORE_PATTERNS, "format")}
    return _plain_body(keys, where) if keys else None


def _plain_body(keys: dict, where: str) -> ir.Node:
    """Plain decoded text satisfying the string keywords (each decoded character counts once)."""
    parts = []
    singles = [{"pattern": p} for p in patterns_of(keys)] + ([{"format": keys["format"]}] if "format" in keys else [])
    for single in singles:
        parts.append(string_body(single, where, plain=True))
    low, high = int(keys.get("minLength", 0)), keys.get("maxLength")
    if high is not None and int(high) < low:
        return ir.NOTHING
    if low or high is not None:
        parts.append(ir.repeat(ir.any_char(), low, None if high is None else int(high)))
    try:
        automata = [build_automaton(p) for p in parts]
    except EmptyLanguageError:
        return ir.NOTHING
    result = automata[0]
    for other in automata[1:]:
        result = intersect(result, other)
    return ir.Embedded(result.transitions, result.accepting)
