"""Make a field's end unambiguous when literal text follows it (the exact "not containing" bound).

Free text is intersected with the strings that end right before the literal; any other
type must already have that property, or the program is refused with the reason.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.ops import ends_before, intersect
from stdsl.errors import CompileError


class FieldLanguage(Protocol):
    """What bounding reads of a field type (`stc.types.FieldType`, which imports this module)."""

    @property
    def free_text(self) -> bool: ...

    @property
    def automaton(self) -> Automaton: ...

    def text_ir(self) -> ir.Node: ...


def bounded_by(kind: FieldLanguage, literal: bytes, what: str) -> ir.Node:
    """The language of `kind` restricted so that the first `literal` after the value marks its end."""
    if not literal:
        return kind.text_ir()
    node = kind.text_ir()
    if isinstance(node, ir.EmbeddedGrammar):
        from stdsl.compiler.pushdown.embedding import guarded

        return guarded(node, ends_before(literal))
    own = kind.automaton
    bounded = intersect(own, ends_before(literal))
    if kind.free_text:
        return ir.Embedded(bounded.transitions, bounded.accepting)
    same = (bounded.num_states == own.num_states and np.array_equal(bounded.transitions, own.transitions)
            and np.array_equal(bounded.accepting, own.accepting))
    if not same:
        raise CompileError(
            f"{what} could itself contain the text that follows it ({literal.decode('utf-8', 'replace')!r}), "
            "so its end would be ambiguous; change the literal text after it"
        )
    return kind.text_ir()
