"""GBNF (llama.cpp) and EBNF (as XGrammar reads it) text read into a `GrammarTree`.

`name ::= ...` rules, each continuing until the next `name ::=` (so rules may span lines); string
literals and `[...]` classes over Unicode code points (`\\xXX`, `\\uXXXX`, `\\UXXXXXXXX`, `\\n \\t \\r`
and escaped punctuation), `.` for any character, `( )`, `|` (empty alternatives too), `* + ?`,
`{m}`, `{m,}`, `{m,n}`, `#` comments. The start rule is `root` unless another is named.
XGrammar's macros (`TagDispatch(...)`) and lookahead assertions `(= ...)` are refused.
"""

from __future__ import annotations

import re

from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.grammar import syntax_tree as st
from stdsl.compiler.grammar.lark_tokens import SourceText
from stdsl.errors import GrammarError

MAX_NESTING = 100
MAX_REPEAT = 10_000
DEADLINE_CHECK_TOKENS = 4096

_TOKEN = re.compile(r"""
    (?P<SPACE>\s+)
  | (?P<COMMENT>\#[^\n]*)
  | (?P<DEFINE>::=)
  | (?P<STRING>"(?:\\.|[^"\\\n])*")
  | (?P<CLASS>\[\^?(?:\\.|[^\]\\\n])*\])
  | (?P<NAME>[a-zA-Z0-9_][a-zA-Z0-9_\-]*)
  | (?P<REPEAT>\{\s*[0-9]*\s*(?:,\s*[0-9]*\s*)?\})
  | (?P<OP>[()|*+?.=])
""", re.VERBOSE)

_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "\\": 0x5C, '"': 0x22, "'": 0x27, "[": 0x5B, "]": 0x5D, "-": 0x2D,
            "/": 0x2F, "0": 0x00}
_HEX_WIDTHS = {"x": 2, "u": 4, "U": 8}


def parse_gbnf(text: str, source: str = "<grammar>") -> st.GrammarTree:
    """The syntax tree of GBNF / EBNF grammar `text` (`source` names it in errors)."""
    return _GbnfParser(SourceText(text, source)).grammar()


class _GbnfParser:
    """Recursive descent over the tokens of one GBNF / EBNF grammar."""

    def __init__(self, source: SourceText) -> None:
        self.source = source
        self.tokens = self._tokenize()
        self.index = 0
        self.depth = 0

    def _tokenize(self) -> list[tuple[str, str, int]]:
        text = self.source.text
        tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            if len(tokens) % DEADLINE_CHECK_TOKENS == 0:
                check_deadline("grammar parsing")
            match = _TOKEN.match(text, pos)
            if match is None:
                if text[pos] == "[":
                    raise self.source.error("unterminated character class", pos)
                if text[pos] == '"':
                    raise self.source.error("unterminated string literal", pos)
                raise self.source.error(f"unexpected character {text[pos]!r}", pos)
            kind = match.lastgroup or ""
            if kind not in ("SPACE", "COMMENT"):
                tokens.append((kind, match.group(), pos))
            pos = match.end()
        return tokens

    def error(self, message: str, index: int | None = None) -> GrammarError:
        index = self.index if index is None else index
        offset = self.tokens[index][2] if index < len(self.tokens) else len(self.source.text)
        return self.source.error(message, offset)

    def position(self, index: int) -> st.Position:
        offset = self.tokens[index][2] if index < len(self.tokens) else len(self.source.text)
        return self.source.position(offset)

    def kind(self, ahead: int = 0) -> str | None:
        index = self.index + ahead
        return self.tokens[index][0] if index < len(self.tokens) else None

    def text(self, ahead: int = 0) -> str:
        index = self.index + ahead
        return self.tokens[index][1] if index < len(self.tokens) else ""

    def grammar(self) -> st.GrammarTree:
        tree = st.GrammarTree(start="root")
        while self.index < len(self.tokens):
            if self.kind() != "NAME" or self.kind(1) != "DEFINE":
                raise self.error("expected a rule ('name ::= ...')")
            name_index = self.index
            name = self.text()
            self.index += 2
            body = self.alternatives()
            if self.index < len(self.tokens) and not self.at_rule_start():
                raise self.error(f"unexpected {self.text()!r}")
            if name in tree.definitions:
                first = tree.definitions[name].position[0]
                raise self.error(f"rule '{name}' is defined twice (first on line {first})", name_index)
            tree.definitions[name] = st.Definition(name, body, self.position(name_index))
        return tree

    def at_rule_start(self) -> bool:
        return self.kind() == "NAME" and self.kind(1) == "DEFINE"

    def alternatives(self) -> st.Expression:
        position = self.position(self.index)
        branches = [self.sequence()]
        while self.kind() == "OP" and self.text() == "|":
            self.index += 1
            branches.append(self.sequence())
        return st.choice_of(branches, position)

    def sequence(self) -> st.Expression:
        position = self.position(self.index)
        items: list[st.Expression] = []
        while self.index < len(self.tokens) and not self.at_rule_start() and not (
                self.kind() == "OP" and self.text() in "|)"):
            items.append(self.repeated(self.atom()))
        return st.sequence_of(items, position) if items else st.empty(position)

    def repeated(self, item: st.Expression) -> st.Expression:
        while True:
            position = self.position(self.index)
            if self.kind() == "OP" and self.text() in ("*", "+", "?"):
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[self.text()]
            elif self.kind() == "REPEAT":
                low, high = self.bounds()
            else:
                return item
            self.index += 1
            item = st.Repetition(item, low, high, position)

    def bounds(self) -> tuple[int, int | None]:
        inner = self.text()[1:-1].replace(" ", "")
        low_text, comma, high_text = inner.partition(",")
        low = int(low_text) if low_text else 0
        high = (int(high_text) if high_text else None) if comma else low
        for count in (low, high):
            if count is not None and count > MAX_REPEAT:
                raise self.error(f"repetition count {count} exceeds the limit of {MAX_REPEAT}")
        if high is not None and high < low:
            raise self.error(f"repetition {self.text()} is empty (the maximum is below the minimum)")
        return low, high

    def atom(self) -> st.Expression:
        kind, text, offset = self.tokens[self.index]
        position = self.position(self.index)
        if kind == "OP" and text == "(":
            if self.kind(1) == "OP" and self.text(1) == "=":
                raise self.error("lookahead assertions '(= ...)' are not supported: they restrict the text by "
                                 "what follows it; write the rule so that it reads the following text itself")
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise self.error(f"groups nested deeper than {MAX_NESTING}")
            self.index += 1
            inner = self.alternatives()
            if self.kind() != "OP" or self.text() != ")":
                raise self.error("expected ')'")
            self.index += 1
            self.depth -= 1
            return inner
        self.index += 1
        if kind == "STRING":
            return st.Literal("".join(chr(c) for c in self.characters(text[1:-1], offset + 1)), False, position)
        if kind == "CLASS":
            return self.char_class(text, offset)
        if kind == "OP" and text == ".":
            return st.CharClass((), True, position)
        if kind == "NAME":
            if self.kind() == "OP" and self.text() == "(" and self.tokens[self.index][2] == offset + len(text):
                raise self.error(f"macros such as {text}(...) are not supported: write the rules out (for a "
                                 "tool-call dispatch, an alternation of the tagged forms)", self.index - 1)
            return st.Reference(text, position)
        raise self.error(f"unexpected {text!r}", self.index - 1)

    def characters(self, body: str, offset: int) -> list[int]:
        """The code points of a string or class body, escapes decoded."""
        out: list[int] = []
        index = 0
        while index < len(body):
            char = body[index]
            if char != "\\":
                out.append(ord(char))
                index += 1
                continue
            code = body[index + 1]
            if code in _ESCAPES:
                out.append(_ESCAPES[code])
                index += 2
            elif code in _HEX_WIDTHS:
                digits = body[index + 2:index + 2 + _HEX_WIDTHS[code]]
                if len(digits) != _HEX_WIDTHS[code] or any(d not in "0123456789abcdefABCDEF" for d in digits):
                    raise self.source.error(f"bad escape \\{code}{digits}: it needs {_HEX_WIDTHS[code]} hex digits",
                                            offset + index)
                value = int(digits, 16)
                if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                    raise self.source.error(f"\\{code}{digits} is not a Unicode scalar value", offset + index)
                out.append(value)
                index += 2 + len(digits)
            else:
                raise self.source.error(f"unknown escape \\{code}", offset + index)
        return out

    def char_class(self, text: str, offset: int) -> st.CharClass:
        negate = text.startswith("[^")
        start = 2 if negate else 1
        body = text[start:-1]
        marks: list[tuple[int, bool]] = []
        index = 0
        while index < len(body):
            width = 1 if body[index] != "\\" else (2 + _HEX_WIDTHS.get(body[index + 1], 0))
            piece = body[index:index + width]
            marks.append((self.characters(piece, offset + start + index)[0], piece == "-"))
            index += width
        ranges: list[tuple[int, int]] = []
        index = 0
        while index < len(marks):
            low = marks[index][0]
            if index + 2 < len(marks) and marks[index + 1][1]:
                high = marks[index + 2][0]
                if high < low:
                    raise self.source.error(f"the class range {chr(low)!r}-{chr(high)!r} is empty", offset)
                ranges.append((low, high))
                index += 3
            else:
                ranges.append((low, low))
                index += 1
        return st.CharClass(tuple(ranges), negate, self.source.position(offset))
