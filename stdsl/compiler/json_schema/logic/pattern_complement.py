"""The strings in which a pattern matches nowhere, as an anchored pattern (`not: {pattern: P}` exactly).

The decoded strings in which ECMA-262 `P` matches somewhere form a regular language; its
complement within all strings is a minimal byte automaton.  Its UTF-8 byte paths are folded
into edges labelled by code point ranges, and state elimination turns that automaton into a
regular expression matched whole (`^…$`).  When the expression would grow past
`MAX_PATTERN_CHARS` (state elimination can blow up) the negation is refused instead.
"""

from __future__ import annotations

from functools import cache, lru_cache

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.json_schema.logic.complement import char_escape
from stdsl.compiler.json_schema.scalars.keys import complement_within, pattern_matcher
from stdsl.errors import EmptyLanguageError, SchemaError

MAX_PATTERN_CHARS = 20_000
MAX_STATES = 120
NEVER = "[^\\x00-\\U0010ffff]"
LEADS = ((0xC2, 0xDF, 1), (0xE0, 0xEF, 2), (0xF0, 0xF4, 3))
Edges = dict[int, list[tuple[int, int]]]


@cache
def _any_text() -> Automaton:
    """The minimal automaton of every UTF-8 text, built once per process (each negated pattern starts from it)."""
    return build_automaton(ir.star(ir.any_char()))


@lru_cache(maxsize=256)
def pattern_complement(pattern: str, where: str) -> str:
    """An anchored pattern matching exactly the strings in which `pattern` matches nowhere."""
    try:
        outside = complement_within(_any_text(), pattern_matcher(pattern, where))
    except EmptyLanguageError:
        return f"^{NEVER}$"
    if outside.num_states > MAX_STATES:
        raise SchemaError(f"cannot negate 'pattern' exactly (its complement needs {outside.num_states} states)",
                          where)
    expression = _eliminate(outside, where)
    return f"^(?:{expression})$"


def _char_edges(table: np.ndarray, state: int, memo: dict[tuple[int, int], list[tuple[int, int, int]]]) -> Edges:
    """The transitions of one state by whole UTF-8 characters: target state -> code point ranges."""
    out: Edges = {}
    for byte in np.flatnonzero(table[state, :0x80] >= 0):
        out.setdefault(int(table[state, byte]), []).append((int(byte), int(byte)))
    for low, high, tail in LEADS:
        for lead in range(low, high + 1):
            middle = int(table[state, lead])
            if middle < 0:
                continue
            payload = lead & (0x3F >> tail)
            for first, last, target in _continuations(table, middle, tail, memo):
                out.setdefault(target, []).append(((payload << (6 * tail)) + first, (payload << (6 * tail)) + last))
    return {t: list(ir.merged_ranges(ranges)) for t, ranges in out.items()}


def _continuations(table: np.ndarray, state: int, count: int,
                   memo: dict[tuple[int, int], list[tuple[int, int, int]]]) -> list[tuple[int, int, int]]:
    """(first, last, target): the values of `count` continuation bytes (6 bits each) from `state`, by target."""
    found = memo.get((state, count))
    if found is not None:
        return found
    out: list[tuple[int, int, int]] = []
    size = 1 << (6 * (count - 1))
    for byte in range(0x80, 0xC0):
        nxt = int(table[state, byte])
        if nxt < 0:
            continue
        base = (byte - 0x80) * size
        rest = [(0, 0, nxt)] if count == 1 else _continuations(table, nxt, count - 1, memo)
        for first, last, target in rest:
            if out and out[-1][2] == target and out[-1][1] + 1 == base + first:
                out[-1] = (out[-1][0], base + last, target)
            else:
                out.append((base + first, base + last, target))
    memo[(state, count)] = out
    return out


def _class(ranges: list[tuple[int, int]]) -> str:
    """A character class for code point ranges."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return char_escape(chr(ranges[0][0]))
    return "[" + "".join(char_escape(chr(lo)) if lo == hi else f"{char_escape(chr(lo))}-{char_escape(chr(hi))}"
                         for lo, hi in ranges) + "]"


def _alt(a: str | None, b: str | None) -> str | None:
    """The union of two expressions (None: the empty language)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    return f"(?:{a}|{b})"


def _eliminate(automaton: Automaton, where: str) -> str:
    """State elimination over character edges: the expression of the automaton's language."""
    table = automaton.transitions
    count = automaton.num_states
    start, final = count, count + 1
    edges: dict[int, dict[int, str | None]] = {s: {} for s in range(count + 2)}
    memo: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for state in range(count):
        for target, ranges in _char_edges(table, state, memo).items():
            edges[state][target] = _alt(edges[state].get(target), _class(ranges))
        if automaton.accepting[state]:
            edges[state][final] = ""
    edges[start][0] = ""
    remaining = set(range(count))
    while remaining:
        state = min(remaining, key=lambda s: len(edges[s]) * sum(s in edges[p] for p in edges))
        remaining.discard(state)
        loop = edges[state].pop(state, None)
        star = f"(?:{loop})*" if loop else ""
        outgoing = edges.pop(state)
        for source in list(edges):
            into = edges[source].pop(state, None)
            if into is None:
                continue
            for target, label in outgoing.items():
                if label is None:
                    continue
                combined = f"{into}{star}{label}"
                if len(combined) > MAX_PATTERN_CHARS:
                    raise SchemaError("cannot negate 'pattern' exactly (its complement has no short expression)",
                                      where)
                edges[source][target] = _alt(edges[source].get(target), combined)
    result = edges[start].get(final)
    return NEVER if result is None else result
