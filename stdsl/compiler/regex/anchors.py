"""`^` and `$` anywhere in a searched pattern, compiled exactly to plain IR.

Under search semantics (ECMA-262 without the multiline flag, as JSON Schema's `pattern`) a text
matches when some substring is matched by a path through the pattern whose `^` assertions sit
at text position 0 and whose `$` assertions sit at the text end.  A `^` can therefore only hold
at the very start of the matched substring (and then the substring starts the text), a `$`
only at its very end.  Every sub-expression's language is split four ways by which anchors its
paths use (`AnchoredParts`); concatenation and repetition combine the parts exactly, and the
search language is `Σ*·free·Σ* | start·Σ* | Σ*·end | both`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stdsl.compiler import ir
from stdsl.compiler.ir import Node
from stdsl.errors import CompileError


@dataclass(frozen=True)
class Anchor:
    """An assertion leaf produced only by the anchor-aware parser: `^` (text start) or `$` (text end)."""

    at_end: bool


START = Anchor(at_end=False)
END = Anchor(at_end=True)


@dataclass(frozen=True)
class AnchoredParts:
    """A pattern's matched words split by the anchors their paths assert (each part is plain IR).

    `free`: no anchor; `start`: some `^` (the word begins the text); `end`: some `$` (the word
    ends the text); `both`: `^` and `$` (the word is the whole text).
    """

    free: Node
    start: Node
    end: Node
    both: Node

    def map(self, transform: Callable[[Node], Node]) -> AnchoredParts:
        """The same split with `transform` applied to every part."""
        return AnchoredParts(transform(self.free), transform(self.start), transform(self.end), transform(self.both))

    def search(self, anything: Node) -> Node:
        """Texts in which the pattern matches somewhere, `anything` being the language of any text."""
        return ir.alt(ir.seq(anything, self.free, anything), ir.seq(self.start, anything),
                      ir.seq(anything, self.end), self.both)


MAX_ADDED_DEPTH = 100
MAX_DEPTH = 320


def nullable(node: Node, memo: dict[int, tuple[Node, bool]] | None = None) -> bool:
    """Whether the plain IR `node` matches the empty string (`memo`, by node identity, for shared sub-trees)."""
    memo = {} if memo is None else memo
    found = memo.get(id(node))
    if found is not None:
        return found[1]
    if isinstance(node, ir.ByteSet):
        value = False
    elif isinstance(node, ir.Seq):
        value = all(nullable(item, memo) for item in node.items)
    elif isinstance(node, ir.Alt):
        value = any(nullable(item, memo) for item in node.items)
    elif isinstance(node, ir.Repeat):
        value = node.min == 0 or nullable(node.item, memo)
    elif isinstance(node, ir.Embedded):
        value = bool(node.accepting[0])
    else:
        raise TypeError(f"not a plain IR node: {type(node).__name__}")
    memo[id(node)] = (node, value)
    return value


def _minus(bound: int | None, amount: int) -> int | None:
    """An upper repetition bound lowered by `amount` (unbounded stays unbounded)."""
    return None if bound is None else bound - amount


def _at_least(bound: int | None, count: int) -> bool:
    """Whether an upper bound (None: unbounded) allows `count` repetitions."""
    return bound is None or bound >= count


_KEYS = ((False, False), (True, False), (False, True), (True, True))


def _as_tuple(parts: AnchoredParts) -> tuple[Node, Node, Node, Node]:
    return parts.free, parts.start, parts.end, parts.both


def _plain(node: Node) -> AnchoredParts:
    """The parts of anchor-free IR."""
    return AnchoredParts(node, ir.NOTHING, ir.NOTHING, ir.NOTHING)


def _unanchored(parts: AnchoredParts, node: Node | Anchor) -> bool:
    """Whether `parts` is the split of anchor-free `node` (its free part is `node` itself)."""
    return parts.free is node and parts.start == ir.NOTHING and parts.end == ir.NOTHING and parts.both == ir.NOTHING


class _Splitter:
    """One split: memo tables by node identity (parts share sub-trees) and the nesting guard."""

    def __init__(self) -> None:
        self.nullable_memo: dict[int, tuple[Node, bool]] = {}
        self.depth_memo: dict[int, tuple[Node, int, int]] = {}

    def empty_part(self, node: Node) -> Node:
        """The language of `node` cut down to the empty string."""
        return ir.EMPTY if nullable(node, self.nullable_memo) else ir.NOTHING

    def depth(self, node: Node) -> tuple[int, int]:
        """Nesting depth of `node` (levels added above the input's own anchor-free sub-trees, and in all).

        Refuses more than `MAX_ADDED_DEPTH` added or `MAX_DEPTH` levels in all: deeper IR would
        overflow the stack of the recursive passes downstream.
        """
        found = self.depth_memo.get(id(node))
        if found is not None:
            return found[1], found[2]
        children = (node.item,) if isinstance(node, ir.Repeat) else getattr(node, "items", ())
        depths = [self.depth(child) for child in children]
        added = 1 + max((d[0] for d in depths), default=0)
        total = 1 + max((d[1] for d in depths), default=0)
        if added > MAX_ADDED_DEPTH or total > MAX_DEPTH:
            raise CompileError("anchors (^ or $) combine into an expression nested too deeply "
                               f"(more than {MAX_ADDED_DEPTH} levels added or {MAX_DEPTH} in all)")
        self.depth_memo[id(node)] = (node, added, total)
        return added, total

    def plain(self, node: Node) -> AnchoredParts:
        """The parts of anchor-free `node`, which counts as one added level (its own nesting is the input's)."""
        if id(node) not in self.depth_memo:
            total = self.depth(node)[1]
            self.depth_memo[id(node)] = (node, 1, total)
        return _plain(node)

    def checked(self, parts: AnchoredParts) -> AnchoredParts:
        """`parts`, after the nesting guard (see `depth`)."""
        for node in _as_tuple(parts):
            self.depth(node)
        return parts

    def split(self, node: Node | Anchor) -> AnchoredParts:
        """The four parts of `node`; anchor-free sub-trees come back as they are (the same objects)."""
        if isinstance(node, Anchor):
            if node.at_end:
                return AnchoredParts(ir.NOTHING, ir.NOTHING, ir.EMPTY, ir.NOTHING)
            return AnchoredParts(ir.NOTHING, ir.EMPTY, ir.NOTHING, ir.NOTHING)
        if isinstance(node, (ir.Seq, ir.Alt)):
            split = [self.split(item) for item in node.items]
            if all(_unanchored(parts, item) for parts, item in zip(split, node.items)):
                return self.plain(node)
            if isinstance(node, ir.Alt):
                return self.checked(AnchoredParts(*(ir.alt(*(_as_tuple(parts)[k] for parts in split))
                                                    for k in range(4))))
            result = _plain(ir.EMPTY)
            run: list[Node] = []
            for parts, item in zip(split, node.items):
                if _unanchored(parts, item):
                    run.append(item)
                    continue
                if run:
                    result = self.concat(result, self.plain(ir.seq(*run)))
                    run = []
                result = self.checked(self.concat(result, parts))
            if run:
                result = self.concat(result, self.plain(ir.seq(*run)))
            return self.checked(result)
        if isinstance(node, ir.Repeat):
            body = self.split(node.item)
            if _unanchored(body, node.item):
                return self.plain(node)
            return self.checked(self.repeat(body, node.min, node.max))
        return self.plain(node)

    def concat(self, left: AnchoredParts, right: AnchoredParts) -> AnchoredParts:
        """Parts of `left · right`: a `^` on the right needs an empty left word, a `$` on the left an empty right."""
        out: dict[tuple[bool, bool], list[Node]] = {key: [] for key in _KEYS}
        for (left_start, left_end), left_node in zip(_KEYS, _as_tuple(left)):
            if left_node == ir.NOTHING:
                continue
            for (right_start, right_end), right_node in zip(_KEYS, _as_tuple(right)):
                if right_node == ir.NOTHING:
                    continue
                word = ir.seq(self.empty_part(left_node) if right_start else left_node,
                              self.empty_part(right_node) if left_end else right_node)
                out[(left_start or right_start, left_end or right_end)].append(word)
        return AnchoredParts(*(ir.alt(*out[key]) for key in _KEYS))

    def repeat(self, body: AnchoredParts, lo: int, hi: int | None) -> AnchoredParts:
        """Parts of `body{lo,hi}`.

        Iterations before the last one asserting `^` must match empty (and assert no `$`), iterations
        after the first one asserting `$` likewise; such empty iterations pad the count up to `lo`.
        ECMA-262's rule that an iteration past `lo` may not match empty leaves the language as it
        is: dropping such an iteration keeps the text and only removes assertions.
        """
        plain, start, end, both = _as_tuple(body)
        empty = self.empty_part
        pad_before = empty(plain) == ir.EMPTY or empty(start) == ir.EMPTY
        pad_after = empty(plain) == ir.EMPTY or empty(end) == ir.EMPTY
        free = ir.repeat(plain, lo, hi)
        starts: Node = ir.NOTHING
        ends: Node = ir.NOTHING
        whole: list[Node] = []
        if _at_least(hi, 1):
            starts = ir.seq(start, ir.repeat(plain, 0 if pad_before else max(lo - 1, 0), _minus(hi, 1)))
            ends = ir.seq(ir.repeat(plain, 0 if pad_after else max(lo - 1, 0), _minus(hi, 1)), end)
            if lo <= 1 or pad_before or pad_after:
                whole.append(both)
            whole.append(empty(both))
        if _at_least(hi, 2):
            middle_lo = 0 if pad_before or pad_after else max(lo - 2, 0)
            whole.append(ir.seq(start, ir.repeat(plain, middle_lo, _minus(hi, 2)), end))
            whole.append(ir.seq(empty(start), empty(end)))
        return AnchoredParts(free, starts, ends, ir.alt(*whole))


def split_anchors(node: Node | Anchor) -> AnchoredParts:
    """Split IR that may contain `Anchor` leaves into four anchor-free parts (see `AnchoredParts`).

    Linear in the IR for anchor-free sub-trees; raises `CompileError` when the anchors combine into
    parts nested too deeply (see `MAX_ADDED_DEPTH`, `MAX_DEPTH`).
    """
    return _Splitter().split(node)
