"""Lark grammar text (the llguidance / XGrammar dialect) read into a `GrammarTree`.

Statements: `rule: ...`, `TERMINAL: ...` (with `?rule` / `!rule`, `| alternatives` on following
lines, `-> alias`), `%ignore`, `%import common.NAME [-> ALIAS]` / `%import common (A, B)`,
`%declare`, `%llguidance {...}` / `%grammar_options {...}`. What would change the language in
ways this compiler cannot follow (priorities, templates, `%override`, lexeme options such as
`stop=`) is refused with a GrammarError at its line and column.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache

from stdsl.compiler.grammar import syntax_tree as st
from stdsl.compiler.grammar.common_terminals import COMMON_LARK, import_common
from stdsl.compiler.grammar.lark_tokens import SourceText, Token, tokenize
from stdsl.errors import GrammarError

MAX_NESTING = 100
MAX_REPEAT = 10_000
KNOWN_OPTIONS = ("allow_initial_skip", "ignore_once", "skip_repetition", "no_forcing", "allow_invalid_utf8")
LANGUAGE_CHANGING_OPTIONS = ("stop", "suffix", "max_tokens", "temperature", "stop_capture")


def is_terminal_name(name: str) -> bool:
    """Whether `name` is a terminal's (its first letter after any `_` is uppercase), as Lark reads names."""
    stripped = name.rpartition(".")[2].lstrip("_")
    return bool(stripped) and stripped[0].isupper()


def parse_lark(text: str, source: str = "<grammar>") -> st.GrammarTree:
    """The syntax tree of Lark grammar `text` (`source` names it in errors)."""
    whole = SourceText(text, source)
    tokens, _ = tokenize(whole)
    return _LarkParser(whole, tokens, len(text)).grammar()


@cache
def _common_tree() -> st.GrammarTree:
    """Lark's common library, parsed once."""
    return parse_lark(COMMON_LARK, "<lark common>")


class _LarkParser:
    """Recursive descent over one grammar's tokens (a `%lark` block gets a parser of its own)."""

    def __init__(self, source: SourceText, tokens: list[Token], end: int) -> None:
        self.source = source
        self.tokens = tokens
        self.index = 0
        self.end = end
        self.depth = 0
        self.tree = st.GrammarTree()

    def error(self, message: str, token: Token | None = None) -> GrammarError:
        return self.source.error(message, token.offset if token is not None else self.end)

    def position(self, token: Token) -> st.Position:
        return self.source.position(token.offset)

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.index + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def at(self, kind: str, text: str | None = None, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token is not None and token.kind == kind and (text is None or token.text == text)

    def take(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        token = self.peek()
        if token is None or token.kind != kind or (text is not None and token.text != text):
            found = "the end of the grammar" if token is None else repr(token.text)
            raise self.error(f"expected {what or text or kind.lower()}, found {found}", token)
        self.index += 1
        return token

    def grammar(self) -> st.GrammarTree:
        while self.peek() is not None:
            if self.at("NL"):
                self.index += 1
                continue
            self.statement()
            if self.peek() is not None:
                self.take("NL", what="the end of the line")
        return self.tree

    def statement(self) -> None:
        token = self.peek()
        assert token is not None
        if token.kind == "DIRECTIVE":
            self.directive()
            return
        if token.kind == "OP" and token.text in ("?", "!"):
            self.index += 1
            if not self.at("NAME") or is_terminal_name(self.tokens[self.index].text):
                raise self.error(f"{token.text!r} must come right before a rule name", token)
        name = self.take("NAME", what="a rule or terminal definition")
        lazy = self.definition_head(name)
        self.take("OP", ":")
        body = self.expansions(is_terminal_name(name.text))
        self.define(name, body, is_terminal_name(name.text), lazy)

    def definition_head(self, name: Token) -> bool:
        """Refuse what may stand between a name and its colon: priorities, template parameters, options
        that depend on the tokenizer or sampler (`[capture]` is accepted: it only names the text); whether the
        rule is `[lazy]`."""
        if self.at("OP", "."):
            dot = self.take("OP")
            kind = "terminal" if is_terminal_name(name.text) else "rule"
            raise self.error(f"{kind} priorities ('{name.text}.N') are not supported: they choose between "
                             "readings by a lexer's preference, which a byte automaton cannot follow; remove "
                             "the priority and make the alternatives distinct", dot)
        if self.at("OP", "{"):
            raise self.error("templates (rules with parameters) are not supported: write one rule per use",
                             self.peek())
        if self.at("OP", "["):
            if is_terminal_name(name.text):
                raise self.error("options ([...]) are only allowed on rules", self.peek())
            return self.rule_options()
        return False

    def rule_options(self) -> bool:
        """Read `[capture, lazy, ...]`; whether `lazy` is among them."""
        lazy = False
        opening = self.take("OP", "[")
        while not self.at("OP", "]"):
            option = self.take("NAME", what="a rule option")
            if option.text in LANGUAGE_CHANGING_OPTIONS:
                raise self.error(f"the rule option {option.text!r} is not supported: it changes which text the "
                                 "rule accepts depending on the tokenizer or sampler; write the terminal's exact "
                                 "language instead (for example a regex that ends at the delimiter)", option)
            if option.text not in ("capture", "lazy"):
                raise self.error(f"unknown rule option {option.text!r}", option)
            lazy = lazy or option.text == "lazy"
            if self.at("OP", "="):
                self.index += 1
                self.take("STRING", what="a capture name")
            if not self.at("OP", "]"):
                self.take("OP", ",", what="',' or ']'")
        if self.index >= len(self.tokens):
            raise self.error("unclosed '['", opening)
        self.take("OP", "]")
        return lazy

    def define(self, name: Token, body: st.Expression, terminal: bool, lazy: bool = False) -> None:
        if name.text in self.tree.definitions or name.text in self.tree.declared:
            first = self.tree.definitions.get(name.text)
            line = first.position[0] if first else self.tree.declared[name.text][0]
            raise self.error(f"'{name.text}' is defined twice (first on line {line})", name)
        self.tree.definitions[name.text] = st.Definition(name.text, body, self.position(name), terminal, lazy)

    def directive(self) -> None:
        token = self.take("DIRECTIVE")
        name = token.text
        if name == "%ignore":
            self.tree.ignore.append(self.expansions(True))
        elif name == "%import":
            self.import_statement(token)
        elif name == "%declare":
            while self.at("NAME"):
                declared = self.take("NAME")
                if declared.text in self.tree.definitions:
                    raise self.error(f"'{declared.text}' is declared and also defined", declared)
                self.tree.declared[declared.text] = self.position(declared)
            if self.peek() is not None and not self.at("NL"):
                raise self.error("%declare takes names only", self.peek())
        elif name in ("%llguidance", "%grammar_options"):
            self.options(token)
        elif name in ("%json", "%lark"):
            raise self.error(f"{name} stands in a rule's body (for example 'start: {name} {{ ... }}')", token)
        elif name in ("%override", "%extend"):
            raise self.error(f"{name} is not supported: write the final definition of the rule once", token)
        else:
            raise self.error(f"unknown directive {name}", token)

    def options(self, token: Token) -> None:
        if not self.at("OP", "{"):
            raise self.error(f"{token.text} needs a JSON object", token)
        opening = self.tokens[self.index]
        text = self.source.text
        try:
            value, end = json.JSONDecoder().raw_decode(text, opening.offset)
        except json.JSONDecodeError as error:
            raise self.source.error(f"the options after {token.text} are not valid JSON: {error.msg}",
                                    error.pos) from None
        if not isinstance(value, dict):
            raise self.error(f"{token.text} needs a JSON object", opening)
        while self.peek() is not None and self.tokens[self.index].offset < end:
            self.index += 1
        for key, setting in value.items():
            if key not in KNOWN_OPTIONS:
                raise self.error(f"unknown grammar option {key!r} (known: {', '.join(KNOWN_OPTIONS)})", opening)
            if key == "allow_invalid_utf8" and setting:
                raise self.error("allow_invalid_utf8 is not supported: outputs are always valid UTF-8", opening)
            self.tree.options[key] = setting

    def import_statement(self, token: Token) -> None:
        library = self.take("NAME", what="a library name (only 'common' is available)")
        if library.text != "common":
            raise self.error(f"only Lark's 'common' library can be imported, not {library.text!r}; copy the "
                             "definitions you need into the grammar", library)
        names: list[tuple[Token, Token]] = []
        if self.at("OP", "."):
            self.index += 1
            name = self.take("NAME", what="a name from common")
            alias = name
            if self.at("OP", "->"):
                self.index += 1
                alias = self.take("NAME", what="an alias")
            names.append((name, alias))
        elif self.at("OP", "("):
            self.index += 1
            while True:
                name = self.take("NAME", what="a name from common")
                names.append((name, name))
                if self.at("OP", ")"):
                    break
                self.take("OP", ",", what="',' or ')'")
            self.index += 1
        else:
            raise self.error("expected '.NAME' or '(NAME, ...)' after %import common", self.peek())
        for name, alias in names:
            if not is_terminal_name(alias.text):
                raise self.error(f"the alias {alias.text!r} of a terminal must be uppercase", alias)
            for definition in import_common(_common_tree(), name.text, alias.text, self.source.error, name.offset):
                if definition.name == alias.text:
                    self.define(alias, definition.body, True)
                elif definition.name not in self.tree.definitions:
                    self.tree.definitions[definition.name] = definition

    def expansions(self, terminal: bool) -> st.Expression:
        """Alternatives separated by `|` (a `|` may open the next line)."""
        first = self.peek()
        position = self.position(first) if first is not None else self.source.position(self.end)
        branches = [self.alias(terminal)]
        while self.at("OP", "|") or (self.at("NL") and self.at("OP", "|", 1)):
            if self.at("NL"):
                self.index += 1
            self.index += 1
            branches.append(self.alias(terminal))
        return st.choice_of(branches, position)

    def alias(self, terminal: bool) -> st.Expression:
        body = self.expansion(terminal)
        if self.at("OP", "->"):
            arrow = self.take("OP")
            if terminal:
                raise self.error("an alias ('-> name') is only allowed in a rule", arrow)
            self.take("NAME", what="an alias name")
        return body

    def expansion(self, terminal: bool) -> st.Expression:
        token = self.peek()
        position = self.position(token) if token is not None else self.source.position(self.end)
        items: list[st.Expression] = []
        while (token := self.peek()) is not None and token.kind != "NL" and not (
                token.kind == "OP" and token.text in ("|", ")", "]", "->", "}")):
            items.append(self.expression(terminal))
        return st.sequence_of(items, position) if items else st.empty(position)

    def expression(self, terminal: bool) -> st.Expression:
        item = self.atom(terminal)
        token = self.peek()
        if token is None or token.kind != "OP":
            return item
        position = self.position(token)
        high: int | None
        if token.text in ("?", "*", "+"):
            self.index += 1
            low, high = {"?": (0, 1), "*": (0, None), "+": (1, None)}[token.text]
            return st.Repetition(item, low, high, position)
        if token.text == "~":
            self.index += 1
            low = self.count()
            high = low
            if self.at("OP", ".."):
                self.index += 1
                high = self.count()
            return self.bounded(item, low, high, token)
        if token.text == "{":
            self.index += 1
            low = self.count() if self.at("NUMBER") else 0
            high = low
            if self.at("OP", ","):
                self.index += 1
                high = self.count() if self.at("NUMBER") else None
            self.take("OP", "}", what="'}'")
            return self.bounded(item, low, high, token)
        return item

    def count(self) -> int:
        number = self.take("NUMBER", what="a repetition count")
        value = int(number.text)
        if value > MAX_REPEAT:
            raise self.error(f"repetition count {value} exceeds the limit of {MAX_REPEAT}", number)
        return value

    def bounded(self, item: st.Expression, low: int, high: int | None, token: Token) -> st.Expression:
        if high is not None and high < low:
            raise self.error(f"repetition range {low}..{high} is empty (the maximum is below the minimum)", token)
        return st.Repetition(item, low, high, self.position(token))

    def atom(self, terminal: bool) -> st.Expression:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end of the grammar")
        position = self.position(token)
        if token.kind == "OP" and token.text in ("(", "["):
            self.index += 1
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise self.error(f"groups nested deeper than {MAX_NESTING}", token)
            inner = self.expansions(terminal)
            self.depth -= 1
            self.take("OP", ")" if token.text == "(" else "]")
            return inner if token.text == "(" else st.Repetition(inner, 0, 1, position)
        self.index += 1
        if token.kind == "STRING":
            if self.at("OP", ".."):
                return self.char_range(token)
            return self.string(token)
        if token.kind == "REGEXP":
            return self.regexp(token)
        if token.kind == "NAME":
            if self.at("OP", "{") and not self.at("NUMBER", None, 1) and not self.at("OP", ",", 1):
                raise self.error("templates are not supported: write a rule for each use", self.peek())
            if terminal and not is_terminal_name(token.text):
                raise self.error(f"the terminal refers to the rule '{token.text}': terminals may only use strings, "
                                 "regexes and other terminals", token)
            return st.Reference(token.text, position)
        if token.kind == "SPECIAL":
            if terminal:
                raise self.error(f"the special token {token.text} cannot stand inside a terminal (it is one token "
                                 "of the tokenizer, not text); use it in a rule", token)
            return self.special_token(token)
        if token.kind == "DIRECTIVE" and token.text in ("%json", "%lark"):
            block = self.take("JSON" if token.text == "%json" else "BLOCK")
            if terminal:
                raise self.error(f"{token.text} cannot stand inside a terminal (it is a rule-level construct)", token)
            if token.text == "%json":
                return st.JsonSchema(block.value, position)
            assert isinstance(block.value, list)
            nested = _LarkParser(self.source, block.value, block.end - 1)
            return st.NestedGrammar(nested.grammar(), position)
        raise self.error(f"unexpected {token.text!r}", token)

    def special_token(self, token: Token) -> st.SpecialToken:
        """`<name>` by the token's text, or `<[id]>` / `<[a-b,c]>` by inclusive id ranges."""
        text = token.text
        if not text.startswith("<[") or not text.endswith("]>"):
            return st.SpecialToken(text, (), self.position(token))
        ranges: list[tuple[int, int]] = []
        for part in text[2:-2].split(","):
            low, dash, high = part.partition("-")
            if not low.isdigit() or (dash and not high.isdigit()):
                raise self.error(f"{text}: token ids are written <[N]>, <[N-M]> or <[N-M,K]> (decimal, inclusive "
                                 "ranges; negated sets <[^...]> are not supported)", token)
            first, last = int(low), int(high) if dash else int(low)
            if last < first:
                raise self.error(f"{text}: the id range {part} is empty (its end comes before its start)", token)
            ranges.append((first, last))
        return st.SpecialToken(None, tuple(ranges), self.position(token))

    def string(self, token: Token) -> st.Literal:
        text = token.text
        ignore_case = text.endswith("i")
        body = text[1:-2] if ignore_case else text[1:-1]
        return st.Literal(unescape(body, lambda message, at: self.source.error(message, token.offset + 1 + at)),
                          ignore_case, self.position(token))

    def char_range(self, low: Token) -> st.CharClass:
        self.index += 1
        high = self.take("STRING", what="the end of a character range")
        first, last = self.string(low), self.string(high)
        if len(first.text) != 1 or len(last.text) != 1 or first.ignore_case or last.ignore_case:
            raise self.error("a range (\"a\"..\"z\") needs single characters at both ends", low)
        if ord(last.text) < ord(first.text):
            raise self.error(f"the range {low.text}..{high.text} is empty (its end comes before its start)", low)
        return st.CharClass(((ord(first.text), ord(last.text)),), False, self.position(low))

    def regexp(self, token: Token) -> st.Pattern:
        text = token.text
        close = text.rindex("/")
        flags = text[close + 1:]
        for flag in flags:
            if flag not in "is":
                what = {"m": "multi-line anchors", "x": "verbose patterns", "l": "locale-dependent classes",
                        "u": "the unicode flag"}.get(flag, "an unknown flag")
                raise self.error(f"the regex flag {flag!r} ({what}) is not supported: only 'i' and 's' are", token)
        return st.Pattern(lark_regex_body(text[1:close]), flags, self.position(token))


_QUOTE_AFTER_ESCAPED_BACKSLASHES = re.compile(r'(?<!\\)((?:\\\\)+)"')


def lark_regex_body(body: str) -> str:
    """A regex literal's text (between its slashes) as Lark reads it: Lark drops the backslash before every `"` after
    doubling the escapes (`load_grammar._fix_escaping`), so an even run of backslashes before a quote loses one
    escaped backslash (`/[^\\\\"]/` is `[^"]` to Lark, a backslash allowed)."""
    return _QUOTE_AFTER_ESCAPED_BACKSLASHES.sub(lambda match: match.group(1)[2:] + '"', body)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", '"': '"', "\\": "\\"}
_HEX_WIDTHS = {"x": 2, "u": 4, "U": 8}


def unescape(body: str, error: Callable[[str, int], GrammarError]) -> str:
    """A Lark string literal's text (between its quotes) as Lark reads it: `\\n \\t \\r \\f \\\\ \\"`, `\\xHH`,
    `\\uXXXX`, `\\UXXXXXXXX`; any other backslash stands for itself. `error(message, offset)` makes the error.
    The text between escapes is copied whole (a tool call's literal is mostly plain text)."""
    out: list[str] = []
    index = 0
    while index < len(body):
        slash = body.find("\\", index, len(body) - 1)
        if slash < 0:
            out.append(body[index:])
            break
        out.append(body[index:slash])
        index = slash
        code = body[index + 1]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            index += 2
        elif code in _HEX_WIDTHS:
            digits = body[index + 2:index + 2 + _HEX_WIDTHS[code]]
            if len(digits) != _HEX_WIDTHS[code] or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise error(f"bad escape \\{code}{digits}: it needs {_HEX_WIDTHS[code]} hex digits", index)
            value = int(digits, 16)
            if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                raise error(f"\\{code}{digits} is not a Unicode scalar value", index)
            out.append(chr(value))
            index += 2 + len(digits)
        else:
            out.append("\\")
            index += 1
    return "".join(out)
