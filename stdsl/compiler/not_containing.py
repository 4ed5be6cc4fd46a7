"""The exact "text not containing any of these tags" expression of Proposition 3 (the paper, D.8).

Let l_1..l_m be literals that start with `<` and contain no other `<`, and r_i be l_i without
its `<`.  A string contains no l_i iff no segment that follows a `<` (segments are the maximal
`<`-free substrings) starts with some r_i.  In the trie of the r_i such a segment either ends at
a node p that is not a complete r_i, or leaves the trie at p by a character that is not a child
of p, so

    NotContaining(l_1..l_m) = [^<]* ( < ( U_p p [^< c_1..c_j] [^<]*  |  U_p p ) )*

with p over the trie nodes that neither are nor extend a complete r_i, and c_1..c_j the children
of p.  Characters are Unicode code points (UTF-8 encoded by the IR), so the language is exactly
the valid UTF-8 texts without the literals, with no determinization of a `.*l.*` complement.
"""

from __future__ import annotations

from collections.abc import Sequence

from stdsl.compiler import ir
from stdsl.errors import CompileError

OPEN = "<"


def _check_literals(literals: Sequence[str]) -> None:
    if not literals:
        raise CompileError("not_containing needs at least one literal")
    for literal in literals:
        if not isinstance(literal, str) or not literal.startswith(OPEN) or OPEN in literal[1:]:
            raise CompileError(f"not_containing: literal {literal!r} must start with '<' and contain no other '<'")


def _trie_nodes(tails: Sequence[str]) -> dict[str, set[str]]:
    """The trie nodes p (prefixes of the tails) that neither are nor extend a complete tail, with their children."""
    complete = set(tails)
    nodes: dict[str, set[str]] = {}
    for tail in tails:
        for end in range(len(tail)):
            prefix = tail[:end]
            if any(prefix[:k] in complete for k in range(len(prefix) + 1)):
                break
            nodes.setdefault(prefix, set()).add(tail[end])
    return nodes


def not_containing(literals: Sequence[str]) -> ir.Node:
    """The IR of all texts that contain none of `literals` (each starts with `<` and has no other `<`)."""
    _check_literals(literals)
    not_open = ir.codepoints([(ord(OPEN), ord(OPEN))], negate=True)
    segments: list[ir.Node] = []
    for prefix, children in sorted(_trie_nodes([literal[1:] for literal in literals]).items()):
        excluded = [(ord(c), ord(c)) for c in {OPEN, *children}]
        leaves = ir.seq(ir.literal(prefix), ir.codepoints(excluded, negate=True), ir.star(not_open))
        segments.append(ir.alt(leaves, ir.literal(prefix)))
    after_open = ir.star(ir.seq(ir.literal(OPEN), ir.alt(*segments)))
    return ir.seq(ir.star(not_open), after_open)
