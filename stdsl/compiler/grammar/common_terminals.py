"""Lark's `common` library (`%import common.NAME`): its terminals written out, as Lark's dynamic lexer reads them.

The text is `lark/grammars/common.lark` (lark 1.3) with two terminals rewritten to the strings Lark's
lexer actually returns, since their lazy regexes cannot be read as languages: `ESCAPED_STRING`
(a lookbehind in Lark) is a quote, then characters other than a quote, backslash or newline or a
backslash with any character but a newline, then a quote; `C_COMMENT` ends at the first `*/`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from stdsl.compiler.grammar import syntax_tree as st
from stdsl.errors import GrammarError

COMMON_LARK = r"""
DIGIT: "0".."9"
HEXDIGIT: "a".."f"|"A".."F"|DIGIT
INT: DIGIT+
SIGNED_INT: ["+"|"-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e"|"E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+"|"-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+"|"-"] NUMBER
ESCAPED_STRING: "\"" /([^"\\\n]|\\.)*/ "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_"|LETTER) ("_"|LETTER|DIGIT)*
WS_INLINE: (" "|/\t/)+
WS: /[ \t\f\r\n]/+
CR : /\r/
LF : /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: /\/\*([^*]|\*+[^*\/])*\*+\//
SQL_COMMENT: /--[^\n]*/
"""

PREFIX = "common."


def import_common(tree: st.GrammarTree, name: str, alias: str, error: Callable[[str, int], GrammarError],
                  offset: int) -> list[st.Definition]:
    """The definition of common terminal `name` (from `tree`, `COMMON_LARK` parsed) under `alias`, then those it
    uses under `common.NAME` names (no user name has a dot, so they never clash); `error(message, offset)`
    reports an unknown name."""
    if name not in tree.definitions:
        known = ", ".join(sorted(n for n in tree.definitions if not n.startswith("_")))
        raise error(f"common has no terminal {name!r} (it has {known})", offset)
    out: list[st.Definition] = []
    pending = [name]
    seen = {name}
    while pending:
        current = pending.pop()
        definition = tree.definitions[current]
        body = rename_references(definition.body, lambda ref: PREFIX + ref, pending, seen)
        out.append(dataclasses.replace(definition, name=alias if current == name else PREFIX + current, body=body))
    return out


def rename_references(node: st.Expression, rename: Callable[[str], str], found: list[str],
                      seen: set[str]) -> st.Expression:
    """`node` with every reference renamed; names met for the first time are appended to `found`."""
    if isinstance(node, st.Reference):
        if node.name not in seen:
            seen.add(node.name)
            found.append(node.name)
        return st.Reference(rename(node.name), node.position)
    if isinstance(node, (st.Sequence, st.Choice)):
        items = tuple(rename_references(item, rename, found, seen) for item in node.items)
        return dataclasses.replace(node, items=items)
    if isinstance(node, st.Repetition):
        return dataclasses.replace(node, item=rename_references(node.item, rename, found, seen))
    return node
