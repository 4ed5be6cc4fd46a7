"""Thompson NFA over bytes, built from the IR.

Each state has epsilon edges and byte edges (a set of bytes to one target).  Counted
repetition `x{m,n}` is expanded into copies: m required ones, then n-m optional ones nested
so that every epsilon closure stays small.  An alternation of plain byte strings (what a
code point class such as `\\w` becomes after UTF-8 expansion, or a list of keywords) is
built as a trie with shared suffixes, so its states stay few and nearly deterministic.
The size is checked before building.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from stdsl.compiler import ir
from stdsl.errors import StateBudgetError

MAX_NFA_STATES = 2_000_000

Ranges = tuple[tuple[int, int], ...]


@dataclass
class NFA:
    """A Thompson NFA: `edges[s]` lists `(index into byte_sets, target)`; `eps[s]` the epsilon targets."""

    eps: list[list[int]] = field(default_factory=list)
    edges: list[list[tuple[int, int]]] = field(default_factory=list)
    byte_sets: list[Ranges] = field(default_factory=list)
    start: int = 0
    accept: int = 0

    @property
    def num_states(self) -> int:
        return len(self.eps)


@dataclass(frozen=True)
class _TrieTemplate:
    """A byte-string alternation as a suffix-shared trie: state 0 is the entry.

    `edges[s]` lists `(ranges, target state)`; `final[s]` says the state ends a string.
    """

    edges: tuple[tuple[tuple[Ranges, int], ...], ...]
    final: tuple[bool, ...]


def _byte_string(node: ir.Node) -> tuple[Ranges, ...] | None:
    """The node as a sequence of byte sets, or None if it is not a plain byte string."""
    if isinstance(node, ir.ByteSet):
        return (node.ranges,)
    if isinstance(node, ir.Seq) and all(isinstance(item, ir.ByteSet) for item in node.items):
        return tuple(item.ranges for item in node.items)  # type: ignore[union-attr]
    return None


def _is_byte_string_alt(node: ir.Alt) -> bool:
    """Whether every branch is a plain byte string (so the alternation is a finite set of them)."""
    return len(node.items) > 1 and all(_byte_string(item) is not None for item in node.items)


@lru_cache(maxsize=512)
def _trie_template(node: ir.Alt) -> _TrieTemplate:
    """The suffix-shared trie of an alternation whose branches are all byte strings."""
    strings = [_byte_string(item) for item in node.items]
    children: list[dict[Ranges, int]] = [{}]
    final = [False]
    for string in strings:
        state = 0
        for ranges in string:  # type: ignore[union-attr]
            child = children[state].get(ranges)
            if child is None:
                child = len(children)
                children[state][ranges] = child
                children.append({})
                final.append(False)
            state = child
        final[state] = True
    canonical: dict[tuple[bool, tuple[tuple[Ranges, int], ...]], int] = {}
    shared = [0] * len(children)
    for state in range(len(children) - 1, -1, -1):
        signature = (final[state], tuple(sorted((r, shared[c]) for r, c in children[state].items())))
        shared[state] = canonical.setdefault(signature, len(canonical))
    order = {shared[0]: 0}
    for signature, number in canonical.items():
        order.setdefault(number, len(order))
    edges: list[tuple[tuple[Ranges, int], ...]] = [()] * len(canonical)
    finals = [False] * len(canonical)
    for (is_final, out), number in canonical.items():
        edges[order[number]] = tuple((r, order[target]) for r, target in out)
        finals[order[number]] = is_final
    return _TrieTemplate(tuple(edges), tuple(finals))


def expanded_size(node: ir.Node) -> int:
    """An upper bound on the NFA states the Thompson construction makes for `node` (repeats expanded)."""
    if isinstance(node, ir.ByteSet):
        return 1
    if isinstance(node, ir.Embedded):
        return 1 + len(node.accepting)
    if isinstance(node, ir.Seq):
        return sum(expanded_size(item) for item in node.items)
    if isinstance(node, ir.Alt):
        return 1 + sum(1 + expanded_size(item) for item in node.items)
    copies = node.min + 1 if node.max is None else node.max
    return 3 + max(copies, 1) * (1 + expanded_size(node.item))


class _Builder:
    """Appends states to an `NFA`; `fragment(node, entry)` wires `node` from `entry` and returns its exit.

    `entry` may already have outgoing edges; the returned exit is always a fresh state.
    """

    def __init__(self) -> None:
        self.nfa = NFA()
        self.set_index: dict[Ranges, int] = {}
        self.templates: dict[int, _TrieTemplate | None] = {}

    def new_state(self) -> int:
        self.nfa.eps.append([])
        self.nfa.edges.append([])
        return len(self.nfa.eps) - 1

    def byte_set_index(self, ranges: Ranges) -> int:
        index = self.set_index.setdefault(ranges, len(self.nfa.byte_sets))
        if index == len(self.nfa.byte_sets):
            self.nfa.byte_sets.append(ranges)
        return index

    def fragment(self, node: ir.Node, entry: int) -> int:
        nfa = self.nfa
        if isinstance(node, ir.ByteSet):
            target = self.new_state()
            nfa.edges[entry].append((self.byte_set_index(node.ranges), target))
            return target
        if isinstance(node, ir.Embedded):
            return self.embedded(node, entry)
        if isinstance(node, ir.Seq):
            for item in node.items:
                entry = self.fragment(item, entry)
            return entry
        if isinstance(node, ir.Alt):
            if id(node) not in self.templates:
                self.templates[id(node)] = _trie_template(node) if _is_byte_string_alt(node) else None
            template = self.templates[id(node)]
            if template is not None:
                return self.trie(template, entry)
            join = self.new_state()
            for item in node.items:
                branch = self.new_state()
                nfa.eps[entry].append(branch)
                nfa.eps[self.fragment(item, branch)].append(join)
            return join
        return self.repeat(node, entry)

    def embedded(self, node: ir.Embedded, entry: int) -> int:
        """Copy an already-compiled DFA in: one NFA state per DFA state, one byte edge per distinct target."""
        nfa = self.nfa
        states = [self.new_state() for _ in range(len(node.accepting))]
        exit_state = self.new_state()
        nfa.eps[entry].append(states[0])
        for q, row in enumerate(node.transitions.tolist()):
            if node.accepting[q]:
                nfa.eps[states[q]].append(exit_state)
            by_target: dict[int, list[tuple[int, int]]] = {}
            for byte, target in enumerate(row):
                if target < 0:
                    continue
                spans = by_target.setdefault(target, [])
                if spans and spans[-1][1] == byte - 1:
                    spans[-1] = (spans[-1][0], byte)
                else:
                    spans.append((byte, byte))
            for target, spans in by_target.items():
                nfa.edges[states[q]].append((self.byte_set_index(tuple(spans)), states[target]))
        return exit_state

    def trie(self, template: _TrieTemplate, entry: int) -> int:
        nfa = self.nfa
        states = [entry] + [self.new_state() for _ in range(len(template.final) - 1)]
        exit_state = self.new_state()
        for local, out in enumerate(template.edges):
            state = states[local]
            for ranges, target in out:
                nfa.edges[state].append((self.byte_set_index(ranges), states[target]))
            if template.final[local]:
                nfa.eps[state].append(exit_state)
        return exit_state

    def repeat(self, node: ir.Repeat, entry: int) -> int:
        nfa = self.nfa
        for _ in range(node.min):
            entry = self.fragment(node.item, entry)
        if node.max is None:
            loop = self.new_state()
            nfa.eps[entry].append(loop)
            body = self.new_state()
            nfa.eps[loop].append(body)
            nfa.eps[self.fragment(node.item, body)].append(loop)
            exit_state = self.new_state()
            nfa.eps[loop].append(exit_state)
            return exit_state
        exit_state = self.new_state()
        for _ in range(node.max - node.min):
            nfa.eps[entry].append(exit_state)
            body = self.new_state()
            nfa.eps[entry].append(body)
            entry = self.fragment(node.item, body)
        nfa.eps[entry].append(exit_state)
        return exit_state


def build_nfa(node: ir.Node, max_states: int = MAX_NFA_STATES) -> NFA:
    """The Thompson NFA of `node`; raises `StateBudgetError` if it would exceed `max_states` states."""
    estimate = expanded_size(node)
    if estimate > max_states:
        raise StateBudgetError(
            f"the expression expands to about {estimate:,} NFA states (limit {max_states:,}); "
            "reduce counted repetitions such as x{m,n} or nest fewer of them")
    builder = _Builder()
    start = builder.new_state()
    builder.nfa.start = start
    builder.nfa.accept = builder.fragment(node, start)
    return builder.nfa
