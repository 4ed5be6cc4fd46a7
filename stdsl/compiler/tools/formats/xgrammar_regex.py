"""A structural tag's `regex` as XGrammar reads it, written in Python `re` syntax (which the regex compiler reads).

XGrammar 0.2.9 reads the class escapes and `.` otherwise than Python: `\\d` is `[0-9]` and `\\w` `[a-zA-Z0-9_]`
(Python: any Unicode digit or word character), `\\s` is JavaScript's whitespace (Python's also takes `\\x1c`-`\\x1f`
and `\\x85`, not `\\ufeff`), and `.` any character, newline included.  Each is replaced by its explicit class, in a
class or out of one; the rest of the pattern is copied as it is (checked against `xgrammar`'s matcher in the tests).
"""

from __future__ import annotations

MAX_CODE_POINT = 0x10FFFF
_SPACES = ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
           (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF))
CLASSES = {"d": ((0x30, 0x39),), "w": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)), "s": _SPACES}
"""The code point ranges of `\\d`, `\\w` and `\\s` in XGrammar (their capitals are the complements)."""


def _complement(ranges: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    out, low = [], 0
    for start, end in ranges:
        if start > low:
            out.append((low, start - 1))
        low = end + 1
    return out + ([(low, MAX_CODE_POINT)] if low <= MAX_CODE_POINT else [])


def _body(ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> str:
    """Ranges as the inside of a Python character class, each end escaped (`\\UXXXXXXXX`)."""
    return "".join(f"\\U{start:08x}" if start == end else f"\\U{start:08x}-\\U{end:08x}" for start, end in ranges)


def _class_body(letter: str) -> str:
    ranges = CLASSES[letter.lower()]
    return _body(ranges if letter.islower() else _complement(ranges))


def xgrammar_regex(pattern: str) -> str:
    """`pattern` with XGrammar's `\\d \\w \\s \\D \\W \\S` and `.` spelled out as Python reads them alike."""
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            following = pattern[index + 1]
            if following in "dwsDWS":
                body = _class_body(following)
                out.append(body if in_class else f"[{body}]")
            else:
                out.append(char + following)
            index += 2
            continue
        if in_class:
            if char == "]" and not _opens_class(pattern, index):
                in_class = False
        elif char == "[":
            in_class = True
        elif char == ".":
            char = f"[{_body(((0, MAX_CODE_POINT),))}]"
        out.append(char)
        index += 1
    return "".join(out)


def _opens_class(pattern: str, index: int) -> bool:
    """Whether the `]` at `index` is a class's first member (`[]...]`, `[^]...]`), not its end, as Python reads it."""
    return pattern[index - 1] == "[" or (pattern[index - 1] == "^" and index >= 2 and pattern[index - 2] == "["
                                         and (index < 3 or pattern[index - 3] != "\\"))
