"""The DFA of an expression holding long counted chains, without a subset construction over the chains.

A string with `maxLength: 1024` is a chain of 1,024 copies of a JSON character, about 20 DFA states each; the
subset construction over its Thompson NFA spends some microseconds of Python per state, and a schema with a few
such strings spends most of its compile there (issue 36's slow tail).  Here each long chain (a counted repetition
of many copies whose body's end is deterministic, `counted.py`) is built directly as a DFA, the expression around
it is determinized with one placeholder symbol in its place (a small skeleton), and the chain is put back by
`substitution.subsets.substituted_classes`, which lays the chain's states out in bulk and runs the subset
construction only where the chain and the skeleton are both alive.  The result accepts the same language; the
caller shrinks it as before, so up to `MINIMIZE_UP_TO` states it is the same minimal table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.determinize import ClassDFA, determinize_expression, over_budget
from stdsl.compiler.automata.minimization.minimize import shrink
from stdsl.compiler.automata.nfa import longest_counts
from stdsl.compiler.automata.state_graph import distinct_values
from stdsl.compiler.automata.substitution.subsets import TooManyComposites, TooManyStates, substituted_classes

CHAIN_FROM = 64
"""A counted repetition of at least this many copies (its maximum; bounded ones only) is a chain laid out whole."""
CHAIN_ITEM_AT_MOST = 256
"""... when its item has at most this many distinct nodes and embedded states (a character, a short token); a
larger item's automaton is costly to build only to find its copies past the budget."""
EMBEDDED_FROM = 1024
"""An embedded automaton of at least this many states (a string's intersected bounds, an array item's DFA) is laid
out whole as well, instead of being copied into the NFA state by state and determinized again."""
COMPOSITES_AT_MOST = 4096
"""The substitution gives up past this many composite states (where a chain and the skeleton are both alive: each
costs a Python step, about twenty subset states' worth) and the subset construction decides instead."""
LAYOUT_PER_BUDGET_STATE = 4
"""The substitution lays out at most this many states per state of the budget (the pieces' copies, before the
result is trimmed and counted against the budget); past that the chain with the most copies is left in the skeleton
(an array item under `maxItems`), up to `LAYOUT_TRIES` skeletons, and then the subset construction decides."""
LAYOUT_TRIES = 3



@dataclass
class _Found:
    """The chains a walk laid out: `chains[key]` is the index of its piece in `pieces`, `sources[index]` the chain
    (a repetition or an embedded automaton); chains in `excluded` stay in the skeleton.  `built` holds every piece
    built so far by its key (None where there is none), kept from one layout try to the next: a try that leaves
    one chain in the skeleton would build all the others again (three tries over `o9787`'s arrays of long strings
    built its chains three times, 0.1 s)."""

    chains: dict[ir.Node, int]
    pieces: list[Automaton]
    sources: list[ir.Node]
    excluded: set[ir.Node]
    built: dict[ir.Node, Automaton | None]

    def add(self, key: ir.Node, source: ir.Node, piece: Automaton) -> int:
        index = self.chains[key] = len(self.pieces)
        self.pieces.append(piece)
        self.sources.append(source)
        return index

ChainBuilder = Callable[[ir.Repeat | ir.Embedded, int], Automaton | None]
"""The trim DFA of a counted repetition or an embedded automaton within a state budget, or None where it is not
built directly."""


def chained_dfa(node: ir.Node, max_states: int, alphabet: int, chain: ChainBuilder) -> ClassDFA | None:
    """The trim DFA of `node` over `alphabet` symbols with its long chains (those `chain` builds) substituted, or
    None when it holds none (the caller determinizes the expression itself).  Raises `StateBudgetError` past
    `max_states` states."""
    longest, largest = longest_counts(node)
    if longest < CHAIN_FROM and largest < EMBEDDED_FROM:
        return None
    excluded: set[ir.Node] = set()
    built: dict[ir.Node, Automaton | None] = {}
    for _ in range(LAYOUT_TRIES):
        chains: dict[ir.Node, int] = {}
        pieces: list[Automaton] = []
        sources: list[ir.Node] = []
        skeleton_node = _with_placeholders(node, alphabet, max_states, chain,
                                           _Found(chains, pieces, sources, excluded, built), {})
        if not pieces:
            return None
        skeleton = determinize_expression(skeleton_node, max_states, alphabet + len(pieces))
        table, accepting = shrink(skeleton.table, skeleton.accepting, all_reachable=True,
                                  in_bfs_order=skeleton.in_bfs_order)
        full = np.asarray(table, dtype=np.int32)[:, skeleton.byte_class]
        copies = _laid_out(full[:, alphabet:], pieces)
        if copies.sum() <= LAYOUT_PER_BUDGET_STATE * max_states:
            break
        excluded.add(sources[int(np.argmax(copies))])
    else:
        return None
    try:
        classes, final, symbol_class = substituted_classes(full, accepting, [[piece] for piece in pieces], alphabet,
                                                           COMPOSITES_AT_MOST, max_states)
    except TooManyComposites:
        return None
    except TooManyStates:
        raise over_budget(max_states) from None
    if len(classes) > max_states:
        raise over_budget(max_states)
    return ClassDFA(classes, final, symbol_class, all_live=True)


def _with_placeholders(node: ir.Node, alphabet: int, max_states: int, chain: ChainBuilder, found: _Found,
                       memo: dict[int, tuple[ir.Node, ir.Node]]) -> ir.Node:
    """`node` with each long chain replaced by its placeholder symbol (`alphabet + j` for `pieces[j]`); equal
    chains share one piece, shared sub-trees stay shared (`memo`, by identity).  A node found to hold no long chain
    is marked so (nodes are immutable), and byte sets and literals hold none: the next expression holding it (a
    pushdown body, then its item) skips it at once."""
    if _chain_free(node):
        return node
    known = memo.get(id(node))
    if known is not None:
        return known[1]
    result = node
    if isinstance(node, (ir.Repeat, ir.Embedded)):
        piece = found.chains.get(node)
        if piece is None and node not in found.excluded:
            built = _built(node, lambda: chain(node, max_states), found) if _long(node) else None
            if built is not None and not _reads_on(built):
                piece = found.add(node, node, built)
        if piece is not None:
            result = ir.ByteSet(((alphabet + piece, alphabet + piece),))
        elif isinstance(node, ir.Repeat):
            item = _with_placeholders(node.item, alphabet, max_states, chain, found, memo)
            result = node if item is node.item else ir.repeat(item, node.min, node.max)
    elif isinstance(node, ir.Seq):
        items = _fused(node.items, alphabet, max_states, chain, found)
        items = [_with_placeholders(item, alphabet, max_states, chain, found, memo) for item in items]
        if len(items) != len(node.items) or any(new is not old for new, old in zip(items, node.items)):
            result = ir.seq(*items)
    elif isinstance(node, ir.Alt):
        items = [_with_placeholders(item, alphabet, max_states, chain, found, memo) for item in node.items]
        if any(new is not old for new, old in zip(items, node.items)):
            result = ir.alt(*items)
    if result is node and not (isinstance(node, (ir.Repeat, ir.Embedded)) and _long(node)) and \
            all(_chain_free(item) for item in _children(node)):
        object.__setattr__(node, "_chain_free", True)
    memo[id(node)] = (node, result)
    return result


def _built(key: ir.Node, build: Callable[[], Automaton | None], found: _Found) -> Automaton | None:
    """The piece `build` makes for `key`, built once over the layout tries (`found.built`)."""
    if key not in found.built:
        found.built[key] = build()
    return found.built[key]


def _closed(item: ir.Repeat | ir.Embedded, after: ir.ByteSet, max_states: int, chain: ChainBuilder, found: _Found
            ) -> Automaton | None:
    """The chain `item` followed by the byte set `after` as one piece (`_then_byte`), or None; one piece per chain
    (by identity) and byte set, so that the substitution's searches kept per piece serve the next expression holding
    the same string (`substitution.subsets.piece_region`)."""
    built = _built(item, lambda: chain(item, max_states), found)
    if built is None:
        return None
    return _CLOSED.get((built,), lambda: _then_byte(built, after.ranges), (after.ranges,))


_CLOSED = caches.kind("long chains closed by a byte")
"""`_then_byte` per chain (by identity) and byte ranges (`_closed`)."""


def _chain_free(node: ir.Node) -> bool:
    """Whether `node` is known to hold no long chain: a byte set, a literal, or a node a walk marked."""
    return type(node) is ir.ByteSet or node.__dict__.get("_literal") is not None or "_chain_free" in node.__dict__


def _children(node: ir.Node) -> tuple[ir.Node, ...]:
    """The nodes `node` is made of (none for a leaf)."""
    if isinstance(node, (ir.Seq, ir.Alt)):
        return node.items
    return (node.item,) if isinstance(node, ir.Repeat) else ()


def _long(node: ir.Repeat | ir.Embedded) -> bool:
    """Whether `node` is long enough to be laid out whole: `CHAIN_FROM` copies of a small item, or `EMBEDDED_FROM`
    states of an automaton over bytes."""
    if isinstance(node, ir.Repeat):
        return node.max is not None and node.max >= CHAIN_FROM and _small(node.item)
    return len(node.accepting) >= EMBEDDED_FROM and np.shape(node.transitions)[1:] == (256,)


def _laid_out(placeholders: np.ndarray, pieces: list[Automaton]) -> np.ndarray:
    """How many states the substitution lays out for each piece: one copy per target of its placeholder (a piece
    under a counted repetition of the skeleton has many)."""
    return np.array([len(distinct_values(column[column >= 0])) * piece.num_states
                     for column, piece in zip(placeholders.T, pieces)], dtype=np.int64)


def _fused(items: tuple[ir.Node, ...], alphabet: int, max_states: int, chain: ChainBuilder, found: _Found
           ) -> list[ir.Node]:
    """A sequence's items with each long chain followed by a byte set (a string's closing quote) that no end of the
    chain reads replaced by one placeholder for both: the chain then ends only where nothing follows within it, so
    the substitution meets the skeleton once per chain instead of once per character."""
    out: list[ir.Node] = []
    index = 0
    while index < len(items):
        item = items[index]
        after = items[index + 1] if index + 1 < len(items) else None
        if isinstance(item, (ir.Repeat, ir.Embedded)) and type(after) is ir.ByteSet and after.ranges[-1][1] < 256 \
                and item not in found.excluded and _long(item):
            key = ir.Seq((item, after))
            piece = found.chains.get(key)
            if piece is None:
                closed = _built(key, lambda: _closed(item, after, max_states, chain, found), found)
                if closed is not None:
                    piece = found.add(key, item, closed)
            if piece is not None:
                out.append(ir.ByteSet(((alphabet + piece, alphabet + piece),)))
                index += 2
                continue
        out.append(item)
        index += 1
    return out


def _then_byte(piece: Automaton, ranges: tuple[tuple[int, int], ...]) -> Automaton | None:
    """`piece` followed by one byte of `ranges`, accepting only after it, or None when an accepting state of
    `piece` reads one of those bytes itself (the concatenation would not be deterministic).  Built on the class
    table: the classes of those bytes get a copy whose accepting states move to the new final state."""
    table = np.asarray(piece.class_transitions, dtype=np.int32)
    byte_class = np.asarray(piece.byte_class, dtype=np.int64)
    read = np.zeros(256, dtype=bool)
    for lo, hi in ranges:
        read[lo:hi + 1] = True
    read_classes = distinct_values(byte_class[read])
    ends = np.flatnonzero(piece.accepting)
    if (table[np.ix_(ends, read_classes)] >= 0).any():
        return None
    closing = table[:, read_classes]
    closing[ends] = len(table)
    closed = np.vstack([np.hstack([table, closing]), np.full((1, table.shape[1] + len(read_classes)), -1,
                                                                  dtype=np.int32)])
    classes = byte_class.copy()
    classes[read] = table.shape[1] + np.searchsorted(read_classes, byte_class[read])
    accepting = np.zeros(len(closed), dtype=bool)
    accepting[-1] = True
    return Automaton.from_classes(closed, accepting, classes)


def _reads_on(piece: Automaton) -> bool:
    """Whether some accepting state of `piece` has a move: laid out alone, each such state would be a composite
    with the skeleton (a chain is then laid out only with the byte that closes it, `_fused`)."""
    return bool((piece.live_count[piece.accepting] > 0).any())


def _small(item: ir.Node) -> bool:
    """Whether `item` has at most `CHAIN_ITEM_AT_MOST` distinct nodes and embedded states (counted up to there)."""
    count = 0
    for part in ir.distinct_nodes(item):
        count += len(part.accepting) if isinstance(part, ir.Embedded) else 1
        if count > CHAIN_ITEM_AT_MOST:
            return False
    return True
