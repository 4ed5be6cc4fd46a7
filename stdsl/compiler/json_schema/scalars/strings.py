"""JSON strings (RFC 8259) as byte-level IR, counted and compared by decoded character.

A string is a sequence of *string units* (`string_units.py`): one decoded character in any
spelling JSON allows, never a lone surrogate escape, so `minLength`/`maxLength` count units.
Here: whole strings, names and their complements, `pattern` searches and the intersection of
the length, `pattern` and `format` languages of one string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from json.encoder import encode_basestring

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.build import embedded_leaf, product_operands
from stdsl.compiler.automata.ops import intersect
from stdsl.compiler.ir import Node
from stdsl.compiler.json_schema.scalars.formats import format_body, unsupported_format_message
from stdsl.compiler.json_schema.scalars.name_complement import name_complement, plain_names
from stdsl.compiler.json_schema.scalars.string_units import (
    FORBIDDEN_RAW,
    canonical_unit_except,
    char_trie,
    string_unit,
)
from stdsl.compiler.json_schema.schema_merge import patterns_of
from stdsl.compiler.regex.parser import parse_anchored
from stdsl.errors import CompileError, EmptyLanguageError, RegexError, SchemaError, StateBudgetError

QUOTE = ir.literal('"')


def json_string(min_length: int = 0, max_length: int | None = None) -> Node:
    """A quoted JSON string whose decoded length (in characters) is within min..max."""
    return ir.seq(QUOTE, ir.repeat(string_unit(), min_length, max_length), QUOTE)


def string_literal(value: str) -> Node:
    """The canonical compact spelling of one string (raw UTF-8, escapes only where JSON requires them)."""
    return ir.literal(canonical_string(value))


def canonical_string(value: str) -> str:
    """The spelling `json.dumps(value, ensure_ascii=False)` gives, which `string_literal` accepts; a lone
    surrogate, which has no UTF-8 bytes, is spelled as its `\\uXXXX` escape (what JSON writes for it).
    `encode_basestring` is what `json.dumps` calls for a string; an ASCII spelling holds no surrogate."""
    spelled = encode_basestring(value)
    if spelled.isascii():
        return spelled
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", spelled)


def string_not_in(names: Iterable[str]) -> Node:
    """A quoted JSON string in its canonical spelling (`canonical_string`, as declared keys are written) whose
    value is none of `names`.

    Built as a trie over characters: at each trie node the next character either leaves the trie (then
    anything may follow) or follows a child; the string may end unless the node is a name.  Only the
    canonical spelling is read, so each trie node is one state (with every spelling, each also held the
    partial escapes that could still spell a child: about six times the states).  Printable ASCII names (the
    usual keys) get that trie's minimal DFA written out directly (`name_complement`).
    Kept per name set: a large schema asks again for every object declaring the same names.
    """
    return _string_not_in(tuple(sorted(set(names))))


@lru_cache(maxsize=1)
def _any_rest() -> Node:
    """Any canonical characters after a string has left the name trie (built on first use, not at import)."""
    return ir.star(canonical_unit_except(()))


@lru_cache(maxsize=1024)
def _string_not_in(names: tuple[str, ...]) -> Node:
    """`string_not_in` of a sorted tuple of distinct names."""
    written = name_complement(names) if plain_names(names) else None
    return ir.seq(QUOTE, _outside(char_trie(names)) if written is None else written, QUOTE)


def _outside(trie: dict) -> Node:
    """Canonical spellings of character sequences that are no name stored under this trie node (a surrogate,
    which no accepted string holds, ends a name's path)."""
    any_rest = _any_rest()
    children = [c for c in trie if c is not None and not 0xD800 <= ord(c) <= 0xDFFF]
    parts: list[Node] = [] if None in trie else [ir.EMPTY]
    parts.append(ir.seq(canonical_unit_except(children), any_rest))
    for ch in children:
        parts.append(ir.seq(ir.literal(canonical_string(ch)[1:-1]), _outside(trie[ch])))
    return ir.alt(*parts)


PLAIN_TEXT_RANGES = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0xFF))


def _map_byte_sets(node: Node, leaf: Callable[[ir.ByteSet], Node], memo: dict[int, tuple[Node, Node]],
                   what: str) -> Node:
    """`node` with every byte set replaced by `leaf(byte set)`; shared sub-trees stay shared (`memo`, by identity)."""
    found = memo.get(id(node))
    if found is not None:
        return found[1]
    if isinstance(node, ir.ByteSet):
        result = leaf(node)
    elif isinstance(node, ir.Seq):
        result = ir.seq(*(_map_byte_sets(i, leaf, memo, what) for i in node.items))
    elif isinstance(node, ir.Alt):
        result = ir.alt(*(_map_byte_sets(i, leaf, memo, what) for i in node.items))
    elif isinstance(node, ir.Repeat):
        result = ir.repeat(_map_byte_sets(node.item, leaf, memo, what), node.min, node.max)
    else:
        raise CompileError(f"an embedded automaton cannot be {what}")
    memo[id(node)] = (node, result)
    return result


def _clipped(ranges: Sequence[tuple[int, int]], allowed: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of byte `ranges` inside the `allowed` ranges."""
    return [(max(a, lo), min(b, hi)) for a, b in ranges for lo, hi in allowed if max(a, lo) <= min(b, hi)]


def restrict_to_plain_text(node: Node, memo: dict[int, tuple[Node, Node]] | None = None) -> Node:
    """The language of `node` (UTF-8 text) minus strings containing `"`, `\\` or control characters.

    Those bytes are ASCII and never occur inside a multi-byte UTF-8 sequence, so deleting them
    from every byte set intersects exactly; the result spells each character raw inside a JSON string.
    Sub-trees shared in `node` stay shared in the result (`memo`, by identity, may span several calls).
    """
    return _map_byte_sets(node, lambda leaf: ir.byte_set(_clipped(leaf.ranges, PLAIN_TEXT_RANGES)),
                          {} if memo is None else memo, "restricted to plain text")


def escaped_spelling(node: Node, memo: dict[int, tuple[Node, Node]] | None = None) -> Node:
    """The language of `node` (UTF-8 text) as JSON string content: `"`, `\\` and control characters spelled
    with every JSON escape of theirs, other characters raw.

    Those characters are ASCII and never occur inside a multi-byte UTF-8 sequence, so replacing them
    in every byte set is exact for them; other characters keep only their raw spelling.
    """

    def spell(leaf: ir.ByteSet) -> Node:
        kept = ir.byte_set(_clipped(leaf.ranges, PLAIN_TEXT_RANGES))
        special = tuple(_clipped(leaf.ranges, FORBIDDEN_RAW))
        return ir.alt(kept, string_unit(special)) if special else kept

    return _map_byte_sets(node, spell, {} if memo is None else memo, "spelled as JSON string content")


ECMA_SPACE = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
ECMA_CLASSES = {"d": "0-9", "w": "A-Za-z0-9_", "s": ECMA_SPACE}
ECMA_DOT = "[^\\n\\r\\u2028\\u2029]"


def ecma_to_python(pattern: str, where: str) -> str:
    """Rewrite ECMA-262 `\\d \\w \\s .` (ASCII digits/word, ECMA spaces, no line terminators) for Python `re`."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            letter = pattern[i + 1]
            if letter.lower() in ECMA_CLASSES:
                body = ECMA_CLASSES[letter.lower()]
                if in_class and letter.isupper():
                    raise SchemaError(f"negated class escape \\{letter} inside [...] is not supported", where)
                out.append(body if in_class else f"[{'^' if letter.isupper() else ''}{body}]")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            if pattern[i + 1:i + 2] == "]" or pattern[i + 1:i + 3] == "^]":
                raise SchemaError("empty or negated-empty character classes ([] / [^]) are not supported", where)
            in_class = True
        elif char == ".":
            out.append(ECMA_DOT)
            i += 1
            continue
        out.append(char)
        i += 1
    return "".join(out)


@lru_cache(maxsize=256)
def pattern_search(pattern: str, where: str, plain: bool) -> Node:
    """Strings in which the ECMA-262 `pattern` matches somewhere (JSON Schema: not anchored).

    With `plain=False` the result is a JSON string body: the characters outside the match may
    be spelled any JSON way; inside the match `"`, `\\` and control characters take their escapes and
    every other character is written raw, which rejects only escaped spellings of ordinary characters.
    With `plain=True` it is the language of the decoded text itself (UTF-8).
    """
    try:
        parts = parse_anchored(ecma_to_python(pattern, where))
    except RegexError as exc:
        raise SchemaError(f"unsupported or invalid pattern {pattern!r}: {exc}", where) from exc
    if plain:
        return parts.search(ir.star(ir.any_char()))
    shared: dict[int, tuple[Node, Node]] = {}
    return parts.map(lambda part: escaped_spelling(part, shared)).search(ir.star(string_unit()))


MAX_PRODUCT_STATES = 200_000


def string_body(schema: dict, path: str, plain: bool = False) -> Node:
    """The characters between the quotes of a string satisfying minLength/maxLength/pattern/format.

    Each keyword gives one language; two or more are intersected as automata (product
    construction) and embedded.  `plain=True` gives the decoded text's language of a single
    pattern or format instead (used to check instances).
    """
    parts: list[Node] = []
    if "format" in schema:
        body = format_body(schema["format"], plain)
        if body is None:
            raise SchemaError(unsupported_format_message(schema["format"]), f"{path}/format")
        parts.append(body)
    for pattern in patterns_of(schema):
        parts.append(pattern_search(pattern, f"{path}/pattern", plain))
    min_length, max_length = int(schema.get("minLength", 0)), schema.get("maxLength")
    if max_length is not None and int(max_length) < min_length:
        return ir.NOTHING
    if not parts or min_length > 0 or max_length is not None:
        unit = ir.any_char() if plain else string_unit()
        parts.append(ir.repeat(unit, min_length, None if max_length is None else int(max_length)))
    if len(parts) == 1:
        return parts[0]
    if plain:
        raise ValueError("plain string languages are checked one keyword at a time")
    return _intersection(parts, path)


_INTERSECTIONS = caches.kind("string constraint intersections")
"""`_intersection` per tuple of string-body languages (top-level embedded leaves by identity, other nodes by
structure): a schema that gives many properties the same pattern and length bounds intersects them once, and
every such property embeds the same leaf.  A refusal is kept too (as its `_Refused` reason): a schema refused as one
DFA is compiled again as a pushdown, which asks for the same intersection."""


@dataclass(frozen=True)
class _Refused:
    """Why an intersection passed `MAX_PRODUCT_STATES` (the budget error's message, without the path)."""

    reason: str


def _intersection(parts: list[Node], path: str) -> Node:
    """The intersection of several string-body languages, as an embedded minimal automaton, built once per tuple of
    languages; a refusal is built once as well and raised again on each ask, naming the asking path."""
    leaves = tuple(part for part in parts if isinstance(part, ir.Embedded))
    shape = tuple(leaves.index(part) if isinstance(part, ir.Embedded) else part for part in parts)
    found = _INTERSECTIONS.get(leaves, lambda: _intersected(parts), shape)
    if isinstance(found, _Refused):
        raise StateBudgetError(f"string constraints at {path}: {found.reason}") from StateBudgetError(found.reason)
    return found


def _intersected(parts: list[Node]) -> Node | _Refused:
    """`_intersection` built: each language's automaton, then their product (or why it passed the budget)."""
    try:
        automata = product_operands(parts, MAX_PRODUCT_STATES)
        product = automata[0]
        for other in automata[1:]:
            product = intersect(product, other, MAX_PRODUCT_STATES)
    except EmptyLanguageError:
        return ir.NOTHING
    except StateBudgetError as error:
        return _Refused(str(error))
    return embedded_leaf(product, minimal=True)
