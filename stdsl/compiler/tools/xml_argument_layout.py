"""A tag whose content is an XML argument style's object (`formats/xml_arguments`: XGrammar's Qwen3-Coder tag has
one per tool) laid out as a DFA from per-parameter pieces, with no subset construction over the whole tag.

After the tag's begin the language is `WS (PARAM WS)?... END`.  Before each parameter (and before the end) is a
junction: a state that loops on whitespace and begins, through a trie, the tag of any parameter that may come next
(the next ones up to the first required) or, where every parameter after it is optional, one of the tag's ends.
An end may begin with whitespace (`\\n</function>`): a junction is the subset construction of its whitespace loop
and its trie, a handful of states.  Each parameter's value and closing tag are one piece (start 0, its last state
accepting with no move out, `call_layout.parameter_piece`), whose last state is the next junction; a value written
`WS json WS` is laid out around the JSON value's DFA.  The result is trim, not minimized; None where a trie or a
junction is not deterministic (a head the prefix of another, a head ending where another string goes on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.ops import joint_classes
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.tools.call_layout import ParameterPiece, parameter_piece, trie_insert


@dataclass(frozen=True)
class XmlParameter:
    """One parameter: its opening text, its value with what comes before it after the head, the value without the
    whitespace around it where the value is `WS core WS` (None otherwise), its closing tag, whether required."""

    head: bytes
    value: ir.Node
    core: ir.Node | None
    closing: bytes
    required: bool


def spaced_piece(core: Automaton, closing: bytes, whitespace: bytes) -> ParameterPiece | None:
    """`WS core WS closing` laid out around `core`'s DFA, or None where that is not deterministic: the start is
    entered again or reads whitespace, or an accepting state reads whitespace or the closing tag's first byte."""
    table = core.class_transitions
    accepting = np.flatnonzero(np.asarray(core.accepting))
    space = sorted(set(whitespace))
    if bool(core.accepting[0]) or bool((table == 0).any()) or bool((table[0, core.byte_class[space]] >= 0).any()) \
            or bool((table[accepting][:, core.byte_class[[*space, closing[0]]]] >= 0).any()):
        return None
    size, length = core.num_states, len(closing)
    joint, first = joint_classes([core.byte_class], set(space) | set(closing))
    laid = np.full((size + 1 + length, len(first)), -1, dtype=np.int32)
    laid[:size] = table[:, core.byte_class[first]]
    laid[0, joint[space]] = 0
    after = size
    """The state after the value, in the whitespace before the closing tag."""
    laid[np.append(accepting, after)[:, None], joint[space][None, :]] = after
    laid[np.append(accepting, after), joint[closing[0]]] = size + 1
    laid[np.arange(size + 1, size + length), joint[list(closing[1:])]] = np.arange(size + 2, size + length + 1)
    return ParameterPiece(laid, joint)


def _piece(parameter: XmlParameter, whitespace: bytes) -> ParameterPiece | None:
    laid = None
    if parameter.core is not None:
        laid = spaced_piece(build_automaton(parameter.core), parameter.closing, whitespace)
    return laid if laid is not None else parameter_piece(parameter.value, parameter.closing)


def _junction(rows: list[dict[int, int]], root: int, whitespace: frozenset[int]
              ) -> list[dict[int, int]] | None:
    """The subset construction of a junction's whitespace loop at `root` and its trie (`rows`, marks negative):
    rows of its states (the first the root's), a move to `-1 - k` for the k-th subset, to a mark as it is; None
    where a mark is reached beside anything else."""
    subsets: dict[frozenset[int], int] = {frozenset([root]): 0}
    order = [frozenset([root])]
    out: list[dict[int, int]] = []
    while len(out) < len(order):
        subset = order[len(out)]
        moves: dict[int, set[int]] = {}
        for node in subset:
            for byte, target in rows[node].items():
                moves.setdefault(byte, set()).add(target)
            if node == root:
                for byte in whitespace:
                    moves.setdefault(byte, set()).add(root)
        row: dict[int, int] = {}
        for byte, targets in moves.items():
            marks = [t for t in targets if t < 0]
            if marks:
                if len(targets) > 1:
                    return None
                row[byte] = marks[0]
                continue
            key = frozenset(targets)
            if key not in subsets:
                subsets[key] = len(order)
                order.append(key)
            row[byte] = -1_000_000 - subsets[key]
        out.append(row)
    return out


def xml_tag_layout(parameters: Sequence[XmlParameter], ends: Sequence[bytes], whitespace: bytes) -> Automaton | None:
    """The DFA of `WS (PARAM WS)?... END` (`whitespace` the bytes of WS, unbounded; END one of `ends`), or None
    where it is not laid out (see the module)."""
    check_deadline("laying out an XML arguments tag")
    pieces = [_piece(p, whitespace) for p in parameters]
    if not ends or any(piece is None for piece in pieces):
        return None
    optional_tail = len(parameters)
    while optional_tail > 0 and not parameters[optional_tail - 1].required:
        optional_tail -= 1
    end_mark = -2 - len(parameters)
    junctions: list[list[dict[int, int]]] = []
    for at in range(len(parameters) + 1):
        rows: list[dict[int, int]] = [{}]
        texts = [(parameters[i].head, -2 - i) for i in range(at, len(parameters))]
        cut = next((k for k, (_, mark) in enumerate(texts) if parameters[-2 - mark].required), None)
        texts = texts[:cut + 1] if cut is not None else texts
        if at >= optional_tail:
            texts += [(end, end_mark) for end in ends]
        if any(trie_insert(rows, 0, text, mark) is None for text, mark in texts):
            return None
        junction = _junction(rows, 0, frozenset(whitespace))
        if junction is None:
            return None
        junctions.append(junction)
    starts = np.cumsum([0] + [len(j) for j in junctions])
    sizes = [piece.num_states - 1 for piece in pieces if piece is not None]
    bases = (int(starts[-1]) + np.concatenate([[0], np.cumsum(sizes)])).astype(np.int64)
    final = int(bases[-1])
    joint, first = joint_classes([piece.byte_class for piece in pieces if piece is not None],
                                 {byte for j in junctions for row in j for byte in row})
    table = np.full((final + 1, len(first)), -1, dtype=np.int64)
    for at, junction in enumerate(junctions):
        for offset, row in enumerate(junction):
            for byte, target in row.items():
                if target <= -1_000_000:
                    goal = int(starts[at]) - 1_000_000 - target
                else:
                    goal = final if target == end_mark else int(bases[-2 - target])
                table[int(starts[at]) + offset, joint[byte]] = goal
    for index, piece in enumerate(pieces):
        assert piece is not None
        moved = piece.table[:-1, piece.byte_class[first]].astype(np.int64)
        last = piece.num_states - 1
        table[bases[index]:bases[index + 1]] = np.where(moved == last, starts[index + 1],
                                                        np.where(moved >= 0, moved + bases[index], -1))
    accepting = np.zeros(final + 1, dtype=bool)
    accepting[final] = True
    return Automaton.from_classes(table, accepting, joint)
