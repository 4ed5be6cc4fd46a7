"""A DFA whose placeholder edges stand for an alternative of other DFAs, built without determinizing their union.

A reply beside tools is a small skeleton (free text, section markers, separators) whose every "one call here"
edge stands for the alternative of the tools' call DFAs.  Determinizing that whole expression runs a subset
construction over every state of every tool, twice where the skeleton uses the calls twice.  `substitute`
runs the subset construction only where it can branch: a subset of one state without an ε-move (a state inside
one call) is that state itself, laid out in bulk with numpy, so Python only visits the subsets where several
calls, or a call and the skeleton, are still alive (the common head and the trie of tool names) and the ends of
calls.  The result accepts exactly the language of the substituted expression; it is trim, not minimized.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.substitution.blocks import PLACEHOLDER, NotBlockShaped, block_substitute
from stdsl.compiler.automata.substitution.subsets import substituted_classes

__all__ = ["PLACEHOLDER", "substitute", "general_substitute"]


def substitute(skeleton: np.ndarray, accepting: np.ndarray, pieces: Sequence[Sequence[Automaton]]) -> Automaton:
    """The DFA of `skeleton` (a trim (states, 256 + columns) table, start 0, -1 dead) with each edge on the
    placeholder symbol `PLACEHOLDER + j` from s to t replaced by any one text of `pieces[j]` (trim automata) read
    from s, ending in t.  Pieces shaped like tool calls (a forced head, no move out of an accepting state) are laid
    out as blocks behind their heads' trie (`blocks`); others go through `general_substitute`."""
    table, accepting = np.asarray(skeleton), np.asarray(accepting, dtype=bool)
    try:
        return block_substitute(table, accepting, pieces)
    except NotBlockShaped:
        return general_substitute(table, accepting, pieces)


def general_substitute(skeleton: np.ndarray, accepting: np.ndarray, pieces: Sequence[Sequence[Automaton]]
                       ) -> Automaton:
    """`substitute` for any trim pieces: the subset construction wherever several pieces or the skeleton are alive,
    the other states laid out in bulk."""
    return Automaton.from_classes(*substituted_classes(skeleton, accepting, pieces, PLACEHOLDER))
