"""A pushdown body's subset construction kept per shape: the body with its call symbols renumbered 0, 1, ... in
increasing order, so that bodies differing only in which definitions they call share one construction.

A Kubernetes schema holds many definitions written alike that call different ones (an object of a `metadata` and a
`spec` calling two `#/definitions/...`): kb_233's 112 bodies left to the subset construction are 81 shapes.  The
same body under a wider alphabet (more definitions in the grammar) is the same shape too.

The renumbering keeps the call symbols in order and the bytes as they are, so the subset construction over the
shape meets the same subsets, numbers them alike (in breadth-first order over classes numbered by their first
symbol, and a symbol no set holds moves nowhere) and keeps the same byte classes: read through each symbol's class,
the table widened back to the body's alphabet (`_widened`: each call symbol reads its shape's symbol, every call
symbol the body does not read the dead class) is the one the body's own construction builds.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.build import determinized
from stdsl.compiler.automata.minimize import trim_in_bfs_order
from stdsl.compiler.automata.table_blocks import converted
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.pushdown.subsumed_literals import quoted_union, without_subsumed_literals

BodyDFA = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A body's trim DFA as `grammar._body_dfa` gives it: its table over classes, each symbol's class, its accepting
mask."""

CALLS_AT_MOST = 4096
"""A body reading more calls than this (counting a shared part once per place it is read from) is built on its own:
its key would grow with every place a shared part is read from."""
SHAPE_CACHE_BYTES = 16 << 20
"""Bytes the kept shapes' DFAs may hold together; a shape over a quarter of it is not kept (as `grammar`'s body
DFAs)."""
_SHAPES = caches.kind("pushdown body DFAs by shape", max_bytes=SHAPE_CACHE_BYTES)
"""`subset_body_dfa` per shape: (its DFA with a dead class, the dead class, the subset states its construction met)."""


Parts = tuple[Hashable, tuple[int, ...], bool]
"""A node's structure with its calls left out, the calls it reads in order, and whether it holds a quoted union
(`subsumed_literals.quoted_union`)."""
ShapeParts = dict[int, "Parts | None"]
"""`_shape_parts` of the nodes met so far, by identity: kept by the caller for the bodies of one grammar (a part
shared by several bodies is walked once) rather than on the nodes, whose attribute dictionaries would grow."""


def subset_body_dfa(body: ir.Node, max_states: int, alphabet: int, call_base: int,
                    parts: ShapeParts | None = None) -> BodyDFA:
    """`body`'s subset construction over `alphabet` symbols trimmed, in BFS order (`trim_in_bfs_order`), built once
    per shape (`call_shape`, its walk kept in `parts`), of the body less its subsumed quoted literals
    (`subsumed_literals`: the same language); a kept construction serves a smaller budget that its subset states
    fitted in."""
    shape = call_shape(body, call_base, {} if parts is None else parts)
    if shape is None:
        return subset_dfa(without_subsumed_literals(body, {}), max_states, alphabet)[0]
    canonical, calls, holds_union = shape
    kept = _SHAPES.find((), (canonical,))
    if kept is not None and kept[0][2] <= max_states:
        (table, symbol_class, accepting), dead, _ = kept[0]
        return table, _widened(symbol_class, dead, calls, alphabet, call_base), accepting
    built = without_subsumed_literals(body, {}) if holds_union else body
    found, subsets = subset_dfa(built, max_states, alphabet)
    table, symbol_class, accepting = found
    if sum(int(array.nbytes) for array in found) <= SHAPE_CACHE_BYTES // 4:
        shape_class = np.concatenate([symbol_class[:call_base], symbol_class[list(calls)]])
        with_dead, dead = _with_dead_class((table, shape_class, accepting))
        _SHAPES.put((), (with_dead, dead, subsets), (canonical,))
    return found


def subset_dfa(body: ir.Node, max_states: int, alphabet: int) -> tuple[BodyDFA, int]:
    """`body`'s subset construction over `alphabet` symbols trimmed, in BFS order, and the subset states it met."""
    dfa = determinized(body, max_states, alphabet)
    table, accepting = trim_in_bfs_order(dfa.table, dfa.accepting, all_reachable=True, all_live=dfa.all_live,
                                         in_bfs_order=dfa.in_bfs_order, dtype=np.int32)
    check_deadline("a pushdown definition's table")
    narrowed = converted(table, np.int32, "a pushdown definition's table")
    return (narrowed, np.asarray(dfa.byte_class, dtype=np.intp), accepting), len(dfa.accepting)


def call_shape(body: ir.Node, call_base: int, parts: ShapeParts) -> tuple[Hashable, tuple[int, ...], bool] | None:
    """A key equal for two bodies exactly where they are equal once their call symbols are renumbered `call_base` +
    0, 1, ... in increasing order, the call symbols `body` reads (sorted), and whether it holds a quoted union; None
    where it holds an embedded automaton over more than the bytes or a recursive grammar, or reads more than
    `CALLS_AT_MOST` calls.  The key is the body's structure with its calls left out (`_shape_parts`) and the rank
    of each call read, in order."""
    found = _shape_parts(body, call_base, parts)
    if found is None:
        return None
    structure, in_order, holds_union = found
    calls = tuple(sorted(set(in_order)))
    rank = {symbol: number for number, symbol in enumerate(calls)}
    return (structure, tuple(rank[symbol] for symbol in in_order)), calls, holds_union


def _shape_parts(node: ir.Node, call_base: int, parts: ShapeParts) -> Parts | None:
    """`node`'s structure with its call symbols left out (the node itself where it reads none; a byte set keeps
    its bytes and how many call symbols it holds), the call symbols it reads in the order a walk meets them
    (repeated where a part is), and whether it holds a quoted union, kept in `parts`; None as `call_shape`."""
    if id(node) in parts:
        return parts[id(node)]
    found: Parts | None = (node, (), False)
    if isinstance(node, ir.ByteSet):
        calls = _byte_set_calls(node, call_base)
        if calls:
            found = (("B", tuple((lo, min(hi, call_base - 1)) for lo, hi in node.ranges if lo < call_base),
                      len(calls)), calls, False)
    elif isinstance(node, ir.Embedded):
        found = (node, (), False) if np.shape(node.transitions)[1:] == (256,) else None
    elif isinstance(node, ir.EmbeddedGrammar):
        found = None
    elif "_literal" not in node.__dict__:
        children = (node.item,) if isinstance(node, ir.Repeat) else node.items
        structures: list[Hashable] = []
        in_order: list[int] = []
        holds_union = isinstance(node, ir.Alt) and quoted_union(node)
        for child in children:
            if type(child) is ir.ByteSet and (not child.ranges or child.ranges[-1][1] < call_base):
                structures.append(child)
                continue
            under = _shape_parts(child, call_base, parts)
            if under is None or len(in_order) + len(under[1]) > CALLS_AT_MOST:
                found = None
                break
            structures.append(under[0])
            in_order += under[1]
            holds_union = holds_union or under[2]
        else:
            if in_order:
                tag = (node.min, node.max) if isinstance(node, ir.Repeat) else type(node).__name__
                found = ((tag, tuple(structures)), tuple(in_order), holds_union)
            else:
                found = (node, (), holds_union)
    parts[id(node)] = found
    return found


def _byte_set_calls(node: ir.ByteSet, call_base: int) -> tuple[int, ...]:
    """The call symbols (from `call_base` on) a byte set holds, in increasing order."""
    return tuple(symbol for lo, hi in node.ranges if hi >= call_base for symbol in range(max(lo, call_base), hi + 1))


def _with_dead_class(dfa: BodyDFA) -> tuple[BodyDFA, int]:
    """`dfa` (read-only) and a class no state moves on: the first such class, else a column of dead moves added."""
    table, symbol_class, accepting = dfa
    dead_columns = np.flatnonzero((table < 0).all(axis=0))
    if len(dead_columns):
        dead = int(dead_columns[0])
    else:
        dead = table.shape[1]
        table = np.hstack([table, np.full((len(table), 1), -1, dtype=table.dtype)])
    for array in (table, symbol_class, accepting):
        array.flags.writeable = False
    return (table, symbol_class, accepting), dead


def _widened(symbol_class: np.ndarray, dead: int, calls: tuple[int, ...], alphabet: int, call_base: int
             ) -> np.ndarray:
    """Each of `alphabet` symbols' class in a shape's DFA: a byte's own, a call symbol the body reads its shape's
    symbol's, any other call symbol the dead class."""
    if len(symbol_class) == alphabet and all(symbol == call_base + number for number, symbol in enumerate(calls)):
        return symbol_class
    widened = np.full(alphabet, dead, dtype=np.intp)
    widened[:call_base] = symbol_class[:call_base]
    widened[list(calls)] = symbol_class[call_base:call_base + len(calls)]
    return widened
