"""A structural tag's triggered tags (or tags with a separator) assembled from each tag's DFA: a tag is compiled once,
and a list of tags costs the tags it has not met before, as a tool list's reply does (`reply_automaton`).

XGrammar's tool-calling structural tags (`triggered_tags` of `<tool_call>{"name": ..., "arguments": ` + a schema +
`}</tool_call>`, one tag per tool) are a reply grammar spelled out.  Each tag (begin, content, one of its ends) is
laid out from its parts and kept per tag expression (its content is the schema's cached leaf); the skeleton (the
free text without triggers, or the separators, with a placeholder symbol where a tag stands) is compiled small
and kept; `pushdown.piece_assembly.assemble` puts the tags in its placeholder edges.  The result accepts exactly
what the expression with the tags' alternative in the placeholder's place accepts; it is trim, not minimized.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.automata.strings import literal_strings
from stdsl.compiler.pushdown.piece_assembly import PLACEHOLDER_NODE, assemble, literals_and_leaves, piece_from_parts
from stdsl.compiler.tools.reply_automaton import piece_automaton

_TAGS = caches.kind("structural tags")
"""One tag's DFA (None: it embeds a grammar) per tag expression."""


def tags_automaton(tags: Sequence[ir.Node], around: Callable[[ir.Node], ir.Node],
                   max_states: int = DEFAULT_MAX_STATES) -> Automaton | None:
    """The DFA of `around(alternative of the tags)` (triggered tags, tags with a separator) assembled, or None
    where a tag or the skeleton embeds a recursive grammar (the caller lowers the expression whole, to a
    pushdown)."""
    pieces: list[Automaton] = []
    for tag in tags:
        piece: Automaton | None = _TAGS.get((), partial(_tag_piece, tag), (tag,))
        if piece is None:
            return None
        pieces.append(piece)
    return assemble(pieces, around(PLACEHOLDER_NODE), max_states)


def _tag_piece(tag: ir.Node) -> Automaton | None:
    """A tag's DFA; one whose begin is spelled several ways (`structural_tag.spelling_groups`: a prefix, an
    alternative of literal endings, the rest) laid out from those parts, the spellings as their minimal DFA, so the
    rest (a tool's arguments) is laid out once."""
    items = tag.items if isinstance(tag, ir.Seq) else (tag,)
    for index, item in enumerate(items):
        if isinstance(item, ir.Alt) and literal_strings(item) is not None:
            before, after = literals_and_leaves(ir.seq(*items[:index])), literals_and_leaves(ir.seq(*items[index + 1:]))
            if before is not None and after is not None:
                return piece_from_parts([*before, build_automaton(item), *after])
            break
    return piece_automaton(tag)
