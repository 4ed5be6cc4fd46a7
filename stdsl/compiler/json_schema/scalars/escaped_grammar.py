"""A recursive grammar's language as JSON strings: `escaped_content` applied to every body of an embedded grammar."""

from __future__ import annotations

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.json_schema.scalars.escaped_automaton import escaped_content
from stdsl.compiler.pushdown.embedding import BodyTable, bodywise
from stdsl.compiler.pushdown.grammar import CALL_BASE


def json_string_leaf(leaf: ir.EmbeddedGrammar) -> ir.EmbeddedGrammar:
    """A quoted JSON string whose decoded content is a text of `leaf`'s language: every body's bytes escaped as
    `escaped_content` escapes a DFA's (escaping acts on each byte apart, so it commutes with the calls)."""
    def escaped(body: BodyTable, is_root: bool) -> BodyTable:
        table, accepting = body
        content = escaped_content(table[:, :CALL_BASE], accepting)
        bytes_only = np.asarray(content.transitions)
        wide = np.full((bytes_only.shape[0], table.shape[1]), -1, dtype=np.int32)
        wide[:, :CALL_BASE] = bytes_only
        wide[:len(table), CALL_BASE:] = table[:, CALL_BASE:]
        return wide, np.asarray(content.accepting, dtype=bool)

    inner = bodywise(leaf, escaped)
    quote = ir.literal('"')
    return ir.EmbeddedGrammar(inner.label, ir.seq(quote, inner.main, quote), inner.names, inner.bodies, False)
