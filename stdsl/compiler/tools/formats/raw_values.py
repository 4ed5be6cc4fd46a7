"""Argument values of the formats that write each parameter apart: a string raw between delimiters, the rest JSON.

Which parameters are raw text is decided by the family's own parser (by the parameter schema's
`type`), so the grammar writes exactly what that parser reads back.  A raw string cannot carry
the keywords of a JSON string (pattern, length, format): those are refused, naming the path.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.not_containing import not_containing
from stdsl.errors import SchemaError

STRING_KEYWORDS = {"type", "description", "title", "default", "examples", "enum", "const"}
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_string_schema(schema: Any) -> bool:
    """Whether the schema's `type` is exactly "string" (how the XML-like parsers pick raw values)."""
    return isinstance(schema, Mapping) and schema.get("type") == "string"


def typing_hint(schema: Any) -> str:
    """What to add to a parameter whose family's parser finds no `type` beside its reference (a Pydantic enum or
    model writes `{"$ref": ...}` alone): the text to end a refusal with, or nothing."""
    if isinstance(schema, Mapping) and "$ref" in schema and "type" not in schema:
        return " (the parser reads the `type` written beside a `$ref`, not the one it points to: write it there)"
    return ""


def check_key(key: str, path: str, family: str) -> None:
    """Refuse a property name the family's call syntax cannot write unambiguously."""
    if not IDENTIFIER.match(key):
        raise SchemaError(f"the {family} call syntax writes parameter names bare; {key!r} is not an identifier "
                          "([A-Za-z_][A-Za-z0-9_]*)", path)


def raw_string_ir(schema: Mapping[str, Any], path: str, stops: Sequence[str], family: str,
                  excluded: str = "") -> ir.Node:
    """A string parameter written raw: one of its `enum`/`const` values, or any text without `stops` or `excluded`."""
    extra = sorted(set(schema) - STRING_KEYWORDS)
    if extra:
        raise SchemaError(f"the {family} call syntax writes strings raw and cannot enforce {extra[0]!r}", path)
    if "enum" not in schema and "const" not in schema:
        return not_containing(list(stops), excluded)
    values = schema["enum"] if "enum" in schema else [schema["const"]]
    writable = [v for v in values if isinstance(v, str) and not any(s in v for s in stops)
                and not set(excluded) & set(v)]
    if not writable:
        raise SchemaError(f"no value of this enum can be written raw in the {family} call syntax", path)
    return ir.alt(*(ir.literal(v) for v in writable))


_INTERSECTIONS = caches.kind("intersected values")
"""`intersection` per tuple of nodes (top-level embedded leaves by identity, held weakly; other nodes by structure,
where a leaf inside compares by identity too): every parameter of one type in every tool of a format intersects
the same value language with the same guards."""


def intersection(*nodes: ir.Node) -> ir.Node:
    """The IR of the strings every node accepts (an embedded product automaton), built once per tuple of nodes."""
    leaves = tuple(node for node in nodes if isinstance(node, ir.Embedded))
    shape = tuple(leaves.index(node) if isinstance(node, ir.Embedded) else node for node in nodes)
    return _INTERSECTIONS.get(leaves, lambda: _intersected(nodes), shape)


SMALL_GUARD = 64
"""A guard (text free of a few literals, unstripped text, not a word) of at most this many states is intersected
beside its start (`ops.intersect_beside_start`): every value state paired with the guard's start at once."""


def _literals(node: ir.Node) -> list[bytes] | None:
    """The texts of a literal or an alternative of literals (an enum written raw), else None."""
    texts = [ir.literal_bytes(item) for item in (node.items if isinstance(node, ir.Alt) else (node,))]
    return None if any(text is None for text in texts) else [text for text in texts if text is not None]


def _intersected(nodes: Sequence[ir.Node]) -> ir.Node:
    """The strings every node accepts.  An enum's literals are kept where every guard accepts them (the same
    language as the product, with no product: at 400 random tools the enums' products were 0.11 s of CPU); otherwise
    the product of the nodes' automata, trimmed but not minimized where the guard is small: a minimal value's
    product with a guard that leaves its start only inside a begun literal measured minimal already (the 400
    random tools of `benchmarks/tool_compile.py`: the same 43,261 states either way), and the Hopcroft pass was
    half the product's cost.  The leaf is marked as built (no second pass), as `shrink` leaves a large DFA."""
    from stdsl.compiler.automata.build import build_automaton, embedded_leaf
    from stdsl.compiler.automata.ops import intersect, intersect_beside_start

    texts = _literals(nodes[0])
    if texts is not None:
        guards = [build_automaton(node) for node in nodes[1:]]
        kept = [text for text in texts if all(guard.accepts(text) for guard in guards)]
        if kept:
            return ir.alt(*(ir.literal(text) for text in kept))
    automaton = build_automaton(nodes[0])
    for node in nodes[1:]:
        guard = build_automaton(node)
        small = guard.num_states <= SMALL_GUARD
        automaton = intersect_beside_start(automaton, guard, minimal=False) if small else intersect(automaton, guard)
    return embedded_leaf(automaton, minimal=len(nodes) > 1)


@functools.cache
def _space_ranges() -> tuple[tuple[int, int], ...]:
    """The code points Python's `str.strip()` removes, as ranges."""
    spaces = [c for c in range(0x3100) if chr(c).isspace()]
    return tuple((c, c) for c in spaces)


_GUARDS = caches.kind("raw-value guards")
"""The minimal automaton of a guard (`unstripped`, `not_word`) as one IR leaf: a guard is intersected with a value
for every parameter of every tool, so its own subset construction is paid once, not at each intersection."""


def _minimal_leaf(node: ir.Node) -> ir.Embedded:
    """`node`'s minimal automaton as a read-only IR leaf."""
    from stdsl.compiler.automata.build import build_automaton, embedded_leaf

    automaton = build_automaton(node)
    automaton.transitions.setflags(write=False)
    return embedded_leaf(automaton, minimal=True)


def unstripped() -> ir.Embedded:
    """Texts that `str.strip()` leaves unchanged: empty, or no whitespace at either end (one leaf while cached, so
    the caches keyed by it compare it by identity)."""
    return _GUARDS.get((), _unstripped_leaf, ("unstripped",))


def _unstripped_leaf() -> ir.Embedded:
    edge = ir.codepoints(list(_space_ranges()), negate=True)
    return _minimal_leaf(ir.optional(ir.seq(edge, ir.optional(ir.seq(ir.star(ir.any_char()), edge)))))


def not_word(word: str) -> ir.Embedded:
    """Texts that are not `word` in any letter case (ASCII `word`), one leaf per word while cached (so the caches
    keyed by it compare it by identity)."""
    return _GUARDS.get((), lambda: _not_word_leaf(word), ("not word", word))


def _not_word_leaf(word: str) -> ir.Embedded:
    anything = ir.any_char()
    same = [ir.codepoints([(ord(c.lower()), ord(c.lower())), (ord(c.upper()), ord(c.upper()))]) for c in word]
    other = [ir.codepoints([(ord(c.lower()), ord(c.lower())), (ord(c.upper()), ord(c.upper()))], negate=True)
             for c in word]
    n = len(word)
    differs = [ir.seq(*same[:i], other[i], ir.repeat(anything, n - 1 - i, n - 1 - i)) for i in range(n)]
    return _minimal_leaf(ir.alt(ir.repeat(anything, 0, n - 1), ir.repeat(anything, n + 1, None), *differs))


EXACT_INTEGER = 2**53
"""Integers up to this magnitude are exact as doubles: a parser that reads a number through `float` keeps them."""


def read_as_double(schema: Mapping[str, Any], path: str, family: str) -> Mapping[str, Any]:
    """A number or integer parameter narrowed to ±2^53, where a parser that reads it through `float` (then `int`)
    gets back exactly the value written; refused where the schema allows no value there."""
    narrowed = dict(schema)
    low, high = schema.get("minimum"), schema.get("maximum")
    narrowed["minimum"] = -EXACT_INTEGER if not isinstance(low, (int, float)) else max(low, -EXACT_INTEGER)
    narrowed["maximum"] = EXACT_INTEGER if not isinstance(high, (int, float)) else min(high, EXACT_INTEGER)
    if narrowed["minimum"] > narrowed["maximum"]:
        raise SchemaError(f"the {family} parser reads numbers as doubles, exact only within ±2^53; this schema "
                          "allows no value there", path)
    return narrowed
