"""A DFA's language of text as JSON strings: what `strings.escaped_spelling` does to an IR, done to a compiled DFA.

The quotation mark, the backslash and the control characters are spelled with every JSON escape
of theirs (`string_unit` of that one character: a short escape where JSON has one, `\\u00XX` with
hex digits in either case), every other character raw.  So the decoded content of an accepted
string is exactly a string of the language, and every string `s` of the language is accepted as
`json.dumps(s, ensure_ascii=False)` (and with any escape of those characters).  Ordinary characters
escaped (`\\u0041`, `\\/`, `\\u00e9`) are not read, as for a `pattern` match.  A grammar's language is
a DFA, not an IR tree, so each state that reads one of those characters gets its own copy of the
escape trie, whose last byte leads where the character led.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.json_schema.scalars.string_units import FORBIDDEN_RAW, SHORT_ESCAPES

QUOTE = ord('"')
ESCAPED = tuple(b for lo, hi in FORBIDDEN_RAW for b in range(lo, hi + 1))
"""The characters JSON never writes raw inside a string (all ASCII, so one byte each)."""


def _hex_variants(value: int) -> set[str]:
    return {f"{value:x}", f"{value:X}"}


def escape_spellings(char: int) -> list[bytes]:
    """Every JSON escape of the ASCII character `char` (its short escape, then `\\u00XX` in every digit case)."""
    spellings = [SHORT_ESCAPES[char].encode()] if char in SHORT_ESCAPES else []
    return spellings + sorted(f"\\u00{high}{low}".encode() for high in _hex_variants(char >> 4)
                              for low in _hex_variants(char & 15))


@lru_cache(maxsize=1)
def _escape_trie() -> tuple[tuple[dict[int, int], ...], tuple[dict[int, int], ...], tuple[frozenset[int], ...]]:
    """The escapes of the `ESCAPED` characters as a trie over bytes, node 0 its root (before the backslash):
    `inner[n]` maps a byte to a child node, `last[n]` a byte that ends an escape to the character it spells, and
    `spelled[n]` holds the characters spelled below node n.  No escape is a prefix of another."""
    inner: list[dict[int, int]] = [{}]
    last: list[dict[int, int]] = [{}]
    for char in ESCAPED:
        for spelling in escape_spellings(char):
            node = 0
            for byte in spelling[:-1]:
                if byte not in inner[node]:
                    inner[node][byte] = len(inner)
                    inner.append({})
                    last.append({})
                node = inner[node][byte]
            last[node][spelling[-1]] = char
    spelled: list[frozenset[int]] = [frozenset()] * len(inner)
    for node in reversed(range(len(inner))):
        below = set(last[node].values())
        for child in inner[node].values():
            below |= spelled[child]
        spelled[node] = frozenset(below)
    return tuple(inner), tuple(last), tuple(spelled)


def escaped_content(transitions: np.ndarray, accepting: np.ndarray) -> ir.Embedded:
    """The DFA (`transitions` (n, 256), -1 dead, start 0; `accepting` (n,)) of UTF-8 text as JSON string content,
    without the quotes: its states keep their raw moves but on the `ESCAPED` characters, and each state that
    read one of those gets the escape trie pruned to the ones it reads."""
    table = np.asarray(transitions, dtype=np.int64)
    states = table.shape[0]
    inner, last, spelled = _escape_trie()
    escaped = list(ESCAPED)
    live = table[:, escaped] >= 0
    out = table.copy()
    out[:, escaped] = -1
    added: list[np.ndarray] = []
    for state in np.flatnonzero(live.any(axis=1)).tolist():
        reads = frozenset(char for char, alive in zip(ESCAPED, live[state].tolist()) if alive)
        pending = [(0, state)]
        while pending:
            node, at = pending.pop()
            row = out[at] if at < states else added[at - states]
            for byte, child in inner[node].items():
                if spelled[child] & reads:
                    pending.append((child, states + len(added)))
                    row[byte] = states + len(added)
                    added.append(np.full(256, -1, dtype=np.int64))
            for byte, char in last[node].items():
                if char in reads:
                    row[byte] = table[state, char]
    full = np.vstack([out, *added]) if added else out
    marks = np.concatenate([np.asarray(accepting, dtype=bool), np.zeros(len(added), dtype=bool)])
    return ir.Embedded(full.astype(np.int32), marks)


def json_string_of(transitions: np.ndarray, accepting: np.ndarray) -> ir.Node:
    """A quoted JSON string whose decoded content is a string of the DFA's language (see the module docstring)."""
    quote = ir.literal('"')
    return ir.seq(quote, escaped_content(transitions, accepting), quote)
