"""Thompson NFA over bytes, built from the IR.

Each state has epsilon edges and byte edges (a set of bytes to one target).  Counted
repetition `x{m,n}` is expanded into copies: m required ones, then n-m optional ones nested
so that every epsilon closure stays small.  An alternation of plain byte strings (what a
code point class such as `\\w` becomes after UTF-8 expansion, or a list of keywords) is
built as a trie with shared suffixes, so its states stay few and nearly deterministic.
The NFA is built back to front with fragments shared per (node, continuation), and its size
is checked while building.  Once three steps of a counted repetition built the same block of
states shifted, the remaining steps are copied from it instead of walking the IR again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.embedded_moves import EDGE_CHUNK, KEPT_EDGES_UP_TO, Ranges, embedded_edges
from stdsl.compiler.automata.state_graph import predecessor_lists, reachable, successor_lists
from stdsl.compiler.deadline import check_deadline
from stdsl.errors import CompileError, StateBudgetError

MAX_NFA_STATES = 2_000_000
PERIOD_PROBES = 8
COPY_CHUNK = 1024
RELEASE_SECONDS_PER_STATE = 50e-9
"""About how long freeing a refused NFA takes per state (measured 48.5 ns): the deadline checks count it, so a
refusal returns within the limit."""



NO_MOVES: tuple[()] = ()


@dataclass
class NFA:
    """A Thompson NFA: `edges[s]` lists `(index into byte_sets, target)`; `eps[s]` the epsilon targets.

    A state without moves of a kind holds the shared empty tuple `NO_MOVES` instead of a list of its
    own: most states have only one kind, and fewer objects make the NFA faster to build and to free.
    """

    eps: list[list[int] | tuple[()]] = field(default_factory=list)
    edges: list[list[tuple[int, int]] | tuple[()]] = field(default_factory=list)
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
    """Whether every branch is a plain byte string (so the alternation is a finite set of them), kept on the node:
    the character classes of JSON strings and numbers are shared by every schema."""
    known = node.__dict__.get("_byte_strings")
    if known is None:
        known = len(node.items) > 1 and all(_byte_string(item) is not None for item in node.items)
        object.__setattr__(node, "_byte_strings", known)
    return bool(known)


@lru_cache(maxsize=512)
def _trie_template(node: ir.Alt) -> _TrieTemplate:
    """The suffix-shared trie of an alternation whose branches are all byte strings."""
    strings = [_byte_string(item) for item in node.items]
    children: list[dict[Ranges, int]] = [{}]
    final = [False]
    for count, string in enumerate(strings):
        if count & 4095 == 4095:
            check_deadline("building a string trie")
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
        if state & 4095 == 0:
            check_deadline("merging a string trie")
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


def estimated_states(node: ir.Node) -> int:
    """About how many NFA states `node` needs: each distinct sub-node once, times the copies of counted repeats.

    A fast refusal for hopeless expressions (nested counted repeats); the builder's own count is the exact guard.
    The count is kept on the node (nodes are immutable), so front ends that ask again for a node or for
    one that contains it (an array item, then the array) do not walk the same counted repeats twice.
    """
    return _extent(node)[0]


def longest_counts(node: ir.Node) -> tuple[int, int]:
    """The most copies of a bounded counted repetition anywhere in `node` and the most states of an automaton
    embedded in it (0 where it has none): whether it may hold a long chain (`chains.py`), found in the walk that
    `estimated_states` makes anyway and kept with its count."""
    _, longest, largest, _ = _extent(node)
    return longest, largest


def all_live(node: ir.Node) -> bool:
    """Whether every state of `node`'s NFA that a run can enter leads to its accepting state, so that every state
    of its subset construction does too (the DFA needs no search for dead states): no part of `node` has an empty
    language, and every automaton embedded in it is trim (`_trim_embedded`).  Found in `estimated_states`'s walk.

    Each fragment the builder makes leads to its exit when its node's language is not empty (a byte to its exit,
    a sequence through its items, an alternation into its branches, a repetition's copies and loops to their exits,
    an embedded automaton's states to its accepting ones and on to its exit), and the root's exit is the accepting
    state; a closure of a state that leads there holds an important state that does."""
    return _extent(node)[3]


def known_trim(node: ir.Embedded) -> ir.Embedded:
    """`node`, recorded as trim (every state reachable from its start leads to acceptance) by the code that wrote its
    table, so that `all_live` need not search it (a search's first numpy calls cost a fresh process 0.4 ms)."""
    object.__setattr__(node, "_trim", True)
    return node


def _trim_embedded(node: ir.Embedded) -> bool:
    """Whether every state of an embedded automaton reachable from its start leads to acceptance: known for the
    leaf of a trim `Automaton` (`build.embedded_leaf`), else searched for a small one (and kept on the node)."""
    known = node.__dict__.get("_trim")
    if known is not None:
        return bool(known)
    table = np.asarray(node.transitions)
    if len(table) > KEPT_EDGES_UP_TO or not len(table):
        return False
    entered = reachable(*successor_lists(table), np.array([0]))
    live = reachable(*predecessor_lists(table), np.flatnonzero(np.asarray(node.accepting, dtype=bool)))
    trim = bool(live[entered].all())
    object.__setattr__(node, "_trim", trim)
    return trim


def _extent(node: ir.Node) -> tuple[int, int, int, bool]:
    """`estimated_states` of `node`, its `longest_counts` and `all_live`, kept on the node."""
    cached = node.__dict__.get("_extent")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    check_deadline("sizing the expression")
    total = longest = largest = count = 0
    live = True
    seen: set[int] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        count += 1
        if count & 65535 == 0:
            check_deadline("sizing the expression")
        kind = type(current)
        if kind is ir.Seq or kind is ir.Alt:
            total += 1
            items = current.items  # type: ignore[union-attr]
            if not items and kind is ir.Alt:
                live = False
            for item in items:
                if type(item) is not ir.ByteSet:
                    pending.append(item)
                elif id(item) not in seen:
                    seen.add(id(item))
                    total += 1
                    if not item.ranges:  # type: ignore[union-attr]
                        live = False
        elif kind is ir.Repeat:
            assert isinstance(current, ir.Repeat)
            copies = current.min + 1 if current.max is None else current.max
            inner, inner_longest, inner_largest, inner_live = _extent(current.item)
            total += 1 + max(copies, 1) * (1 + inner)
            longest = max(longest, inner_longest, current.max or 0)
            largest = max(largest, inner_largest)
            live = live and inner_live
        elif kind is ir.Embedded:
            assert isinstance(current, ir.Embedded)
            states = len(current.accepting)
            total += states
            largest = max(largest, states)
            live = live and _trim_embedded(current)
        else:
            total += 1
            live = live and kind is ir.ByteSet and bool(current.ranges)  # type: ignore[union-attr]
    extent = (total, longest, largest, live)
    object.__setattr__(node, "_extent", extent)
    return extent


def _over_budget(max_states: int) -> StateBudgetError:
    """The refusal of an expression that needs more than `max_states` NFA states."""
    return StateBudgetError(f"the expression needs more than {max_states:,} NFA states; reduce counted repetitions "
                            "such as x{m,n} or nest fewer of them")


class _Builder:
    """Appends states to an `NFA` back to front: `entry(node, exit)` returns a state from which `node` leads to `exit`.

    Fragments are memoized by (node, exit), nodes compared by structure: a sub-expression met
    more than once, shared in the IR or built again equal (the same member written after each of
    the optional members before it), and followed by the same continuation becomes one set of
    states instead of one copy per use.  That keeps the NFA, and the subset construction over it,
    near the minimal DFA's size (about half the states on MaskBench objects).  A fragment only adds
    edges out of the states it creates, so sharing its exit with other fragments is safe.
    """

    def __init__(self, max_states: int) -> None:
        self.nfa = NFA()
        self.eps, self.edges = self.nfa.eps, self.nfa.edges
        self.max_states = max_states
        self.set_index: dict[Ranges, int] = {}
        self.templates: dict[int, _TrieTemplate | None] = {}
        self.memo: dict[tuple[ir.Node, int], int] = {}
        self.byte_memo: dict[tuple[Ranges, int], int] = {}
        self.numbered_edges: dict[int, tuple[list[int], list[list[tuple[int, int]]]] | list[list[tuple[int, int]]]] = {}
        """Per embedded automaton copied: its set numbers and moves after one copy, its moves numbered after two."""
        self.trie_moves: dict[int, list[list[tuple[int, int]]]] = {}

    def new_state(self) -> int:
        """A fresh state without moves (the deadline and the state budget are checked here)."""
        count = len(self.eps)
        if count & 255 == 0:
            check_deadline("NFA construction", count * RELEASE_SECONDS_PER_STATE)
        if count >= self.max_states:
            raise _over_budget(self.max_states)
        self.eps.append(NO_MOVES)
        self.edges.append(NO_MOVES)
        return count

    def add_eps(self, state: int, target: int) -> None:
        """An epsilon move from `state` to `target`."""
        moves = self.eps[state]
        if isinstance(moves, list):
            moves.append(target)
        else:
            self.eps[state] = [target]

    def byte_set_index(self, ranges: Ranges) -> int:
        """The index of `ranges` in the NFA's byte sets, added if new."""
        index = self.set_index.get(ranges)
        if index is None:
            index = self.set_index[ranges] = len(self.nfa.byte_sets)
            self.nfa.byte_sets.append(ranges)
        return index

    def entry(self, node: ir.Node, exit_state: int) -> int:
        """The state that reads `node` and then goes to `exit_state` (built once per node and exit); a sequence's
        new byte states are `_byte_state`'s, written out (literals are most of an object's states)."""
        if type(node) is ir.Seq:
            byte_memo, set_index, eps, edges = self.byte_memo, self.set_index, self.eps, self.edges
            for item in reversed(node.items):
                if type(item) is ir.ByteSet:
                    byte_key = (item.ranges, exit_state)
                    found = byte_memo.get(byte_key)
                    if found is not None:
                        exit_state = found
                        continue
                    index = set_index.get(item.ranges)
                    found = len(eps)
                    if index is None or found & 255 == 0 or found >= self.max_states:
                        exit_state = self._byte_state(byte_key)
                        continue
                    eps.append(NO_MOVES)
                    edges.append([(index, exit_state)])
                    byte_memo[byte_key] = exit_state = found
                else:
                    exit_state = self.entry(item, exit_state)
            return exit_state
        if type(node) is ir.ByteSet:
            return self.byte_entry(node.ranges, exit_state)  # type: ignore[union-attr]
        key = (node, exit_state)
        found = self.memo.get(key)
        if found is None:
            found = self._build(node, exit_state)
            self.memo[key] = found
        return found

    def byte_entry(self, ranges: Ranges, exit_state: int) -> int:
        """`entry` of a byte set, memoized by its ranges (equal byte sets have equal ranges; a tuple of ints hashes
        without a Python call, and literals are long runs of byte sets).  A new state is `new_state` with its one
        move, written out: literals make most of an object's states."""
        key = (ranges, exit_state)
        found = self.byte_memo.get(key)
        return self._byte_state(key) if found is None else found

    def _byte_state(self, key: tuple[Ranges, int]) -> int:
        """`byte_entry`'s new state for `key` (its ranges and exit), not in the memo yet."""
        ranges, exit_state = key
        index = self.set_index.get(ranges)
        if index is None:
            index = self.set_index[ranges] = len(self.nfa.byte_sets)
            self.nfa.byte_sets.append(ranges)
        found = len(self.eps)
        if found & 255 == 0:
            check_deadline("NFA construction", found * RELEASE_SECONDS_PER_STATE)
        if found >= self.max_states:
            raise _over_budget(self.max_states)
        self.eps.append(NO_MOVES)
        self.edges.append([(index, exit_state)])
        self.byte_memo[key] = found
        return found

    def _build(self, node: ir.Node, exit_state: int) -> int:
        if isinstance(node, ir.Embedded):
            return self.embedded(node, exit_state)
        if isinstance(node, ir.EmbeddedGrammar):
            raise CompileError(f"{node.label} is a recursive grammar: an expression holding it lowers to a pushdown "
                               "(compiler.pushdown.embedding.compile_embedding), not to one automaton")
        if isinstance(node, ir.Alt):
            if id(node) not in self.templates:
                self.templates[id(node)] = _trie_template(node) if _is_byte_string_alt(node) else None
            template = self.templates[id(node)]
            if template is not None:
                return self.trie(template, exit_state)
            start = self.new_state()
            for item in node.items:
                self.add_eps(start, self.entry(item, exit_state))
            return start
        assert isinstance(node, ir.Repeat)
        return self.repeat(node, exit_state)

    def embedded(self, node: ir.Embedded, exit_state: int) -> int:
        """Copy an already-compiled DFA in: one NFA state per DFA state, one byte edge per distinct target.  The
        first copy numbers its symbol sets as it goes (most automata are copied once: the complement of an open
        object's names); a second copy keeps them numbered for the rest."""
        nfa = self.nfa
        known = self.numbered_edges.get(id(node))
        if known is None:
            symbol_sets, moves = embedded_edges(node)
            known = self.numbered_edges[id(node)] = ([self.byte_set_index(ranges) for ranges in symbol_sets], moves)
        elif isinstance(known, tuple):
            index, moves = known
            numbered: list[list[tuple[int, int]]] = []
            for lo in range(0, len(moves), EDGE_CHUNK):
                check_deadline("NFA construction", len(self.eps) * RELEASE_SECONDS_PER_STATE)
                numbered += [[(index[number], target) for number, target in out] for out in moves[lo:lo + EDGE_CHUNK]]
            known = self.numbered_edges[id(node)] = numbered
        base = self.new_block(len(node.accepting))
        for lo in range(0, len(node.accepting), EDGE_CHUNK):
            if lo:
                check_deadline("NFA construction", len(self.eps) * RELEASE_SECONDS_PER_STATE)
            if isinstance(known, tuple):
                index, moves = known
                rows = [[(index[number], base + target) for number, target in out] if out else NO_MOVES
                        for out in moves[lo:lo + EDGE_CHUNK]]
            else:
                rows = [[(set_index, base + target) for set_index, target in out] if out else NO_MOVES
                        for out in known[lo:lo + EDGE_CHUNK]]
            nfa.edges[base + lo:base + lo + EDGE_CHUNK] = rows
        for q in np.flatnonzero(node.accepting).tolist():
            self.add_eps(base + q, exit_state)
        return base

    def new_block(self, count: int) -> int:
        """`count` fresh states without moves, numbered from the one returned (budget and deadline checked once)."""
        first = len(self.eps)
        check_deadline("NFA construction", first * RELEASE_SECONDS_PER_STATE)
        if first + count > self.max_states:
            raise _over_budget(self.max_states)
        self.eps.extend([NO_MOVES] * count)
        self.edges.extend([NO_MOVES] * count)
        return first

    def trie(self, template: _TrieTemplate, exit_state: int) -> int:
        """A copy of a byte-string trie leading to `exit_state`, laid out as one block (its moves numbered once per
        template: the character classes of JSON strings are copied once per string that ends differently)."""
        moves = self.trie_moves.get(id(template))
        if moves is None:
            moves = self.trie_moves[id(template)] = [[(self.byte_set_index(ranges), target) for ranges, target in out]
                                                     for out in template.edges]
        base = self.new_block(len(template.final))
        edges, eps = self.edges, self.eps
        for local, out in enumerate(moves):
            if out:
                edges[base + local] = [(index, base + target) for index, target in out]
            if template.final[local]:
                eps[base + local] = [exit_state]
        return base

    def repeat(self, node: ir.Repeat, exit_state: int) -> int:
        """`item{min,max}`: the optional copies nested back to front, then the required ones before them (a byte
        set a few times, `_few_bytes`)."""
        if type(node.item) is ir.ByteSet and node.max is not None and node.max - node.min <= 3 and node.min <= 3:
            return self._few_bytes(node.item.ranges, node.min, node.max, exit_state)
        return self.repeated(node, exit_state)

    def repeated(self, node: ir.Repeat, exit_state: int) -> int:
        """`repeat` step by step (`iterate`)."""
        if node.max is None:
            loop = self.new_state()
            self.add_eps(loop, exit_state)
            self.add_eps(loop, self.entry(node.item, loop))
            after = loop
        else:

            def optional(after: int) -> int:
                state = self.new_state()
                self.add_eps(state, exit_state)
                self.add_eps(state, self.entry(node.item, after))
                return state

            after = self.iterate(optional, exit_state, node.max - node.min)
        return self.iterate(lambda after: self.entry(node.item, after), after, node.min)

    def _few_bytes(self, ranges: Ranges, low: int, high: int, exit_state: int) -> int:
        """`repeat` of one byte set at most 3 times optionally and 3 times required (JSON's whitespace between
        tokens): the same states in the same order, without `iterate`'s steps (its copying starts at the fourth)."""
        after = exit_state
        for _ in range(high - low):
            state = self.new_state()
            self.eps[state] = [exit_state, self.byte_entry(ranges, after)]
            after = state
        for _ in range(low):
            after = self.byte_entry(ranges, after)
        return after

    def iterate(self, step: Callable[[int], int], after: int, count: int) -> int:
        """`after = step(after)`, `count` times; once three steps in a row built the same states shifted, copy the rest.

        A step appends a block of new states (memo hits may make the first few differ).  When the
        last step's block is the one before it shifted (moves into the step before and into itself
        shifted, moves further back unchanged), every later step would build that block shifted
        again, so the rest are copied from it without walking the IR.  The copies register no memo
        entries, so a later fragment never shares states with them (the language is the same).
        """
        bounds: list[int] = [len(self.eps)]
        results: list[int] = [after]
        for done in range(count):
            if PERIOD_PROBES >= done >= 3 and self._shifts(bounds[-4:], results[-2:]):
                return self._copy_steps(bounds[-3], bounds[-2], bounds[-1], after, count - done)
            after = step(after)
            bounds.append(len(self.eps))
            results.append(after)
        return after

    def _shifts(self, bounds: list[int], results: list[int]) -> bool:
        """Whether the last two of three steps (blocks between bounds `b0 ≤ b1 ≤ b2 ≤ b3`) built one block, shifted.

        `results` are the states the last two steps returned.
        """
        b0, b1, b2, b3 = bounds
        delta = b2 - b1
        if delta == 0 or b1 - b0 != delta or b3 - b2 != delta:
            return False
        if (results[0] + delta if results[0] >= b0 else results[0]) != results[1]:
            return False
        eps, edges = self.eps, self.edges
        for state in range(b1, b2):
            moves, shifted = eps[state], eps[state + delta]
            if len(moves) != len(shifted) or any((t + delta if t >= b0 else t) != u for t, u in zip(moves, shifted)):
                return False
            out, shifted_out = edges[state], edges[state + delta]
            if len(out) != len(shifted_out) or any(
                    i != j or (t + delta if t >= b0 else t) != u for (i, t), (j, u) in zip(out, shifted_out)):
                return False
        return True

    def _copy_steps(self, low: int, start: int, end: int, after: int, count: int) -> int:
        """Append `count` copies of block `start..end-1`, the k-th with moves to `low` or later shifted by k blocks."""
        delta = end - start
        if len(self.eps) + count * delta > self.max_states:
            raise _over_budget(self.max_states)
        for copy in range(1, count + 1):
            shift = copy * delta
            for chunk in range(start, end, COPY_CHUNK):
                check_deadline("NFA construction", len(self.eps) * RELEASE_SECONDS_PER_STATE)
                stop = min(chunk + COPY_CHUNK, end)
                self.eps.extend([t + shift if t >= low else t for t in moves] if moves else NO_MOVES
                                for moves in self.eps[chunk:stop])
                self.edges.extend([(i, t + shift if t >= low else t) for i, t in out] if out else NO_MOVES
                                  for out in self.edges[chunk:stop])
        return after + count * delta if after >= low else after


def build_nfa(node: ir.Node, max_states: int = MAX_NFA_STATES) -> NFA:
    """The Thompson NFA of `node`; raises `StateBudgetError` as soon as it would exceed `max_states` states."""
    estimate = estimated_states(node)
    if estimate > max_states:
        raise StateBudgetError(
            f"the expression expands to about {estimate:,} NFA states (limit {max_states:,}); "
            "reduce counted repetitions such as x{m,n} or nest fewer of them")
    builder = _Builder(max_states)
    accept = builder.new_state()
    builder.nfa.accept = accept
    builder.nfa.start = builder.entry(node, accept)
    return builder.nfa
