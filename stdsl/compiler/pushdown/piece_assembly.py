"""An expression that holds a large alternative of pieces, compiled as a small skeleton with the pieces' DFAs put in.

Tool replies, structural tags and grammars with one `%json` per tool all stand a choice of many pieces (a call, a
tag: literal text and a few leaves in a row) in a small expression (free text, separators).  Determinizing the
whole runs a subset construction over every state of every piece, again whenever one piece changes.  Here each
piece is laid out from its parts by concatenation (`piece_from_parts`) and kept by its caller per piece
expression; the skeleton (the expression with `PLACEHOLDER_NODE` where the alternative stands) is compiled small
and kept per skeleton expression (`skeleton_table`); `automata.substitution.placeholders.substitute` puts the
pieces in its placeholder edges (`assemble`).  The result accepts exactly the language of the expression with the
alternative in the placeholder's place; it is trim, not minimized.  An expression that embeds a recursive grammar
(`embedding.holds_grammar`) is not assembled: it lowers whole, to a pushdown.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES, determinize_expression
from stdsl.compiler.automata.minimization.minimize import shrink
from stdsl.compiler.automata.ops import concatenation
from stdsl.compiler.automata.substitution.placeholders import PLACEHOLDER, general_substitute, substitute
from stdsl.compiler.pushdown.embedding import holds_grammar

_SKELETONS = caches.kind("reply skeletons")
"""A skeleton's table over bytes and placeholders, per skeleton expression (a reply's format, choice and content;
a structural tag's free text; a grammar around its alternative of pieces)."""

PLACEHOLDER_NODE = ir.ByteSet(((PLACEHOLDER, PLACEHOLDER),))
"""The skeleton's stand-in for one piece (`substitute` puts the pieces in its edges)."""


def assemble(pieces: Sequence[Automaton], skeleton: ir.Node, max_states: int = DEFAULT_MAX_STATES
             ) -> Automaton | None:
    """The DFA of `skeleton` with each `PLACEHOLDER_NODE` standing for any one of `pieces` (trim DFAs), or None
    where the skeleton embeds a recursive grammar (the caller lowers the whole expression, to a pushdown)."""
    if holds_grammar(skeleton):
        return None
    wide, accepting = skeleton_table(skeleton, max_states)
    return substitute(wide, accepting, [pieces])


def skeleton_table(skeleton: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> tuple[np.ndarray, np.ndarray]:
    """A skeleton's trim table over bytes and the placeholder (read-only, with its accepting mask), kept per
    skeleton expression: an expression with other pieces in the same places reuses it."""

    def compiled() -> tuple[np.ndarray, np.ndarray]:
        dfa = determinize_expression(skeleton, max_states, PLACEHOLDER + 1)
        table, accepting = shrink(dfa.table, dfa.accepting, all_reachable=True)
        wide, final = np.asarray(table, dtype=np.int32)[:, dfa.byte_class], np.asarray(accepting, dtype=bool)
        wide.setflags(write=False)
        final.setflags(write=False)
        return wide, final

    found: tuple[np.ndarray, np.ndarray] = _SKELETONS.get((), compiled, (skeleton, max_states))
    return found


def literals_and_leaves(node: ir.Node) -> list[bytes | Automaton] | None:
    """A piece that is literal text and embedded automata in a row (a head, the arguments' DFA, a tail) as those
    parts, the automata compiled (once per leaf), or None for any other shape."""
    parts: list[bytes | Automaton] = []
    for item in node.items if isinstance(node, ir.Seq) else (node,):
        text = ir.literal_bytes(item)
        if text is not None:
            if parts and isinstance(parts[-1], bytes):
                parts[-1] += text
            else:
                parts.append(text)
        elif isinstance(item, ir.Embedded) and over_bytes(item):
            parts.append(build_automaton(item))
        else:
            return None
    return parts


def over_bytes(leaf: ir.Embedded) -> bool:
    """Whether an embedded automaton reads bytes only (no call symbols of a pushdown's bodies)."""
    return np.shape(leaf.transitions)[1:] == (256,)


def piece_from_parts(parts: Sequence[bytes | Automaton]) -> Automaton:
    """Literal text and trim automata read one after another: laid out by `concatenation` where it can, else a
    chain of the text's bytes with a placeholder edge per automaton, the automata put in by `general_substitute`
    (a subset construction only where a part's end and what follows are both alive: a part that accepts the empty
    text, or reads on past an end, as a JSON value with whitespace after it does)."""
    laid_out = concatenation(parts)
    if laid_out is not None:
        return laid_out
    automata = [part for part in parts if isinstance(part, Automaton)]
    length = sum(len(part) if isinstance(part, bytes) else 1 for part in parts)
    chain = np.full((length + 1, PLACEHOLDER + len(automata)), -1, dtype=np.int32)
    state, piece = 0, 0
    for part in parts:
        columns = list(part) if isinstance(part, bytes) else [PLACEHOLDER + piece]
        piece += not isinstance(part, bytes)
        for column in columns:
            chain[state, column] = state + 1
            state += 1
    accepting = np.zeros(length + 1, dtype=bool)
    accepting[length] = True
    return general_substitute(chain, accepting, [[automaton] for automaton in automata])
