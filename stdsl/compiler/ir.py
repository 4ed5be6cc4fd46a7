"""The one intermediate representation every front end lowers to: a regular expression over bytes.

Front ends (regex syntax, JSON Schema, templates) build these nodes with the helper
constructors below; `nfa.py` turns them into automata.  Code point classes are expanded
to UTF-8 byte sequences here, so everything downstream sees bytes only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from stdsl.compiler.deadline import check_deadline

MAX_UNICODE = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


class _Structural:
    """Structural equality with the hash computed once per node.

    Nodes are immutable trees that front ends compare and deduplicate often (`alt` drops repeated
    branches); a cached hash makes each comparison of unequal nodes O(1) instead of a deep walk.
    """

    _TAG = 0

    def _fields(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def _hash_key(self) -> Any:
        """What the hash is computed from: a function of `_fields()`, so equal nodes hash equal."""
        return self._fields()

    def __hash__(self) -> int:
        """The hash, computed on first ask and kept (a node is hashed at each `alt` and memo it meets: 28k asks for
        5k nodes in a Kubernetes schema's lowering), returned as kept (no `int()` call per ask)."""
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self._TAG, self._hash_key()))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __eq__(self, other: object) -> bool:
        """Structural equality; two distinct nodes found equal are linked (`_same`), so comparing them or any
        node they are part of again takes O(1) rather than a walk of the whole tree (exponential in a DAG
        whose equal subtrees are separate objects)."""
        if self is other:
            return True
        if type(other) is not type(self) or hash(self) != hash(other):
            return False
        assert isinstance(other, _Structural)
        mine, theirs = _representative(self), _representative(other)
        if mine is theirs:
            return True
        equal = mine._fields() == theirs._fields()
        if equal:
            theirs.__dict__["_same"] = mine
        return equal

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the cached hash (an embedded automaton hashes by identity, which another process changes)
        and without the equality link (a cache, not a part of the node)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_same")}


def _representative(node: _Structural) -> _Structural:
    """The node every node found equal to `node` links to (a union-find root), shortening the path on the way."""
    root = node
    while (parent := root.__dict__.get("_same")) is not None:
        root = parent
    while node is not root:
        parent = node.__dict__["_same"]
        node.__dict__["_same"] = root
        node = parent
    return root


@dataclass(frozen=True, eq=False)
class ByteSet(_Structural):
    """One byte from a set, given as sorted, disjoint, inclusive ranges of byte values."""

    ranges: tuple[tuple[int, int], ...]
    _TAG = 1

    def _fields(self) -> tuple[Any, ...]:
        return self.ranges


class Seq(_Structural):
    """Concatenation; `Seq(())` is the empty string.

    Immutable like the other nodes.  A literal (from `literal`) keeps its bytes and makes its items on
    first read: an enum of thousands of strings is read back as bytes and its items are never needed.
    """

    _TAG = 2
    __match_args__ = ("items",)

    def __init__(self, items: tuple[Node, ...]) -> None:
        self.__dict__["_items"] = items

    @property
    def items(self) -> tuple[Node, ...]:
        """The concatenated nodes."""
        known = self.__dict__.get("_items")
        if known is None:
            known = self.__dict__["_items"] = itemgetter(*self.__dict__["_literal"])(_SINGLE_BYTES)
        return known

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"IR nodes are immutable (cannot set {name!r})")

    def __repr__(self) -> str:
        return f"Seq(items={self.items!r})"

    def _fields(self) -> tuple[Any, ...]:
        return self.items

    def _hash_key(self) -> Any:
        """A literal hashes by its bytes (one C call, where its items would take a Python call each)."""
        data = literal_bytes(self)
        return self.items if data is None else data


@dataclass(frozen=True, eq=False)
class Alt(_Structural):
    """Alternation; `Alt(())` is the empty language."""

    items: tuple[Node, ...]
    _TAG = 3

    def _fields(self) -> tuple[Any, ...]:
        return self.items


@dataclass(frozen=True, eq=False)
class Repeat(_Structural):
    """`item` repeated between `min` and `max` times (`max=None`: unbounded)."""

    item: Node
    min: int
    max: int | None
    _TAG = 4

    def _fields(self) -> tuple[Any, ...]:
        return (self.item, self.min, self.max)


@dataclass(frozen=True, eq=False)
class Embedded:
    """An already-compiled DFA used as a sub-expression (e.g. a field intersected with its bound).

    `transitions` is (num_states, 256) with -1 for dead and start 0; `accepting` a bool array.
    Compares by identity.
    """

    transitions: Any
    accepting: Any


@dataclass(frozen=True, eq=False)
class EmbeddedGrammar:
    """A recursive grammar used as a sub-expression: its root body `main` and the bodies of its definitions
    (`names[i]`'s body is `bodies[i]`, called by the symbol 256 + i inside them).  A node holding one lowers to a
    pushdown (`compiler.pushdown.embedding`), never to one DFA.  `label` names it in errors, `nullable` says
    whether it matches the empty string.  Compares by identity."""

    label: str
    main: Node
    names: tuple[str, ...]
    bodies: tuple[Node, ...]
    nullable: bool


Node = ByteSet | Seq | Alt | Repeat | Embedded | EmbeddedGrammar

EMPTY: Node = Seq(())
NOTHING: Node = Alt(())
_SINGLE_BYTES = tuple(ByteSet(((b, b),)) for b in range(256))
_BYTE_OF_SINGLE = {id(node): byte for byte, node in enumerate(_SINGLE_BYTES)}
_SINGLE_BYTE_IDS = frozenset(_BYTE_OF_SINGLE)
_BYTE_SET_ONLY = frozenset((ByteSet,))


def merged_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Inclusive ranges sorted, with empty ones dropped and overlapping or touching ones joined."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def byte_set(ranges: Iterable[tuple[int, int]]) -> Node:
    """A set of bytes; the empty set is the empty language."""
    norm = merged_ranges(ranges)
    for lo, hi in norm:
        if lo < 0 or hi > 255:
            raise ValueError(f"byte range {lo}..{hi} outside 0..255")
    return ByteSet(norm) if norm else NOTHING


def seq(*items: Node) -> Node:
    """Concatenation, flattening nested sequences; the empty language absorbs (`NOTHING`, told by its type and
    its having no items: comparing each item to it cost a Python call per item, 7.8 -> 4.5 us for a 64-item row)."""
    flat: list[Node] = []
    for item in items:
        if type(item) is Alt and not item.items:
            return NOTHING
        if isinstance(item, Seq):
            flat.extend(item.items)
        else:
            flat.append(item)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Node) -> Node:
    """Alternation, flattening nested alternations and dropping empty languages and duplicates.

    Front ends build their IR through here, so the compile time limit is checked here too."""
    check_deadline("IR construction")
    flat: dict[Node, None] = {}
    for item in items:
        parts = item.items if isinstance(item, Alt) else (item,)
        for part in parts:
            flat.setdefault(part)
    return next(iter(flat)) if len(flat) == 1 else Alt(tuple(flat))


def repeat(item: Node, lo: int, hi: int | None) -> Node:
    """`item{lo,hi}`; `hi=None` is unbounded.  The empty string and the empty language are told by type and items
    (as `seq` tells the latter): comparing to them hashed every item, a walk of its parts on first ask."""
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"bad repetition bounds {{{lo},{hi}}}")
    if hi == 0 or (type(item) is Seq and item.__dict__.get("_items") == ()):
        return EMPTY
    if type(item) is Alt and not item.items:
        return EMPTY if lo == 0 else NOTHING
    if lo == 1 and hi == 1:
        return item
    return Repeat(item, lo, hi)


def optional(item: Node) -> Node:
    return repeat(item, 0, 1)


def star(item: Node) -> Node:
    return repeat(item, 0, None)


def plus(item: Node) -> Node:
    return repeat(item, 1, None)


def literal(text: str | bytes) -> Node:
    """The exact string (UTF-8 encoded when given as `str`)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if len(data) == 1:
        return _SINGLE_BYTES[data[0]]
    if not data:
        return EMPTY
    node = Seq.__new__(Seq)
    fields = node.__dict__
    fields["_literal"] = data = bytes(data)
    fields["_hash"] = hash((Seq._TAG, data))
    return node


def literal_bytes(node: Node) -> bytes | None:
    """The one string `node` matches when it is a sequence of single bytes (a literal), else None.

    A symbol past 255 (the pushdown's nonterminals ride in byte sets) is no byte, so its sequence is no literal.
    Told in C where it can be (a `Seq` is hashed by this): items that are all the shared single-byte nodes, or a
    sequence with an item that is no byte set at all; other byte sets are read one by one."""
    known = node.__dict__.get("_literal")
    if known is not None:
        return bytes(known)
    parts = node.items if isinstance(node, Seq) else (node,)
    if _SINGLE_BYTE_IDS.issuperset(map(id, parts)):
        return bytes(map(_BYTE_OF_SINGLE.__getitem__, map(id, parts)))
    if not _BYTE_SET_ONLY.issuperset(map(type, parts)):
        return None
    data = bytearray()
    for part in parts:
        if not isinstance(part, ByteSet) or len(part.ranges) != 1 or part.ranges[0][0] != part.ranges[0][1]:
            return None
        if part.ranges[0][0] > 255:
            return None
        data.append(part.ranges[0][0])
    return bytes(data)


def _utf8_ranges(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Split the code point range lo..hi (same UTF-8 length) into byte-range sequences."""
    n = len(chr(lo).encode("utf-8"))
    if n == 1:
        return [[(lo, hi)]]
    bits_tail = 6 * (n - 1)
    if n > 1 and lo >> bits_tail == hi >> bits_tail:
        lead = chr(lo).encode("utf-8")[0]
        mask = (1 << bits_tail) - 1
        return [[(lead, lead)] + t for t in _tail_ranges(lo & mask, hi & mask, n - 1)]
    out: list[list[tuple[int, int]]] = []
    mask = (1 << bits_tail) - 1
    first_top, last_top = lo >> bits_tail, hi >> bits_tail
    if lo & mask:
        out += _utf8_ranges(lo, (first_top << bits_tail) | mask)
        first_top += 1
    if (hi & mask) != mask:
        tail_part = _utf8_ranges(last_top << bits_tail, hi)
        last_top -= 1
    else:
        tail_part = []
    if first_top <= last_top:
        a = chr(first_top << bits_tail).encode("utf-8")
        b = chr((last_top << bits_tail) | mask).encode("utf-8")
        out.append([(a[0], b[0])] + [(0x80, 0xBF)] * (n - 1))
    return out + tail_part


def _tail_ranges(lo: int, hi: int, k: int) -> list[list[tuple[int, int]]]:
    """Continuation-byte sequences (k bytes, 6 bits each) for the values lo..hi."""
    if k == 1:
        return [[(0x80 | lo, 0x80 | hi)]]
    shift = 6 * (k - 1)
    mask = (1 << shift) - 1
    top_lo, top_hi = lo >> shift, hi >> shift
    if top_lo == top_hi:
        return [[(0x80 | top_lo, 0x80 | top_lo)] + t for t in _tail_ranges(lo & mask, hi & mask, k - 1)]
    out: list[list[tuple[int, int]]] = []
    if lo & mask:
        out += [[(0x80 | top_lo, 0x80 | top_lo)] + t for t in _tail_ranges(lo & mask, mask, k - 1)]
        top_lo += 1
    tail: list[list[tuple[int, int]]] = []
    if (hi & mask) != mask:
        tail = [[(0x80 | top_hi, 0x80 | top_hi)] + t for t in _tail_ranges(0, hi & mask, k - 1)]
        top_hi -= 1
    if top_lo <= top_hi:
        out.append([(0x80 | top_lo, 0x80 | top_hi)] + [(0x80, 0xBF)] * (k - 1))
    return out + tail


_UTF8_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_UNICODE))


def codepoints(ranges: Iterable[tuple[int, int]], negate: bool = False) -> Node:
    """One character from a set of code point ranges, as UTF-8 byte sequences.

    Surrogates (U+D800..U+DFFF) have no UTF-8 encoding and are never matched.
    """
    norm = list(merged_ranges(ranges))
    for lo, hi in norm:
        if lo < 0 or hi > MAX_UNICODE:
            raise ValueError(f"code point range {lo:#x}..{hi:#x} outside Unicode")
    if negate:
        comp: list[tuple[int, int]] = []
        prev = 0
        for lo, hi in norm:
            if lo > prev:
                comp.append((prev, lo - 1))
            prev = hi + 1
        if prev <= MAX_UNICODE:
            comp.append((prev, MAX_UNICODE))
        norm = comp
    cut: list[tuple[int, int]] = []
    for lo, hi in norm:
        for s_lo, s_hi in ((lo, min(hi, SURROGATES[0] - 1)), (max(lo, SURROGATES[1] + 1), hi)):
            if s_lo <= s_hi:
                cut.append((s_lo, s_hi))
    branches: list[Node] = []
    single: list[tuple[int, int]] = []
    for lo, hi in cut:
        for b_lo, b_hi in _UTF8_BOUNDS:
            a, b = max(lo, b_lo), min(hi, b_hi)
            if a > b:
                continue
            for parts in _utf8_ranges(a, b):
                if len(parts) == 1:
                    single.append(parts[0])
                else:
                    branches.append(seq(*(ByteSet((r,)) for r in parts)))
    head = [byte_set(single)] if single else []
    return alt(*head, *branches)


def any_char(exclude_newline: bool = False) -> Node:
    """Any Unicode scalar value (optionally not `\\n`), UTF-8 encoded."""
    return codepoints([(0x0A, 0x0A)], negate=True) if exclude_newline else codepoints([(0, MAX_UNICODE)])


def to_pattern(node: Node) -> str:
    """A Python `re` pattern over latin-1-decoded bytes matching the same language (a test oracle)."""
    if isinstance(node, ByteSet):
        parts = []
        for lo, hi in node.ranges:
            parts.append(f"\\x{lo:02x}" if lo == hi else f"\\x{lo:02x}-\\x{hi:02x}")
        return "[" + "".join(parts) + "]"
    if isinstance(node, (Embedded, EmbeddedGrammar)):
        raise ValueError("an embedded automaton or grammar has no regex form")
    if isinstance(node, Seq):
        return "(?:" + "".join(to_pattern(i) for i in node.items) + ")"
    if isinstance(node, Alt):
        return "(?:" + "|".join(to_pattern(i) for i in node.items) + ")" if node.items else "(?!)"
    upper = "" if node.max is None else str(node.max)
    return f"(?:{to_pattern(node.item)}){{{node.min},{upper}}}"


def size(node: Node) -> int:
    """Number of nodes, counting repetitions once (for error messages and budgets)."""
    if isinstance(node, ByteSet):
        return 1
    if isinstance(node, Embedded):
        return len(node.accepting)
    if isinstance(node, EmbeddedGrammar):
        return size(node.main) + sum(size(body) for body in node.bodies)
    if isinstance(node, Repeat):
        return 1 + size(node.item)
    return 1 + sum(size(i) for i in node.items)


def distinct_nodes(node: Node, into_repeats: bool = True) -> Iterator[Node]:
    """Every node reachable from `node`, each shared subtree once (by identity), parents before children.

    Without `into_repeats` a repetition's item is not entered (a caller that counts its copies itself).
    """
    seen: set[int] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, Repeat):
            if into_repeats:
                pending.append(current.item)
        elif isinstance(current, (Seq, Alt)):
            pending.extend(current.items)


def structure_text(node: Node) -> str | None:
    """The node's structure written out, the same in every process (an embedded automaton by its tables), to tell
    exactly whether an artifact built ahead and shipped was built from this node; None for a node holding a
    recursive grammar.  Text rather than a digest: comparing it is exact, and a cold process loads no hash module
    (OpenSSL's import cost 3 ms, more than the rest of a small schema's compile)."""
    lines: list[str] = []
    number: dict[int, int] = {}
    pending: list[tuple[Node, bool]] = [(node, False)]
    while pending:
        current, expanded = pending.pop()
        if id(current) in number:
            continue
        if isinstance(current, EmbeddedGrammar):
            return None
        children: tuple[Node, ...] = ()
        if isinstance(current, Repeat):
            children = (current.item,)
        elif isinstance(current, (Seq, Alt)):
            children = current.items
        if not expanded and children:
            pending.append((current, True))
            pending.extend((child, False) for child in children)
            continue
        part: tuple[Any, ...]
        if isinstance(current, ByteSet):
            part = ("B", current.ranges)
        elif isinstance(current, Embedded):
            part = ("E", current.transitions.shape, current.transitions.astype("<i8").tobytes(),
                    current.accepting.astype(bool).tobytes())
        elif isinstance(current, Repeat):
            part = ("R", number[id(current.item)], current.min, current.max)
        else:
            part = ("S" if isinstance(current, Seq) else "A", tuple(number[id(child)] for child in children))
        number[id(current)] = len(number)
        lines.append(repr(part))
    return "\n".join(lines)


__all__: Sequence[str] = [
    "ByteSet", "Embedded", "EmbeddedGrammar", "Seq", "Alt", "Repeat", "Node", "EMPTY", "NOTHING", "byte_set", "seq",
    "alt", "repeat", "optional", "star", "plus", "literal", "literal_bytes", "codepoints", "any_char", "to_pattern",
    "size", "distinct_nodes", "merged_ranges", "structure_text",
]
