"""The exact "text not containing any of these literals" expression (Proposition 3 of the paper, D.8).

Let l_1..l_m be literals that start with one opener character `<` and contain no other `<`, and
r_i be l_i without its `<`.  A string contains no l_i iff no segment that follows a `<` (segments
are the maximal `<`-free substrings) starts with some r_i.  In the trie of the r_i such a segment
either ends at a node p that is not a complete r_i, or leaves the trie at p by a character that is
not a child of p, so

    NotContaining(l_1..l_m) = [^<]* ( < ( U_p p [^< c_1..c_j] [^<]*  |  U_p p ) )*

with p over the trie nodes that neither are nor extend a complete r_i, and c_1..c_j the children
of p.  Single characters to exclude everywhere are removed from every class.  Characters are
Unicode code points (UTF-8 encoded by the IR), so the language is exactly the valid UTF-8 texts
without the literals, with no determinization of a `.*l.*` complement.  Literals of that shape
cover every call trigger; any other set (several openers, a repeated opener) is compiled as the
Aho–Corasick automaton of the literals over bytes intersected with valid UTF-8 text, which is
exact too (a UTF-8 literal occurs in a text's bytes iff it occurs in its characters).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.errors import CompileError


def _check_literals(literals: Sequence[str]) -> None:
    for literal in literals:
        if not isinstance(literal, str) or not literal:
            raise CompileError(f"not_containing: literal {literal!r} must be a non-empty string")


def _trie_nodes(tails: Sequence[str], excluded: set[str]) -> dict[str, set[str]]:
    """The trie nodes p (prefixes of the tails) that neither are nor extend a complete tail, with their children."""
    complete = set(tails)
    nodes: dict[str, set[str]] = {}
    for tail in tails:
        for end in range(len(tail)):
            prefix = tail[:end]
            if any(prefix[:k] in complete for k in range(len(prefix) + 1)) or excluded & set(prefix):
                break
            nodes.setdefault(prefix, set()).add(tail[end])
    return nodes


def _without(chars: set[str]) -> ir.Node:
    return ir.codepoints([(ord(c), ord(c)) for c in chars], negate=True)


def _one_opener(literals: Sequence[str], excluded: set[str]) -> ir.Node:
    opener = literals[0][0]
    not_open = _without({opener, *excluded})
    segments: list[ir.Node] = []
    for prefix, children in sorted(_trie_nodes([literal[1:] for literal in literals], excluded).items()):
        leaves = ir.seq(ir.literal(prefix), _without({opener, *children, *excluded}), ir.star(not_open))
        segments.append(ir.alt(leaves, ir.literal(prefix)))
    after_open = ir.star(ir.seq(ir.literal(opener), ir.alt(*segments)))
    return ir.seq(ir.star(not_open), after_open)


def _aho_corasick(literals: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The byte DFA of strings containing none of `literals` (dead on a match), start 0, every live state accepting."""
    goto: list[dict[int, int]] = [{}]
    final = [False]
    for literal in literals:
        node = 0
        for byte in literal:
            if byte not in goto[node]:
                goto.append({})
                final.append(False)
                goto[node][byte] = len(goto) - 1
            node = goto[node][byte]
        final[node] = True
    table = np.full((len(goto), 256), -1, dtype=np.int64)
    fail = [0] * len(goto)
    order = [0]
    for node in order:
        for byte in range(256):
            child = goto[node].get(byte)
            if child is None:
                table[node, byte] = table[fail[node], byte] if node else 0
                continue
            table[node, byte] = child
            fail[child] = int(table[fail[node], byte]) if node else 0
            final[child] = final[child] or final[fail[child]]
            order.append(child)
    dead = np.asarray(final)
    table[np.isin(table, np.flatnonzero(dead))] = -1
    table[dead] = -1
    return table, ~dead


def _general(literals: Sequence[str], excluded: set[str]) -> ir.Node:
    from stdsl.compiler.automata.automaton import Automaton
    from stdsl.compiler.automata.build import build_automaton
    from stdsl.compiler.automata.ops import intersect

    table, accepting = _aho_corasick([literal.encode("utf-8") for literal in literals])
    text = build_automaton(ir.star(_without(excluded)))
    both = intersect(text, Automaton(table, accepting))
    return ir.Embedded(both.transitions, both.accepting)


_TEXTS = caches.kind("texts without literals")
"""The automaton of `not_containing` per literals and excluded characters: every tool, every raw parameter of a
family and every reply uses one of a few such sets."""


def not_containing(literals: Sequence[str], excluded: str = "") -> ir.Node:
    """The IR of all texts that contain none of `literals` and none of the characters of `excluded`: its minimal
    automaton as an `ir.Embedded` leaf, built once per set (the expression below, lowered)."""
    _check_literals(literals)
    return _TEXTS.get((), lambda: _embedded(_expression(literals, excluded)), (tuple(literals), excluded))


def _embedded(node: ir.Node) -> ir.Embedded:
    """`node`'s minimal automaton as a read-only IR leaf."""
    from stdsl.compiler.automata.build import build_automaton

    automaton = build_automaton(node)
    transitions = automaton.transitions
    transitions.setflags(write=False)
    return ir.Embedded(transitions, automaton.accepting)


def _expression(literals: Sequence[str], excluded: str) -> ir.Node:
    """The expression of `not_containing` (the module docstring's, or the Aho–Corasick product)."""
    chars = set(excluded) | {literal for literal in literals if len(literal) == 1}
    longer = sorted({literal for literal in literals if len(literal) > 1 and not chars & set(literal)})
    if not longer:
        return ir.star(_without(chars))
    openers = {literal[0] for literal in longer}
    if len(openers) == 1 and all(literal[0] not in literal[1:] for literal in longer):
        return _one_opener(longer, chars)
    return _general(longer, chars)
