"""Recursive grammars inside larger constraints: `ir.EmbeddedGrammar` leaves, merged into one pushdown.

A pushdown grammar keeps the root body and definitions it was compiled from (`PushdownGrammar.fragment`);
`grammar_leaf` carries them into a larger IR (a tool's arguments, a structural tag's content, a `%json` inside a
grammar).  Lowering an IR that holds such leaves gives each leaf's definitions fresh call numbers after the host's,
puts the leaf's root body in its place and compiles the whole with `compile_pushdown`, whose L(1) checks (C.12)
then cover the joins too.  An IR without a leaf is one DFA, exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.pushdown.grammar import (
    CALL_BASE,
    MAX_DEPTH,
    Definition,
    GrammarConflictError,
    PushdownGrammar,
    _body_dfa,
    compile_pushdown,
)
from stdsl.errors import CompileError

BodyTable = tuple[np.ndarray, np.ndarray]
"""A body's DFA over bytes and call symbols: its (states, 256 + calls) table (-1 dead, start 0) and accepting mask."""


def grammar_leaf(grammar: PushdownGrammar, label: str) -> ir.EmbeddedGrammar:
    """The IR leaf standing for `grammar`'s language inside a larger expression; `label` names it in errors."""
    if grammar.fragment is None:
        raise CompileError(f"{label}: this pushdown was not compiled in this process (its bodies are not kept), so "
                           "it cannot be embedded in another constraint")
    main, definitions = grammar.fragment
    return ir.EmbeddedGrammar(label, main, tuple(d.name for d in definitions), tuple(d.body for d in definitions),
                              bool(grammar.accepting[grammar.starts[0]]))


def holds_grammar(node: ir.Node) -> bool:
    """Whether `node` holds an `ir.EmbeddedGrammar` leaf (it then lowers to a pushdown).  Each shared subtree is
    walked once; byte sets and literals, which hold no leaf, are not entered (most of a `%json` value's nodes:
    `ir.distinct_nodes` made each literal's items and visited every byte, 4.5 ms of a 128-tool grammar)."""
    if type(node) is ir.EmbeddedGrammar:
        return True
    seen: set[int] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        kind = type(current)
        if kind is ir.Repeat:
            children: tuple[ir.Node, ...] = (current.item,)  # type: ignore[union-attr]
        elif (kind is ir.Seq or kind is ir.Alt) and "_literal" not in current.__dict__:
            children = current.items  # type: ignore[union-attr]
        else:
            continue
        for child in children:
            kind = type(child)
            if kind is ir.ByteSet or id(child) in seen:
                continue
            if kind is ir.EmbeddedGrammar:
                return True
            seen.add(id(child))
            if len(seen) % 4096 == 0:
                check_deadline("finding recursive grammars in an expression")
            pending.append(child)
    return False


def compile_embedding(node: ir.Node, *, max_states: int = DEFAULT_MAX_STATES,
                      max_depth: int = MAX_DEPTH) -> Automaton | PushdownGrammar:
    """`node`'s DFA, or the pushdown of its embedded grammars merged (`compile_merged`) when it holds any."""
    if not holds_grammar(node):
        return build_automaton(node, max_states=max_states)
    return compile_merged(node, (), max_states=max_states, max_depth=max_depth)


def compile_merged(main: ir.Node, definitions: Sequence[Definition], *, max_states: int = DEFAULT_MAX_STATES,
                   max_depth: int = MAX_DEPTH) -> PushdownGrammar:
    """`compile_pushdown` of a root body and definitions whose IR may hold embedded grammars: each leaf's
    definitions join the host's (renamed `label name`), its root body stands where the leaf stood.  An L(1)
    conflict that involves a leaf's definitions is raised naming the leaf and what to change."""
    merger = _Merger(len(definitions))
    joined_main, joined = merger.merge(main, definitions)
    try:
        return compile_pushdown(joined_main, joined, max_states=max_states, max_depth=max_depth)
    except GrammarConflictError as error:
        parts = sorted({merger.parts[name] for name in error.nonterminals if name in merger.parts})
        if not parts:
            raise
        raise GrammarConflictError(
            f"{', '.join(parts)}: this recursive grammar does not fit where it stands in the larger constraint "
            f"({error}); change the text right after it, or its rule, so that one next byte tells whether the rule "
            "goes on or ends", error.nonterminals) from None


class _Merger:
    """Renumbers the call symbols of embedded grammars after the host's definitions, each leaf once."""

    def __init__(self, host_definitions: int) -> None:
        self.base = host_definitions
        self.added: list[Definition] = []
        self.placed: dict[int, ir.Node] = {}
        self.parts: dict[str, str] = {}
        self._keep: list[ir.Node] = []

    def merge(self, main: ir.Node, definitions: Sequence[Definition]) -> tuple[ir.Node, list[Definition]]:
        memo: dict[int, ir.Node] = {}
        host = [Definition(d.name, self.rewrite(d.body, 0, memo)) for d in definitions]
        return self.rewrite(main, 0, memo), host + self.added

    def rewrite(self, node: ir.Node, shift: int, memo: dict[int, ir.Node]) -> ir.Node:
        """`node` with its call symbols moved up by `shift` and each embedded grammar replaced by its root body."""
        found = memo.get(id(node))
        if found is not None:
            return found
        check_deadline("merging embedded grammars")
        result: ir.Node
        if isinstance(node, ir.EmbeddedGrammar):
            result = self.place(node)
        elif isinstance(node, ir.ByteSet):
            result = _shifted_set(node, shift)
        elif isinstance(node, ir.Embedded):
            result = _shifted_table(node, shift)
        elif isinstance(node, ir.Repeat):
            item = self.rewrite(node.item, shift, memo)
            result = node if item is node.item else ir.repeat(item, node.min, node.max)
        elif "_literal" in node.__dict__:
            result = node
        else:
            items = tuple(self.rewrite(item, shift, memo) for item in node.items)
            unchanged = all(new is old for new, old in zip(items, node.items))
            result = node if unchanged else (ir.seq(*items) if isinstance(node, ir.Seq) else ir.alt(*items))
        memo[id(node)] = result
        self._keep.append(node)
        return result

    def place(self, leaf: ir.EmbeddedGrammar) -> ir.Node:
        """The leaf's root body renumbered; its definitions appended (once per leaf) under `label name`."""
        found = self.placed.get(id(leaf))
        if found is not None:
            return found
        first = len(self.added)
        shift = self.base + first
        names = [f"{leaf.label} {name}" for name in leaf.names]
        self.added.extend(Definition(name, ir.NOTHING) for name in names)
        for name in names:
            self.parts[name] = leaf.label
        memo: dict[int, ir.Node] = {}
        for index, (name, body) in enumerate(zip(names, leaf.bodies)):
            self.added[first + index] = Definition(name, self.rewrite(body, shift, memo))
        found = self.placed[id(leaf)] = self.rewrite(leaf.main, shift, memo)
        self._keep.append(leaf)
        return found


def _shifted_set(node: ir.ByteSet, shift: int) -> ir.Node:
    """A byte set with its call symbols (past 255) moved up by `shift`."""
    if not shift or not node.ranges or node.ranges[-1][1] < CALL_BASE:
        return node
    ranges: list[tuple[int, int]] = []
    for lo, hi in node.ranges:
        if hi < CALL_BASE:
            ranges.append((lo, hi))
        elif lo >= CALL_BASE:
            ranges.append((lo + shift, hi + shift))
        else:
            ranges += [(lo, CALL_BASE - 1), (CALL_BASE + shift, hi + shift)]
    return ir.ByteSet(tuple(ranges))


def _shifted_table(node: ir.Embedded, shift: int) -> ir.Node:
    """An embedded body DFA with its call columns (past 255) moved up by `shift`."""
    table = np.asarray(node.transitions)
    if not shift or table.shape[1] <= CALL_BASE:
        return node
    moved = np.full((table.shape[0], table.shape[1] + shift), -1, dtype=table.dtype)
    moved[:, :CALL_BASE] = table[:, :CALL_BASE]
    moved[:, CALL_BASE + shift:] = table[:, CALL_BASE:]
    return ir.Embedded(moved, node.accepting)


def flattened(leaf: ir.EmbeddedGrammar) -> ir.EmbeddedGrammar:
    """`leaf` with the grammars embedded in its own bodies merged into it (a leaf that holds no other leaf)."""
    merger = _Merger(len(leaf.bodies))
    main, definitions = merger.merge(leaf.main, [Definition(n, b) for n, b in zip(leaf.names, leaf.bodies)])
    if not merger.added:
        return leaf
    return ir.EmbeddedGrammar(leaf.label, main, tuple(d.name for d in definitions),
                              tuple(d.body for d in definitions), leaf.nullable)


def bodywise(leaf: ir.EmbeddedGrammar, change: Callable[[BodyTable, bool], BodyTable],
             max_states: int = DEFAULT_MAX_STATES) -> ir.EmbeddedGrammar:
    """`leaf` with each body's DFA (over bytes and call symbols) replaced by `change(table, is_root)`: a rewrite of
    the grammar's text that acts on each body apart (escaping bytes, keeping out literals), calls kept."""
    flat = flattened(leaf)
    alphabet = CALL_BASE + len(flat.bodies)
    changed = []
    for index, body in enumerate((flat.main, *flat.bodies)):
        table, symbol_class, accepting = _body_dfa(body, max_states, alphabet)
        changed.append(change((table[:, symbol_class], np.array(accepting)), index == 0))
    main, *bodies = (ir.Embedded(table, accepting) for table, accepting in changed)
    return ir.EmbeddedGrammar(flat.label, main, flat.names, tuple(bodies), bool(changed[0][1][0]))


def without_literals_in(leaf: ir.EmbeddedGrammar, literals: Sequence[str]) -> ir.EmbeddedGrammar:
    """`leaf`'s texts that contain none of `literals` (`guarded` by the not-containing automaton): for JSON this is
    exactly the intersection (a literal starts inside a string, and no string holds a call)."""
    from stdsl.compiler.not_containing import not_containing

    return guarded(leaf, build_automaton(not_containing(list(literals))))


def guarded(leaf: ir.EmbeddedGrammar, guard: Automaton) -> ir.EmbeddedGrammar:
    """`leaf`'s texts that `guard` accepts, each body intersected with `guard` on its own.

    A call is taken, and a called body ends, only where `guard` is back at its start state, so the bodies' runs
    of `guard` join into its run over the whole text: the result is sound, and exact when every call boundary
    leaves `guard` at its start (a literal kept out of JSON starts inside a string, and no string holds a call);
    otherwise it may also drop texts whose boundary falls inside a partial match."""
    guard_table = np.asarray(guard.transitions, dtype=np.int64)
    guard_ok = np.asarray(guard.accepting, dtype=bool)

    def intersected(body: BodyTable, is_root: bool) -> BodyTable:
        table, accepting = body
        width = table.shape[1]
        number: dict[tuple[int, int], int] = {(0, 0): 0}
        pending = [(0, 0)]
        rows: list[np.ndarray] = []
        ends: list[bool] = []
        while len(rows) < len(number):
            check_deadline("intersecting an embedded grammar")
            q, r = pending[len(rows)]
            row = np.full(width, -1, dtype=np.int64)
            own, guarded_row = table[q, :CALL_BASE], guard_table[r]
            moves = [(b, (int(own[b]), int(guarded_row[b])))
                     for b in np.flatnonzero((own >= 0) & (guarded_row >= 0)).tolist()]
            if r == 0:
                moves += [(CALL_BASE + c, (int(target), 0)) for c, target in enumerate(table[q, CALL_BASE:].tolist())
                          if target >= 0]
            for symbol, pair in moves:
                if pair not in number:
                    number[pair] = len(number)
                    pending.append(pair)
                row[symbol] = number[pair]
            rows.append(row)
            ends.append(bool(accepting[q]) and (bool(guard_ok[r]) if is_root else r == 0))
        return np.stack(rows).astype(np.int32), np.array(ends, dtype=bool)

    return bodywise(leaf, intersected)
