"""The start state's row of a reply laid out as a front and blocks (`Automaton.blocks`), kept per front and
vocabulary: a list with one tool changed keeps its front (the skeleton and the calls' heads), and the start's row
(the first mask: a walk over the whole vocabulary) reads only the front unless a token runs on into a call's block.

The front is cut out as an automaton of its own, every move into a block going to one escape state that reads any
byte and accepts (so a walk into it is never dead).  The front's states are the reply's first states, numbered
alike, so the start's row over the cut equals the reply's wherever no token reaches the escape; it is kept and used
only then, and the reply's own walk is taken otherwise.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from stdsl import caches
from stdsl.compiler.automata.automaton import Automaton

FRONT_START_ROWS = caches.kind("front start rows")
"""The start's row over a front cut (None where a token reaches the escape), per vocabulary and cut digest."""


def front_cut(automaton: Any) -> tuple[Automaton, bytes] | None:
    """The reply's front with its moves into blocks sent to an escape state (the cut's last), and a digest of the
    cut's canonical rows; None where the automaton is not laid out as a front and blocks."""
    blocks = getattr(automaton, "blocks", ())
    if not blocks:
        return None
    size = blocks[0].start
    sole = np.asarray(automaton.sole_target[:size], dtype=np.int32)
    rows = np.full((size + 1, automaton.num_classes), -1, dtype=np.int32)
    branching = np.flatnonzero(sole < -1)
    rows[branching] = automaton.branch_rows[-2 - sole[branching]]
    single = np.flatnonzero(sole >= 0)
    rows[single, automaton.sole_class[single]] = sole[single]
    rows[rows >= size] = size
    rows[size] = size
    cut = Automaton.from_classes(rows, np.append(automaton.accepting[:size], True), automaton.byte_class)
    digest = hashlib.blake2b(np.asarray(cut.branch_rows.shape, dtype=np.int64).tobytes(), digest_size=16)
    for array in (cut.byte_class, cut.sole_class, cut.sole_target, cut.branch_rows, cut.accepting):
        digest.update(array.tobytes())
    return cut, digest.digest()
