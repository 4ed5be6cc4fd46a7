"""Parse Python `re` syntax into the byte-level IR, matched whole (like `re.fullmatch`).

Supported: literals (any Unicode), escapes, character classes, `.`, `\\d \\w \\s \\D \\W \\S`
with Python's Unicode semantics, greedy and lazy quantifiers (lazy read as greedy: the language
is the same), alternation, plain / non-capturing / named groups, comments, and `^` / `$` at the
very start / end.  `parse_anchored` reads `^` / `$` anywhere, for search semantics (see
`regex_anchors`).  Everything that is not a regular language or changes matching globally
(lookaround, backreferences, word boundaries, inline flags, possessive and atomic forms) is
refused with a `RegexError` naming the position.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import cast

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.ir import literal_bytes
from stdsl.compiler.regex.anchors import END, START, Anchor, AnchoredParts, split_anchors
from stdsl.compiler.regex.case_fold import fold_ranges
from stdsl.compiler.regex.categories import shipped_category_ranges
from stdsl.errors import CompileError, RegexError

MAX_REPEAT_COUNT = 10_000
MAX_NESTING = 100
DEADLINE_CHECK_CHARS = 1024

_DIGITS = "0123456789"
_OCTDIGITS = "01234567"
_HEXDIGITS = "0123456789abcdefABCDEF"
_ASCII_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_SIMPLE_ESCAPES = {"a": 0x07, "f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B, "\\": 0x5C}
_ANCHOR_ESCAPES = {"b": "word boundary \\b", "B": "non-boundary \\B", "A": "anchor \\A", "Z": "anchor \\Z"}
_FLAG_CHARS = "aiLmsux-"

Ranges = list[tuple[int, int]]


def _ranges_of(predicate: Callable[[str], bool]) -> Ranges:
    """Code point ranges (surrogates included, as Python sees them) where `predicate` holds."""
    every_char = np.arange(ir.MAX_UNICODE + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    mask = np.fromiter(map(predicate, every_char), dtype=bool, count=len(every_char))
    edges = np.flatnonzero(np.diff(np.concatenate(([False], mask, [False])).astype(np.int8)))
    return [(int(lo), int(hi) - 1) for lo, hi in zip(edges[::2], edges[1::2])]


@cache
def category_ranges(letter: str) -> tuple[tuple[int, int], ...]:
    """Code point ranges of `\\d`, `\\w` or `\\s` exactly as Python `re` reads them in str patterns: the
    table shipped for Python's Unicode version (`categories.py`), else computed once per process."""
    return shipped_category_ranges(letter) or computed_category_ranges(letter)


def computed_category_ranges(letter: str) -> tuple[tuple[int, int], ...]:
    """`category_ranges` from the str methods over every code point (about 55 ms per class).

    `\\d` is `str.isdecimal` (category Nd), `\\w` is `str.isalnum` or `_`, `\\s` is `str.isspace`.
    """
    if letter == "d":
        return tuple(_ranges_of(str.isdecimal))
    if letter == "w":
        return ir.merged_ranges(_ranges_of(str.isalnum) + [(0x5F, 0x5F)])
    if letter == "s":
        return tuple(_ranges_of(str.isspace))
    raise ValueError(f"no category \\{letter}")


def _complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    prev = 0
    for lo, hi in ir.merged_ranges(ranges):
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= ir.MAX_UNICODE:
        out.append((prev, ir.MAX_UNICODE))
    return out


@lru_cache(maxsize=1024)
def _class_node(ranges: tuple[tuple[int, int], ...], negate: bool) -> ir.Node:
    """`ir.codepoints`, memoized: large classes such as `\\w` expand to hundreds of UTF-8 branches."""
    return ir.codepoints(ranges, negate=negate)


def _category(letter: str) -> Ranges:
    """Ranges of a category escape letter (`d w s D W S`)."""
    ranges = list(category_ranges(letter.lower()))
    return _complement(ranges) if letter.isupper() else ranges


@dataclass
class _Item:
    """One parsed piece of a concatenation; `repeated` marks a quantified piece (for 'multiple repeat'),
    `assertion` a bare `^` / `$` (which cannot be quantified)."""

    node: ir.Node
    repeated: bool = False
    assertion: bool = False


class _Parser:
    """Recursive-descent parser over one pattern; `pos` is the index of the next unread character."""

    def __init__(self, pattern: str, anchors: bool = False, ignore_case: bool = False, dot_all: bool = False) -> None:
        self.pattern = pattern
        self.anchors = anchors
        self.ignore_case, self.dot_all = ignore_case, dot_all
        self.pos = 0
        self.depth = 0
        self.group_names: set[str] = set()
        self.next_check = 0

    def error(self, message: str, position: int) -> RegexError:
        return RegexError(message, self.pattern, position)

    def peek(self, offset: int = 0) -> str | None:
        index = self.pos + offset
        return self.pattern[index] if index < len(self.pattern) else None

    def parse(self) -> ir.Node:
        if self.peek() == "^" and not self.anchors:
            self.pos += 1
        node = self.alternation()
        if self.pos < len(self.pattern):
            raise self.error("unbalanced parenthesis", self.pos)
        return node

    def alternation(self) -> ir.Node:
        branches = [self.concatenation()]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.concatenation())
        return ir.alt(*branches)

    def concatenation(self) -> ir.Node:
        items: list[_Item] = []
        while (char := self.peek()) is not None and char not in "|)":
            start = self.pos
            if start >= self.next_check:
                check_deadline("regex parsing")
                self.next_check = start + DEADLINE_CHECK_CHARS
            bounds = self.quantifier()
            if bounds is not None:
                self.apply_quantifier(items, bounds, start)
            elif char == "(" and self.peek(1) == "?" and self.peek(2) == "#":
                self.skip_comment()
            else:
                items.append(_Item(self.atom(), assertion=char in "^$"))
        return ir.seq(*(item.node for item in items))

    def quantifier(self) -> tuple[int, int | None] | None:
        """Read a quantifier at `pos` (advancing past it) or return None and leave `pos` alone."""
        char = self.peek()
        if char == "*":
            self.pos += 1
            return 0, None
        if char == "+":
            self.pos += 1
            return 1, None
        if char == "?":
            self.pos += 1
            return 0, 1
        if char != "{":
            return None
        index = self.pos + 1
        text = self.pattern
        lo_start = index
        while index < len(text) and text[index] in _DIGITS:
            index += 1
        lo_text = text[lo_start:index]
        hi_text: str | None = lo_text
        if index < len(text) and text[index] == ",":
            index += 1
            hi_start = index
            while index < len(text) and text[index] in _DIGITS:
                index += 1
            hi_text = text[hi_start:index]
        if index >= len(text) or text[index] != "}" or (index == self.pos + 1):
            return None
        lo = int(lo_text) if lo_text else 0
        hi = int(hi_text) if hi_text else None
        for count in (lo, hi):
            if count is not None and count > MAX_REPEAT_COUNT:
                raise self.error(
                    f"repetition count {count} exceeds the limit of {MAX_REPEAT_COUNT}", self.pos)
        if hi is not None and hi < lo:
            raise self.error("min repeat greater than max repeat", self.pos)
        self.pos = index + 1
        return lo, hi

    def apply_quantifier(self, items: list[_Item], bounds: tuple[int, int | None], start: int) -> None:
        if not items or items[-1].assertion:
            raise self.error("nothing to repeat", start)
        if items[-1].repeated:
            raise self.error("multiple repeat", start)
        if self.peek() == "?":
            self.pos += 1
        elif self.peek() == "+":
            raise self.error("possessive quantifiers are not supported", self.pos)
        items[-1] = _Item(ir.repeat(items[-1].node, *bounds), repeated=True)

    def skip_comment(self) -> None:
        start = self.pos
        end = self.pattern.find(")", self.pos + 3)
        if end < 0:
            raise self.error("missing ), unterminated comment", start)
        self.pos = end + 1

    def atom(self) -> ir.Node:
        char = self.pattern[self.pos]
        start = self.pos
        self.pos += 1
        if char == "(":
            return self.group(start)
        if char == "[":
            return self.char_class(start)
        if char == ".":
            return _class_node(((0x0A, 0x0A),) if not self.dot_all else (), True)
        if char == "\\":
            return self.escape(start)
        if char == "^":
            if self.anchors:
                return _anchor_leaf(START)
            raise self.error("anchor ^ is only supported at the start of the pattern", start)
        if char == "$":
            if self.anchors:
                return _anchor_leaf(END)
            if self.pos == len(self.pattern):
                return ir.EMPTY
            raise self.error("anchor $ is only supported at the end of the pattern", start)
        if self.ignore_case:
            return _class_node(fold_ranges([(ord(char), ord(char))], re.escape(char)), False)
        return _char(ord(char))

    def group(self, start: int) -> ir.Node:
        if self.peek() == "?":
            self.group_extension(start)
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"groups nested deeper than {MAX_NESTING}", start)
        node = self.alternation()
        self.depth -= 1
        if self.peek() != ")":
            raise self.error("missing ), unterminated subpattern", start)
        self.pos += 1
        return node

    def group_extension(self, start: int) -> None:
        """Read the `?...` after `(`: accept `?:` and `?P<name>`, refuse everything else."""
        self.pos += 1
        char = self.peek()
        if char is None:
            raise self.error("unexpected end of pattern", self.pos)
        if char == ":":
            self.pos += 1
            return
        if char == "P":
            if self.peek(1) == "<":
                self.pos += 2
                self.group_name()
                return
            if self.peek(1) == "=":
                raise self.error("backreferences (?P=name) are not supported", start)
            raise self.error(f"unknown extension ?P{self.peek(1) or ''}", start)
        if char in "=!":
            raise self.error("lookahead assertions are not supported", start)
        if char == "<" and self.peek(1) in ("=", "!"):
            raise self.error("lookbehind assertions are not supported", start)
        if char == ">":
            raise self.error("atomic groups are not supported", start)
        if char == "(":
            raise self.error("conditional groups are not supported", start)
        if char in _FLAG_CHARS:
            raise self.error("inline flags are not supported", start)
        raise self.error(f"unknown extension ?{char}", start)

    def group_name(self) -> None:
        name_start = self.pos
        end = self.pattern.find(">", self.pos)
        if end < 0:
            raise self.error("missing >, unterminated name", name_start)
        name = self.pattern[name_start:end]
        if not name:
            raise self.error("missing group name", name_start)
        if not name.isidentifier():
            raise self.error(f"bad character in group name {name!r}", name_start)
        if name in self.group_names:
            raise self.error(f"redefinition of group name {name!r}", name_start)
        self.group_names.add(name)
        self.pos = end + 1

    def char_class(self, start: int) -> ir.Node:
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        ranges: Ranges = []
        first = True
        while True:
            char = self.peek()
            if char is None:
                raise self.error("unterminated character set", start)
            item_start = self.pos
            self.pos += 1
            if char == "]" and not first:
                break
            first = False
            low = self.class_escape(item_start) if char == "\\" else [(ord(char), ord(char))]
            if self.peek() == "-":
                self.pos += 1
                that = self.peek()
                if that is None:
                    raise self.error("unterminated character set", start)
                if that == "]":
                    self.pos += 1
                    ranges += low + [(0x2D, 0x2D)]
                    break
                that_start = self.pos
                self.pos += 1
                high = self.class_escape(that_start) if that == "\\" else [(ord(that), ord(that))]
                text = self.pattern[item_start:self.pos]
                if len(low) != 1 or low[0][0] != low[0][1] or len(high) != 1 or high[0][0] != high[0][1]:
                    raise self.error(f"bad character range {text}", item_start)
                if high[0][0] < low[0][0]:
                    raise self.error(f"bad character range {text}", item_start)
                ranges.append((low[0][0], high[0][0]))
            else:
                ranges += low
        if self.ignore_case:
            return self.folded(_complement(ranges) if negate else ranges, start)
        return _class_node(ir.merged_ranges(ranges), negate)

    def folded(self, ranges: Ranges, start: int) -> ir.Node:
        """The atom read from `start` to `pos` under `re.IGNORECASE`, given the code points it matches without it."""
        return _class_node(fold_ranges(ranges, self.pattern[start:self.pos]), False)

    def class_escape(self, start: int) -> Ranges:
        """An escape inside `[...]` (`pos` is just past the backslash): ranges of code points."""
        char = self.peek()
        if char is None:
            raise self.error("bad escape (end of pattern)", start)
        if char == "b":
            self.pos += 1
            return [(0x08, 0x08)]
        if char in "dwsDWS":
            self.pos += 1
            return _category(char)
        if char in _OCTDIGITS:
            digits = self.take(_OCTDIGITS, 3)
            value = int(digits, 8)
            if value > 0o377:
                raise self.error(f"octal escape value \\{digits} outside of range 0-0o377", start)
            return [(value, value)]
        if char in _DIGITS:
            raise self.error(f"bad escape \\{char}", start)
        code = self.common_escape(start)
        return [(code, code)]

    def escape(self, start: int) -> ir.Node:
        """An escape outside a class (`pos` is just past the backslash)."""
        node = self.plain_escape(start)
        letter = self.pattern[start + 1]
        if not self.ignore_case or letter in "dDsS":
            return node
        if letter in "wW":
            return self.folded(_category(letter), start)
        text = literal_bytes(node)
        return self.folded([] if text is None else [(ord(text.decode("utf-8")),) * 2], start)

    def plain_escape(self, start: int) -> ir.Node:
        """An escape outside a class, as it reads without `re.IGNORECASE`."""
        char = self.peek()
        if char is None:
            raise self.error("bad escape (end of pattern)", start)
        if char in _ANCHOR_ESCAPES:
            raise self.error(f"{_ANCHOR_ESCAPES[char]} is not supported", start)
        if char in "dwsDWS":
            self.pos += 1
            return _class_node(tuple(_category(char)), False)
        if char == "0":
            value = int(self.take(_OCTDIGITS, 3), 8)
            return _char(value)
        if char in _DIGITS:
            digits = self.pattern[self.pos:self.pos + 3]
            if len(digits) == 3 and all(digit in _OCTDIGITS for digit in digits):
                self.pos += 3
                value = int(digits, 8)
                if value > 0o377:
                    raise self.error(f"octal escape value \\{digits} outside of range 0-0o377", start)
                return _char(value)
            raise self.error("backreferences are not supported", start)
        return _char(self.common_escape(start))

    def common_escape(self, start: int) -> int:
        """Escapes shared by both contexts: `\\n`-style, `\\x \\u \\U \\N{...}`, escaped punctuation."""
        char = self.pattern[self.pos]
        self.pos += 1
        if char in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[char]
        widths = {"x": 2, "u": 4, "U": 8}
        if char in widths:
            digits = self.take(_HEXDIGITS, widths[char])
            if len(digits) != widths[char]:
                raise self.error(f"incomplete escape \\{char}{digits}", start)
            value = int(digits, 16)
            if value > ir.MAX_UNICODE:
                raise self.error(f"bad escape \\{char}{digits}", start)
            return value
        if char == "N":
            return self.named_char(start)
        if char in _ASCII_LETTERS:
            raise self.error(f"bad escape \\{char}", start)
        return ord(char)

    def named_char(self, start: int) -> int:
        if self.peek() != "{":
            raise self.error("missing {", self.pos)
        end = self.pattern.find("}", self.pos)
        if end < 0 or end == self.pos + 1:
            raise self.error("missing character name", self.pos)
        name = self.pattern[self.pos + 1:end]
        try:
            value = ord(unicodedata.lookup(name))
        except (KeyError, UnicodeEncodeError):  # a lone surrogate in the name cannot even be looked up
            raise self.error(f"undefined character name {name!r}", start) from None
        self.pos = end + 1
        return value

    def take(self, allowed: str, limit: int) -> str:
        """Consume up to `limit` characters from `allowed` and return them."""
        begin = self.pos
        end = min(len(self.pattern), begin + limit)
        while self.pos < end and self.pattern[self.pos] in allowed:
            self.pos += 1
        return self.pattern[begin:self.pos]


def _anchor_leaf(anchor: Anchor) -> ir.Node:
    """An anchor standing as an IR leaf in the parser's output; `split_anchors` removes every one."""
    return cast(ir.Node, anchor)


def _char(code: int) -> ir.Node:
    """One code point as its UTF-8 bytes (a lone surrogate has none: the empty language)."""
    if ir.SURROGATES[0] <= code <= ir.SURROGATES[1]:
        return ir.NOTHING
    return ir.literal(chr(code))


def parse_regex(pattern: str, *, ignore_case: bool = False, dot_all: bool = False) -> ir.Node:
    """Parse a Python `re` pattern (matched whole, like `re.fullmatch`) into the byte-level IR, read as under
    `re.IGNORECASE` / `re.DOTALL` when asked (Lark's `/.../i` and `/.../s`).

    Raises `RegexError` with the position for malformed or unsupported syntax.
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be str, not {type(pattern).__name__}")
    return _Parser(pattern, ignore_case=ignore_case, dot_all=dot_all).parse()


def parse_anchored(pattern: str) -> AnchoredParts:
    """Parse a Python `re` pattern whose `^` / `$` may stand anywhere, split by the anchors a match uses.

    `^` asserts the text start and `$` the text end only (ECMA-262 without multiline; Python's `$`
    would also hold before a final newline).  Raises `RegexError` like `parse_regex`, and also when
    the anchors combine into an expression too deeply nested to compile.
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be str, not {type(pattern).__name__}")
    node = _Parser(pattern, anchors=True).parse()
    try:
        return split_anchors(node)
    except CompileError as exc:
        raise RegexError(str(exc), pattern, 0) from exc
