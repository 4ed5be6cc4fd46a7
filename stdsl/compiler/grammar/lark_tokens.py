"""The tokens of Lark grammar text (llguidance / XGrammar dialect), each with its 1-based line and column.

Newlines end statements, so they are tokens (`NL`) outside brackets; `//` and `#` comments are
skipped; `%json { ... }` reads its JSON object whole and `%lark { ... }` the token span of its braces.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import NamedTuple

from stdsl.compiler.deadline import check_deadline
from stdsl.errors import GrammarError

_TOKEN = re.compile(r"""
    (?P<SPACE>[ \t\f\r]+|\\\r?\n)
  | (?P<COMMENT>//[^\n]*|\#[^\n]*)
  | (?P<NL>\n)
  | (?P<STRING>"(?:\\.|[^"\\\n])*"i?)
  | (?P<REGEXP>/(?!/)(?:\\.|[^/\\\n])+/[a-zA-Z]*)
  | (?P<SPECIAL><[^<>\s]+>)
  | (?P<NAME>[_a-zA-Z][_a-zA-Z0-9]*(?:-[_a-zA-Z0-9]+)*)
  | (?P<NUMBER>[0-9]+)
  | (?P<DIRECTIVE>%[a-zA-Z_]+)
  | (?P<OP>->|\.\.|[:|()\[\]?*+~{},.=!])
""", re.VERBOSE)

OPENING = {"(": ")", "[": "]"}
DEADLINE_CHECK_TOKENS = 4096


class Token(NamedTuple):
    """One token: its kind (a group name of `_TOKEN`, or `JSON` / `BLOCK`), its text, where it starts and ends
    (offsets into the whole source), and for `JSON` the decoded value, for `BLOCK` the tokens inside the braces.
    A named tuple: a frozen dataclass took 1.3 us to make against 0.35, and a 128-tool grammar has 2,300 tokens."""

    kind: str
    text: str
    offset: int
    end: int
    value: object = None


class SourceText:
    """The whole grammar text and its name, for turning offsets into 1-based (line, column)."""

    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        """The 1-based (line, column) of `offset`."""
        line = bisect.bisect_right(self.line_starts, offset) - 1
        return line + 1, offset - self.line_starts[line] + 1

    def error(self, message: str, offset: int) -> GrammarError:
        """A GrammarError at `offset`."""
        line, column = self.position(offset)
        return GrammarError(message, self.source, line, column)


def tokenize(source: SourceText, start: int = 0, closing: str | None = None) -> tuple[list[Token], int]:
    """The tokens from `start` up to the end of the text, or up to the unmatched `closing` brace (returned with
    the offset just past it). Newlines inside ( ) and [ ] are not tokens; consecutive ones are one `NL`."""
    text = source.text
    tokens: list[Token] = []
    brackets: list[tuple[str, int]] = []
    braces = 0
    pos = start
    while pos < len(text):
        if len(tokens) % DEADLINE_CHECK_TOKENS == 0:
            check_deadline("grammar parsing")
        match = _TOKEN.match(text, pos)
        if match is None:
            raise source.error(f"unexpected character {text[pos]!r}", pos)
        kind = match.lastgroup or ""
        value = match.group()
        end = match.end()
        if kind in ("SPACE", "COMMENT") or (kind == "NL" and (brackets or (tokens and tokens[-1].kind == "NL"))):
            pos = end
            continue
        if kind == "OP" and value in OPENING:
            brackets.append((OPENING[value], pos))
        elif kind == "OP" and value in (")", "]"):
            if not brackets or brackets[-1][0] != value:
                raise source.error(f"unmatched {value!r}", pos)
            brackets.pop()
        elif kind == "OP" and value == "{":
            braces += 1
        elif kind == "OP" and value == "}":
            if braces == 0 and closing == "}":
                if brackets:
                    raise source.error(f"unclosed {text[brackets[-1][1]]!r}", brackets[-1][1])
                return tokens, end
            braces -= 1
        tokens.append(Token(kind, value, pos, end))
        if kind == "DIRECTIVE" and value in ("%json", "%lark"):
            block, end = _read_block(source, end, value)
            tokens.append(block)
        pos = end
    if closing is not None:
        raise source.error(f"missing {closing!r} to close the block", start - 1)
    if brackets:
        raise source.error(f"unclosed {text[brackets[-1][1]]!r}", brackets[-1][1])
    return tokens, pos


def _read_block(source: SourceText, pos: int, directive: str) -> tuple[Token, int]:
    """The `{ ... }` after `%json` (a JSON value) or `%lark` (tokens of a nested grammar) at or after `pos`."""
    text = source.text
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    if pos >= len(text) or text[pos] != "{":
        raise source.error(f"{directive} needs a {{ ... }} block", pos)
    if directive == "%json":
        try:
            schema, end = json.JSONDecoder().raw_decode(text, pos)
        except json.JSONDecodeError as error:
            raise source.error(f"the schema after %json is not valid JSON: {error.msg}", error.pos) from None
        return Token("JSON", text[pos:end], pos, end, schema), end
    inner, end = tokenize(source, pos + 1, "}")
    return Token("BLOCK", text[pos:end], pos, end, inner), end
