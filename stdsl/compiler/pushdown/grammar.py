"""Recursive grammars as pushdown automata (Appendix C.12): one DFA per nonterminal over bytes and call symbols.

Definitions on a cycle of the reference graph become nonterminals; a call of definition i is
the private symbol 256 + i (`call_symbol(i)` in the IR).  Every body is compiled with the
ordinary regex pipeline over the widened alphabet; the bodies are then laid out in one global
state space.  The two L(1) conditions of C.12 are checked here, and the shortest-completion
lengths bn(q) of Proposition 2 are computed for the budget rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import canonical_classes
from stdsl.compiler.automata.build import determinized, subset_automaton
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.automata.minimization.minimize import MINIMIZE_UP_TO, trim, trim_in_bfs_order
from stdsl.compiler.automata.state_graph import successor_lists
from stdsl.compiler.automata.table_blocks import converted
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.pushdown.call_rows import CallRows, call_rows, first_call_clash
from stdsl.compiler.pushdown.completion_graph import UNREACHABLE, CompletionGraph
from stdsl.compiler.pushdown.quoted_keys import keyed_body_dfa
from stdsl.compiler.pushdown.subsumed_literals import holds_quoted_union, without_subsumed_literals
from stdsl.errors import CompileError, EmptyLanguageError

CALL_BASE = 256
MAX_DEPTH = 64
MAIN = "<root>"


class DefinitionError(CompileError):
    """A recursive definition that cannot be compiled; `definition` names it."""

    def __init__(self, message: str, definition: str) -> None:
        self.definition = definition
        super().__init__(message)


class GrammarConflictError(CompileError):
    """An L(1) condition broken by calls; `nonterminals` names the called definitions involved."""

    def __init__(self, message: str, nonterminals: Sequence[str]) -> None:
        self.nonterminals = tuple(nonterminals)
        super().__init__(message)


def call_symbol(index: int) -> ir.Node:
    """The IR leaf for a call of definition `index` (the private symbol 256 + index)."""
    if index < 0:
        raise ValueError(f"call index must be non-negative, got {index}")
    return ir.ByteSet(((CALL_BASE + index, CALL_BASE + index),))


@dataclass(frozen=True)
class Definition:
    """A named recursive definition; its body may contain `call_symbol(i)` leaves for definition i."""

    name: str
    body: ir.Node
    dfa: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, compare=False, repr=False)
    """The body's trim DFA over the grammar's alphabet when built ahead (the free-form value's is shipped,
    `json_schema.any_value`), in `_body_dfa`'s form (`over_classes`): its table over classes, each symbol's class,
    its accepting mask; None: `compile_pushdown` builds it."""


class PushdownGrammar:
    """Nonterminal DFAs laid out in one state space (nonterminal 0 is the root body, never called).

    The tables are kept over byte classes (bytes every state reads alike): `own_classes[q, byte_class[b]]` is q's
    own move on byte b (-1 none) and `calls[q][byte_class[b]]` the call edge whose callee starts with b (-1 none;
    rows kept for the calling states only, `CallRows`); `byte_table` and `call_of_byte` are the same tables over the
    256 bytes, expanded on first read.
    Call edge e goes from `call_state[e]` to the callee `call_callee[e]` and returns to `call_return[e]`;
    `bn[q]` is the shortest completion of q's nonterminal, and `bn_within[min(d, len - 1), q]` the shortest one
    that nests at most d calls deeper (UNREACHABLE if none).
    """

    def __init__(self, names: Sequence[str], starts: np.ndarray, owner: np.ndarray, own_classes: np.ndarray,
                 byte_class: np.ndarray, accepting: np.ndarray, call_state: np.ndarray, call_callee: np.ndarray,
                 call_return: np.ndarray, max_depth: int = MAX_DEPTH) -> None:
        if max_depth < 1:
            raise ValueError(f"max_depth must be at least 1, got {max_depth}")
        if byte_class.shape != (256,) or int(byte_class.max()) >= own_classes.shape[1]:
            raise ValueError(f"byte_class must map the 256 bytes into {own_classes.shape[1]} classes")
        self.names = list(names)
        self.starts = starts
        self.owner = owner
        self.own_classes = own_classes
        self.byte_class = byte_class.astype(np.intp)
        self._expanded: dict[str, np.ndarray] = {}
        self.accepting = accepting
        self.call_state, self.call_callee, self.call_return = call_state, call_callee, call_return
        self.max_depth = max_depth
        self.fragment: tuple[ir.Node, tuple[Definition, ...]] | None = None
        """The root body and definitions this grammar was compiled from (`compile_pushdown` sets them), so that it
        can be embedded in a larger constraint (`pushdown.embedding`); not pickled (a grammar sent to another
        process is decoded there, not embedded)."""
        self.first_classes = _first_sets(self)
        self.first = self.first_classes[:, self.byte_class]
        check_deadline("the pushdown call table")
        self.calls = _call_rows(self)
        check_deadline("the pushdown follow sets")
        follow = _follow_sets(self)
        self.follow = follow[:, self.byte_class]
        _check_follow(self, follow)
        check_deadline("the pushdown completion graph")
        successors = successor_lists(own_classes)
        self.has_successor: np.ndarray = np.diff(successors[0]) > 0
        self.has_successor[call_state] = True
        graph = CompletionGraph(self, successors=successors)
        self.bn_within = _completions_within_depth(self, graph)
        self.bn = _shortest_completions(self, graph)
        if self.bn_within[-1][starts[0]] >= UNREACHABLE:
            raise CompileError(f"every output nests deeper than the stack cap of {max_depth}")

    def __getstate__(self) -> dict[str, object]:
        return {key: (None if key == "fragment" else {} if key == "_expanded" else value)
                for key, value in self.__dict__.items()}

    @property
    def byte_table(self) -> np.ndarray:
        """`own_classes` over the 256 bytes, (Q, 256), read-only: for whole-table readers and tests."""
        return self._expand("byte_table", self.own_classes)

    @property
    def call_of_byte(self) -> np.ndarray:
        """`calls` over the 256 bytes, (Q, 256), read-only: for whole-table readers and tests."""
        return self._expand("call_of_byte", self.calls.dense())

    def _expand(self, name: str, classes: np.ndarray) -> np.ndarray:
        found = self._expanded.get(name)
        if found is None:
            found = self._expanded[name] = classes[:, self.byte_class]
            found.flags.writeable = False
        return found

    @property
    def num_states(self) -> int:
        """States of all nonterminals together."""
        return int(self.own_classes.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by the grammar's tables (the 256-byte expansions too, once read)."""
        arrays = (self.starts, self.owner, self.own_classes, self.byte_class, self.accepting, self.call_state,
                  self.call_callee, self.call_return, self.first, self.first_classes, self.follow,
                  self.has_successor, self.bn, self.bn_within, *self._expanded.values())
        return sum(int(a.nbytes) for a in arrays) + self.calls.nbytes

    def __repr__(self) -> str:
        return f"PushdownGrammar(nonterminals={self.names}, states={self.num_states}, bytes={self.nbytes})"


def compile_pushdown(main: ir.Node, definitions: Sequence[Definition], *, max_states: int = DEFAULT_MAX_STATES,
                     max_depth: int = MAX_DEPTH) -> PushdownGrammar:
    """Compile a root body and recursive definitions (bodies calling each other) to a pushdown grammar.

    Raises CompileError naming the definitions when a body is empty, left-recursive, matches the
    empty string, or breaks an L(1) condition.
    """
    alphabet = CALL_BASE + len(definitions)
    names = [MAIN] + [d.name for d in definitions]
    bodies: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    unions: dict[int, bool] = {}
    for name, body, built in zip(names, [main] + [d.body for d in definitions], [None] + [d.dfa for d in definitions]):
        check_deadline(f"the pushdown definition '{name}'")
        if built is not None and len(built[1]) != alphabet:
            raise ValueError(f"definition '{name}' comes with a DFA over {len(built[1])} symbols, not {alphabet}")
        try:
            bodies.append(built if built is not None and len(built[2]) <= max_states
                          else _body_dfa(body, max_states, alphabet, unions))
        except EmptyLanguageError as error:
            if name == MAIN:
                raise
            raise DefinitionError(f"definition '{name}' matches nothing: {error}", name) from error
    byte_class, first_byte = common_byte_classes([symbol_class[:CALL_BASE] for _, symbol_class, _ in bodies])
    offsets = np.cumsum([0] + [len(table) for table, _, _ in bodies])
    total = int(offsets[-1])
    own_classes = laid_out_moves(bodies, first_byte)
    owner = np.zeros(total, dtype=np.int32)
    call_state: list[np.ndarray] = []
    call_callee: list[np.ndarray] = []
    call_return: list[np.ndarray] = []
    for index, ((table, symbol_class, _), off) in enumerate(zip(bodies, offsets[:-1].tolist())):
        owner[off:off + len(table)] = index
        states, called, returns = call_moves(table, symbol_class[CALL_BASE:])
        call_state.append(states + off)
        call_callee.append(called + 1)
        call_return.append(returns + off)
    callers, callees, returns = (np.concatenate(column).astype(np.int32)
                                 for column in (call_state, call_callee, call_return))
    grammar = PushdownGrammar(names, offsets[:-1].astype(np.int32), owner, own_classes, byte_class,
                              np.concatenate([accepting for _, _, accepting in bodies]), callers, callees, returns,
                              max_depth)
    grammar.fragment = (main, tuple(definitions))
    return grammar


def laid_out_moves(bodies: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], first_byte: np.ndarray) -> np.ndarray:
    """The own moves of `bodies` (in `_body_dfa`'s form) one after another in one state space, over the common
    classes whose first bytes are `first_byte`: each move shifted by its body's offset, the dead move kept (-1);
    int16 where the states fit.  A block of rows is shifted over its body's own classes, then spread over the
    common ones (fewer cells written than shifting it over the common classes)."""
    total = sum(len(table) for table, _, _ in bodies)
    own_classes = np.empty((total, len(first_byte)), dtype=np.int16 if total < 2**15 else np.int32)
    off = 0
    for table, symbol_class, _ in bodies:
        columns = symbol_class[first_byte]
        shifted = np.append(np.arange(off, off + len(table), dtype=own_classes.dtype), own_classes.dtype.type(-1))
        for lo in range(0, len(table), LAYOUT_ROWS):
            check_deadline("laying out the pushdown")
            rows = table[lo:lo + LAYOUT_ROWS]
            moved = np.take(shifted, rows, mode="wrap")
            np.take(moved, columns, axis=1, out=own_classes[off + lo:off + lo + len(rows)])
        off += len(table)
    return own_classes


def call_moves(table: np.ndarray, call_classes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A body's call moves as `np.nonzero(table[:, call_classes] >= 0)` orders them: (state, callee index, return
    state), state by state.  Only the states with a call move are read through every call symbol: most symbols share
    one class no state moves on, so a large grammar's full gather is mostly cells that cannot move (measured in
    `benchmarks/results/kubernetes_profile_kube71.md`).  The classes read are marked in a mask rather than
    deduplicated with `np.unique`, whose first call in a fresh process imports `numpy.ma`."""
    read = np.zeros(table.shape[1], dtype=bool)
    read[call_classes] = True
    calling = np.flatnonzero((table[:, read] >= 0).any(axis=1))
    calls = table[calling][:, call_classes]
    rows, called = np.nonzero(calls >= 0)
    return calling[rows], called, calls[rows, called]


LAYOUT_ROWS = 8192
"""Rows of a body laid out between two deadline checks (a few milliseconds)."""

BODY_CACHE_BYTES = 16 << 20
"""Bytes the kept body DFAs may hold together; a body over a quarter of it is not kept (a large root body
is rarely met again, and `stdsl.compile` keeps whole constraints for that)."""
_BODY_DFAS = caches.kind("pushdown body DFAs", max_bytes=BODY_CACHE_BYTES)
"""`_body_dfa` per (body, alphabet), in the registry so that `stdsl.caches.clear()` empties it too."""


def _body_dfa(body: ir.Node, max_states: int, alphabet: int, unions: dict[int, bool] | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A body's trim DFA over `alphabet` symbols (its table over classes, each symbol's class, its accepting mask),
    kept for the next grammar with the same body: the free-form value's nonterminal is the same in every schema that
    has one.  A body without calls is the automaton of its bytes (`subset_automaton`, which keeps it per expression:
    the DFA compiler may have built it as an array item, minimal); one with calls is its subset construction
    trimmed, in BFS order (`trim_in_bfs_order`), not minimized: Hopcroft refinement was a quarter of a typical open
    object's compile, and the table is the minimal one whenever the construction was minimal (89% of the DFAs every
    10th MaskBench file minimized); past `MINIMIZE_UP_TO` states only trimmed, numbered as built, as `shrink` leaves a
    byte automaton that large (renumbering a laid-out chain's table in BFS order, one Python step per state, was 15%
    of o9771's compile; the BFS numbering of the table is the same either way); of the body less the quoted literals
    that a quoted text beside them reads (`subsumed_literals`: the same language, found by a walk kept in `unions`
    over the bodies of one grammar).
    Where its quoted keys and strings can be laid out as tries and copies (`quoted_keys`) only the rest of it goes
    through the subset construction."""
    if unions is None:
        unions = {}
    kept = _BODY_DFAS.find((), (body, alphabet))
    if kept is not None and len(kept[0][2]) <= max_states:
        return kept[0]
    over_bytes = subset_automaton(body, max_states)
    if over_bytes is not None:
        dead = over_bytes.num_classes
        table = np.full((over_bytes.num_states, dead + 1), -1, dtype=np.int32)
        table[:, :dead] = over_bytes.class_transitions
        symbol_class = np.concatenate([over_bytes.byte_class, np.full(alphabet - CALL_BASE, dead)]).astype(np.intp)
        found = (table, symbol_class, np.array(over_bytes.accepting, dtype=bool))
    elif (keyed := keyed_body_dfa(body, max_states, alphabet, CALL_BASE)) is not None:
        found = keyed
    else:
        built = without_subsumed_literals(body, {}) if holds_quoted_union(body, unions) else body
        dfa = determinized(built, max_states, alphabet)
        if len(dfa.accepting) > MINIMIZE_UP_TO:
            table, accepting = trim(np.asarray(dfa.table), np.asarray(dfa.accepting, dtype=bool), True, dfa.all_live)
        else:
            table, accepting = trim_in_bfs_order(dfa.table, dfa.accepting, all_reachable=True,
                                                 all_live=dfa.all_live, in_bfs_order=dfa.in_bfs_order, dtype=np.int32)
        check_deadline("a pushdown definition's table")
        narrowed = converted(table, np.int32, "a pushdown definition's table")
        found = (narrowed, np.asarray(dfa.byte_class, dtype=np.intp), accepting)
    if _held_bytes(found) <= BODY_CACHE_BYTES // 4:
        for array in found:
            array.flags.writeable = False
        _BODY_DFAS.put((), found, (body, alphabet))
    return found


def over_classes(table: np.ndarray, accepting: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A body DFA given over every symbol (Q, alphabet) in `_body_dfa`'s form: its bytes in classes, each call
    symbol a class of its own."""
    classes, byte_class = canonical_classes(table[:, :CALL_BASE], np.arange(CALL_BASE))
    calls = table.shape[1] - CALL_BASE
    symbol_class = np.concatenate([byte_class, classes.shape[1] + np.arange(calls)]).astype(np.intp)
    return np.concatenate([classes, table[:, CALL_BASE:]], axis=1), symbol_class, accepting


def common_byte_classes(maps: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The coarsest classes of bytes that every map of the 256 bytes to classes keeps together: (each byte's class,
    each class's first byte), classes numbered by their first byte.  Two bytes are kept together where their classes
    under all the maps (a byte's row across them) are the same: one dictionary lookup per byte, its row a slice of
    one byte string (refining map by map cost a sort per map, kb_233's 190 bodies: 2.2 -> 0.4 ms; a `bytes` of each
    numpy row, 0.2-0.4 ms of every small grammar's compile)."""
    width = 8 * len(maps)
    rows = np.ascontiguousarray(np.stack(maps, axis=1), dtype=np.int64).tobytes()
    numbered: dict[bytes, int] = {}
    first: list[int] = []
    byte_class: list[int] = []
    for byte, start in enumerate(range(0, CALL_BASE * width, width)):
        row = rows[start:start + width]
        found = numbered.get(row)
        if found is None:
            found = numbered[row] = len(first)
            first.append(byte)
        byte_class.append(found)
    return np.array(byte_class, dtype=np.intp), np.array(first, dtype=np.int64)


def _held_bytes(arrays: tuple[np.ndarray, ...]) -> int:
    return sum(int(array.nbytes) for array in arrays)


def _calls_at(grammar: PushdownGrammar, state: int) -> list[int]:
    """The call edges leaving `state`."""
    return np.flatnonzero(grammar.call_state == state).tolist()


def _first_sets(grammar: PushdownGrammar) -> np.ndarray:
    """first(N) per nonterminal over byte classes (bool (C, classes)); refuses left recursion and definitions that
    match ε."""
    count = len(grammar.names)
    called = set(grammar.call_callee.tolist())
    for n in sorted(called):
        if grammar.accepting[grammar.starts[n]]:
            raise DefinitionError(f"definition '{grammar.names[n]}' matches the empty string; a recursive "
                                  "definition must read at least one byte", grammar.names[n])
    first = np.zeros((count, grammar.own_classes.shape[1]), dtype=bool)
    done = [False] * count
    for n in range(count):
        _first_set(grammar, n, (), first, done)
    return first


def _first_set(grammar: PushdownGrammar, n: int, path: tuple[int, ...], first: np.ndarray, done: list[bool]
               ) -> np.ndarray:
    """first(n), filled into `first` (and marked in `done`) with those of the nonterminals its start calls;
    `path` the nonterminals being visited, so that left recursion is refused.  A module function, not a closure
    that calls itself: that would be a reference cycle keeping the grammar until the collector runs."""
    if n in path:
        cycle = " -> ".join(f"'{grammar.names[m]}'" for m in path[path.index(n):] + (n,))
        raise DefinitionError(f"left recursion: {cycle} can call itself before reading a byte", grammar.names[n])
    if not done[n]:
        start = int(grammar.starts[n])
        first[n] = grammar.own_classes[start] >= 0
        for edge in _calls_at(grammar, start):
            first[n] |= _first_set(grammar, int(grammar.call_callee[edge]), path + (n,), first, done)
        done[n] = True
    return first[n]


def _first_byte(grammar: PushdownGrammar, classes: np.ndarray) -> int:
    """The smallest byte of the byte classes marked in `classes` (bool, one per class; at least one marked)."""
    return int(np.flatnonzero(classes[grammar.byte_class])[0])


def _call_rows(grammar: PushdownGrammar) -> CallRows:
    """The call table after checking L(1) condition 1: call firsts disjoint from own bytes and each other; where
    some edge clashes, the first one (in edge order) is named."""
    found = call_rows(grammar.own_classes, grammar.first_classes, grammar.call_state, grammar.call_callee)
    if found is not None:
        return found
    clash = first_call_clash(grammar.own_classes, grammar.first_classes, grammar.call_state, grammar.call_callee)
    if clash is None:
        raise AssertionError("call_rows refused a call table in which first_call_clash finds no clash")
    edge, classes, earlier = clash
    q, callee = int(grammar.call_state[edge]), int(grammar.call_callee[edge])
    name, callee_name = grammar.names[grammar.owner[q]], grammar.names[callee]
    marked = np.zeros(grammar.own_classes.shape[1], dtype=bool)
    marked[classes] = True
    byte = _first_byte(grammar, marked)
    other = int(earlier[classes == grammar.byte_class[byte]][0])
    if other < 0:
        raise GrammarConflictError(f"not L(1): in '{name}', a call of '{callee_name}' may start with byte "
                                   f"{byte!r} ({chr(byte)!r}), which '{name}' itself can also read there",
                                   [callee_name])
    other_name = grammar.names[grammar.call_callee[other]]
    raise GrammarConflictError(f"not L(1): in '{name}', calls of '{callee_name}' and '{other_name}' may both "
                               f"start with byte {byte!r} ({chr(byte)!r})", [callee_name, other_name])


def _own_live(grammar: PushdownGrammar, states: np.ndarray) -> np.ndarray:
    """Byte classes each of `states` reads itself or by a call (bool (len(states), classes)), without returning."""
    return (grammar.own_classes[states] >= 0) | (grammar.calls.of(states) >= 0)


def _follow_sets(grammar: PushdownGrammar) -> np.ndarray:
    """follow(N) per nonterminal over byte classes: classes that may come right after N returns (least fixed
    point), all call edges at a time: a callee's follow gains what its return states read, and where a return
    state accepts, the follow of the nonterminal it is in."""
    follow = np.zeros((len(grammar.names), grammar.own_classes.shape[1]), dtype=bool)
    if not len(grammar.call_callee):
        return follow
    order = np.argsort(grammar.call_callee, kind="stable")
    callee = grammar.call_callee[order]
    group = np.flatnonzero(np.diff(callee, prepend=-1))
    returns = grammar.call_return[order]
    live_at_return = _own_live(grammar, returns)
    ending = np.flatnonzero(grammar.accepting[returns])
    ending_owner = grammar.owner[returns[ending]]
    while True:
        check_deadline("the pushdown follow sets")
        after = live_at_return.copy()
        after[ending] |= follow[ending_owner]
        merged = follow.copy()
        merged[callee[group]] |= np.logical_or.reduceat(after, group, axis=0)
        if np.array_equal(merged, follow):
            return follow
        follow = merged


def _check_follow(grammar: PushdownGrammar, follow: np.ndarray) -> None:
    """L(1) condition 2: an accepting state of a called nonterminal with successors reads nothing of its follow set
    (`follow`, over byte classes)."""
    called = np.zeros(len(grammar.names), dtype=bool)
    called[grammar.call_callee] = True
    ends = np.flatnonzero(grammar.accepting)
    ends = ends[called[grammar.owner[ends]]]
    clashes = _own_live(grammar, ends) & follow[grammar.owner[ends]]
    clashing = np.flatnonzero(clashes.any(axis=1))
    if len(clashing):
        n = int(grammar.owner[ends[clashing[0]]])
        byte = _first_byte(grammar, clashes[clashing[0]])
        callers = sorted({grammar.names[grammar.owner[s]] for s, c in
                          zip(grammar.call_state.tolist(), grammar.call_callee.tolist()) if c == n})
        raise GrammarConflictError(f"not L(1): '{grammar.names[n]}' may end and still continue with byte "
                                   f"{byte!r} ({chr(byte)!r}), which may also follow it in {', '.join(callers)}",
                                   [grammar.names[n]])


def _shortest_completions(grammar: PushdownGrammar, graph: CompletionGraph) -> np.ndarray:
    """bn(q) (Proposition 2): the least fixed point over byte moves and call edges; 0 on accepting states.

    It is the limit of `bn_within`'s levels, continued past the stack cap when they had not settled there.
    """
    bn = grammar.bn_within[-1]
    settled = len(grammar.bn_within) <= grammar.max_depth
    while not settled:
        check_deadline("the pushdown completion lengths")
        deeper = graph.shortest(bn[graph.callee_starts])
        settled = np.array_equal(deeper, bn)
        bn = deeper
    for n in list(range(1, len(grammar.names))) + [0]:
        if bn[grammar.starts[n]] >= UNREACHABLE:
            raise DefinitionError(f"definition '{grammar.names[n]}' has no finite expansion (every word recurses "
                                  "forever)", grammar.names[n])
    return bn


def within(grammar: PushdownGrammar, room: int) -> np.ndarray:
    """bn over states for completions that nest at most `room` calls deeper (the row of `bn_within`)."""
    levels = grammar.bn_within
    return levels[min(max(room, 0), len(levels) - 1)]


def completions_over(grammar: PushdownGrammar, allowed: np.ndarray) -> np.ndarray:
    """`bn_within` counted over the byte moves on `allowed` bytes (bool (256,)) only: the shortest completions a
    vocabulary can spell one single-byte token at a time (UNREACHABLE where none); the grammar is unchanged."""
    readable = np.zeros(grammar.own_classes.shape[1], dtype=bool)
    readable[grammar.byte_class[np.asarray(allowed, dtype=bool)]] = True
    moves = np.where(readable[None, :], grammar.own_classes, -1)
    return _completions_within_depth(grammar, CompletionGraph(grammar, moves))


def _completions_within_depth(grammar: PushdownGrammar, graph: CompletionGraph) -> np.ndarray:
    """bn_d(q) for d = 0, 1, ... until it stops changing (at most max_depth): shortest completions of q's nonterminal
    whose calls nest at most d deeper; a call costs bn_{d-1} of its callee, none is possible at d = 0.

    With the stack capped, a configuration at depth D completes iff bn_{cap-D}(q) and bn_{cap-i+1} of the i-th
    return state are all finite, which is how the machine keeps every started output completable at the cap.
    A level whose call costs are the last level's is that level again, so it is not searched (one search less per
    grammar: the last level was found only to be the same).
    """
    levels: list[np.ndarray] = []
    costs: list[np.ndarray] = []
    for depth in range(grammar.max_depth + 1):
        check_deadline("the pushdown depth table")
        call_cost = (np.full(len(graph.callers), UNREACHABLE, dtype=np.int64) if depth == 0
                     else levels[-1][graph.callee_starts])
        if costs and np.array_equal(call_cost, costs[-1]):
            break
        bn = graph.shortest(call_cost, (levels[-1], costs[-1]) if levels else None)
        if levels and np.array_equal(bn, levels[-1]):
            break
        levels.append(bn)
        costs.append(call_cost)
    return np.stack(levels)
