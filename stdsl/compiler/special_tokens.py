"""Special tokens inside constraints: each is spelled by private bytes that no UTF-8 text contains.

A grammar's `<|python_tag|>` must match exactly one token of the tokenizer, never ordinary text
that spells the same characters. The compiler reads bytes without a tokenizer, so a special token
named `name` is the byte string 0xFF · name · 0xFF (0xFF never occurs in UTF-8, and every automaton
reads UTF-8 text elsewhere). The runtime gives that token, and only it, this spelling in the
vocabulary of a constraint that uses special tokens, so masks, budgets and forced text treat it as
one token. Output shown to users drops the 0xFF marks: the token's own text stays.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable

from stdsl.errors import OptionError

SPECIAL_MARK = 0xFF
"""The byte that opens and closes a special token's spelling."""

_MARK = bytes([SPECIAL_MARK])


def special_spelling(name: str) -> bytes:
    """The private bytes of the special token whose text is `name`."""
    return _MARK + name.encode("utf-8") + _MARK


def token_markers(markers: Iterable[str], tokens: Container[str]) -> tuple[str, ...]:
    """The markers of a format (a thinking block's tags, a tool-call format's) that a tokenizer writes as one token:
    those among its special or added tokens (`tokens`: the names, such as a runtime tokenizer's `special_tokens`).

    The one text-or-token decision of every format: a marker the model was trained to emit as one token is
    written as that token (its private spelling, via `spelled`), so the mask admits that id and no text spells
    it there; any other marker stays text.
    """
    return tuple(marker for marker in dict.fromkeys(markers) if marker in tokens)


def visible_bytes(data: bytes) -> bytes:
    """`data` as users see it: each special token's spelling replaced by its text (the marks dropped)."""
    return data.replace(_MARK, b"") if _MARK in data else data


def special_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each special token's spelling in `data`, in order (an unclosed mark is not one)."""
    return [m.span() for m in re.finditer(rb"\xff[^\xff]*\xff", data)]


def spelled(text: str, names: Iterable[str]) -> bytes:
    """The bytes of user-visible `text` for a constraint that uses the special tokens `names`: every occurrence
    of a name's text (longest first) is read as that special token."""
    ordered = sorted(set(names), key=len, reverse=True)
    data = text.encode("utf-8")
    if not ordered:
        return data
    pattern = re.compile(b"|".join(re.escape(name.encode("utf-8")) for name in ordered))
    return pattern.sub(lambda match: _MARK + match.group() + _MARK, data)


def output_bytes(data: object, names: Iterable[str]) -> bytes:
    """The bytes a constraint reads for an output given as text (`spelled` with the special tokens `names`) or
    as bytes (read as they are); anything else is an OptionError naming its type, never a bare TypeError."""
    if isinstance(data, str):
        return spelled(data, names)
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise OptionError("data", f"accepts() reads an output as str or bytes, not {type(data).__name__} ({data!r:.60})")
