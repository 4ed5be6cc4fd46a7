"""The compile pipeline from IR to a minimal trim `Automaton`: Thompson NFA, subset DFA, minimization.

An expression that is a counted repetition of many copies is built from its body's automaton (`automata/counted.py`)
without an NFA (a string's length bound, intersected with its pattern); one whose body's end is not deterministic, and
a repetition inside a larger expression, are expanded into copies by the NFA builder (whose copies of a periodic
step are cheap, and the subset construction over them costs about what it costs over an embedded counter DFA).
"""

from __future__ import annotations

import math
import traceback
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.chains import chained_dfa
from stdsl.compiler.automata.counted import counted_table
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES, ClassDFA, determinize_expression
from stdsl.compiler.automata.minimization.minimize import shrink
from stdsl.compiler.automata.nfa import all_live
from stdsl.compiler.automata.strings import literal_strings, strings_dfa
from stdsl.compiler.automata.table_on_read import TableOnRead
from stdsl.compiler.deadline import check_deadline
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import EmptyLanguageError, StateBudgetError, StdslError

COUNTED_DIRECT_FROM = 8
"""A counted repetition of at least this many copies (its maximum, or its minimum plus one when unbounded) is built
from its body's automaton; fewer copies are cheaper to expand."""


_Error = TypeVar("_Error", bound=BaseException)


@contextmanager
def frames_cleared_on_refusal() -> Iterator[None]:
    """Run the block; a refusal (StdslError) leaving it drops the locals of the frames it unwound.

    Those frames hold the half-built NFA or DFA, millions of small objects: a caller that keeps the
    error (a test runner, a log) would keep them all alive, and the collector would walk them.  The errors it was
    raised from or while handling are cleared too: a refusal met earlier and kept to raise again (a `oneOf` reading's)
    holds frames that hold the document's caches, which hold it.
    """
    try:
        yield
    except StdslError as error:
        frames_cleared(error)
        raise


def frames_cleared(error: _Error, detach: bool = False) -> _Error:
    """`error`, the locals of the finished frames its traceback holds dropped, and those of the errors it was raised
    from or while handling; with `detach`, their tracebacks dropped too.  An error kept for later (a refusal to
    raise again, an L(1) conflict to resume from) is detached: through its frames (and each frame's caller) it would
    hold what they held, the frame that keeps it among them (a reference cycle only the collector frees)."""
    chained: list[BaseException | None] = [error]
    seen: set[int] = set()
    while chained:
        found = chained.pop()
        if found is not None and id(found) not in seen:
            seen.add(id(found))
            traceback.clear_frames(found.__traceback__)
            if detach:
                found.__traceback__ = None
            chained += [found.__cause__, found.__context__]
    return error


_LEAVES = caches.kind("embedded automata")
"""The minimal automaton of one `ir.Embedded` leaf (by identity): a schema's or a guard's leaf is lowered again
for every tool and parameter that uses it."""
_LEAF_OF = caches.kind("automata as leaves")
"""One `ir.Embedded` leaf per automaton (`embedded_leaf`), so the leaf's own caches (`_LEAVES`, the guarded
values of tool formats) hit wherever the automaton is embedded."""


_MINIMAL: weakref.WeakSet[Automaton] = weakref.WeakSet()
"""Automata known to be as `shrink` leaves them (what `build_automaton` returns): a leaf of one is lowered to it."""


def embedded_leaf(automaton: Automaton, minimal: bool = False) -> ir.Embedded:
    """`automaton` as an IR leaf, the same leaf object each time while it is held (so what is cached per leaf is
    shared by every expression that embeds the automaton).  `minimal` says it is trim and minimal already, as is
    anything `build_automaton` returned, or trim and laid out exactly from minimal parts (`tools.object_layout`,
    whose minimization would cost more than the layout): `build_automaton` of the leaf then returns it as it is."""
    if minimal:
        _MINIMAL.add(automaton)

    def leaf() -> ir.Embedded:
        node = ir.Embedded(TableOnRead(automaton), automaton.accepting)
        if automaton in _MINIMAL:
            _LEAVES.put((node,), automaton)
            object.__setattr__(node, "_trim", True)
        return node

    return _LEAF_OF.get((automaton,), leaf)


def build_automaton(node: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> Automaton:
    """The trim byte automaton of an IR expression, minimal up to `MINIMIZE_UP_TO` states: Thompson NFA → subset
    DFA → `shrink`.

    An embedded automaton is only minimized, once per leaf (not at all when it is known minimal).  A finite set of
    literal strings (an enum) skips the NFA: its trie, merged bottom-up, is the minimal DFA.
    Raises `StateBudgetError` past `max_states` DFA states and `EmptyLanguageError` for an empty language.
    """
    with frames_cleared_on_refusal():
        automaton = _build(node, max_states)
    _MINIMAL.add(automaton)
    return automaton


def _build(node: ir.Node, max_states: int) -> Automaton:
    """`build_automaton` past its refusal handling: the direct string DFA, else NFA → DFA → `shrink`."""
    if isinstance(node, ir.Embedded) and np.shape(node.transitions)[1:] == (256,):
        return _LEAVES.get((node,), lambda: _leaf_automaton(node))
    strings = literal_strings(node)
    if strings is not None:
        table, accepting, byte_class = strings_dfa(strings)
        if len(table) > max_states:
            raise StateBudgetError(f"the {len(strings):,} strings need {len(table):,} DFA states (the budget is "
                                   f"{max_states:,}); raise max_states")
        return Automaton.from_classes(table, accepting, byte_class)
    if isinstance(node, ir.Repeat):
        built = counted_automaton(node, max_states)
        if built is not None:
            return Automaton.from_classes(*shrink(built[0], built[1], all_reachable=True, all_live=True), built[2])
    return _kept_subsets(node, max_states)


def product_operands(parts: Sequence[ir.Node], max_states: int) -> list[Automaton]:
    """Automata of `parts` for a product that is minimized whatever its operands (`ops.intersect`): a counted
    repetition as `counted_automaton` lays it out, trim but not minimized, where there are two parts or more and the
    operands' sizes multiplied stay within `max_states`; else each part as `build_automaton` builds it.

    The minimal product of a language is one table (start 0, BFS order), so a product of unminimized operands is
    identical to one of minimal operands; its pairs are at most the sizes multiplied, so within that bound neither
    product is refused.  Minimizing a string's length bound before intersecting it with the string's pattern was
    most of that intersection (MaskBench o82829: three bounds of 2,921 to 5,101 states, 0.11 s of Hopcroft
    refinement for products of 256 to 847 states)."""
    if len(parts) < 2:
        return [build_automaton(part, max_states) for part in parts]
    laid_out = [_laid_out(part, max_states) for part in parts]
    if math.prod(automaton.num_states for automaton, _ in laid_out) > max_states:
        return [automaton if minimal else build_automaton(part, max_states)
                for part, (automaton, minimal) in zip(parts, laid_out)]
    return [automaton for automaton, _ in laid_out]


def _laid_out(node: ir.Node, max_states: int) -> tuple[Automaton, bool]:
    """A trim automaton of `node` and whether it is `build_automaton`'s (minimal): a counted repetition's laid-out
    table is not."""
    if isinstance(node, ir.Repeat):
        with frames_cleared_on_refusal():
            built = counted_automaton(node, max_states)
        if built is not None:
            return Automaton.from_classes(*built), False
    return build_automaton(node, max_states), True


def determinized(node: ir.Node, max_states: int, alphabet: int = 256) -> ClassDFA:
    """The DFA of `node` over `alphabet` symbols, all of its states reachable: long counted chains laid out whole
    (`chains.chained_dfa`), else the subset construction over its NFA, flagged `all_live` where `nfa.all_live` finds
    that no state of it can be dead (its trim then skips that search)."""
    chained = chained_dfa(node, max_states, alphabet, _chain)
    if chained is not None:
        return chained
    dfa = determinize_expression(node, max_states, alphabet)
    dfa.all_live = all_live(node)
    return dfa


STORE_SECONDS_PER_MOVE = 6e-8
"""About how long `Automaton.from_classes` takes per move of a class table (0.13-0.22 s for 3 million here): a
counted chain is refused before storing it when the deadline falls within that, not one long stretch past it."""


def _chain(node: ir.Repeat | ir.Embedded, max_states: int) -> Automaton | None:
    """An embedded automaton trimmed and minimized, or a counted repetition's DFA built from its body's
    (`counted_automaton`: every state it reaches can accept), or None."""
    if isinstance(node, ir.Embedded):
        try:
            return _LEAVES.get((node,), lambda: _leaf_automaton(node))
        except EmptyLanguageError:
            return None
    return _COUNTED.get((), lambda: _counted_chain(node, max_states), (node, max_states))


_COUNTED = caches.kind("counted chains")
"""`_chain` of a counted repetition per expression (by structure) and budget: a schema whose DFA or plain pushdown
was refused is compiled again as an outlined pushdown whose bodies hold the same long strings (0.04-0.05 s of
`o9787`'s and `sp_371`'s second try built them again)."""


def _counted_chain(node: ir.Repeat, max_states: int) -> Automaton | None:
    """`_chain` of a counted repetition, built."""
    built = counted_automaton(node, max_states)
    if built is None:
        return None
    check_deadline("counted repetition", releasing=built[0].size * STORE_SECONDS_PER_MOVE)
    automaton = Automaton.from_classes(*built)
    check_deadline("counted repetition")
    return automaton


_SUBSETS = caches.kind("automata of expressions")
"""`_kept_subsets` per expression (by structure), with the subset states its construction needed: a schema the
DFA compiler gave up on is compiled again as a pushdown, whose outlined bodies are often the very expressions the
first pass built as array items."""


def subset_automaton(node: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> Automaton | None:
    """`build_automaton(node, max_states)` where that is the subset construction over bytes (not an embedded
    automaton, a literal set, a counted repetition or an expression with call symbols: None), kept per expression:
    an automaton kept from a larger budget serves a smaller one that its construction fitted in (more than
    `max_states` subset states raises as before)."""
    if isinstance(node, (ir.Embedded, ir.Repeat)) or literal_strings(node) is not None or not _over_bytes(node):
        return None
    return _kept_subsets(node, max_states)


def _kept_subsets(node: ir.Node, max_states: int) -> Automaton:
    """The subset construction of `node` trimmed and minimized (`shrink`), kept per expression: `subset_automaton`'s,
    and every `build_automaton` that comes to it (`_build`), a counted repetition `counted_automaton` does not lay
    out too, so that the operand of a product another intersection built is served as it is (allany12 determinized
    24 operands 267 times)."""
    kept = _SUBSETS.find((), (node,))
    if kept is not None and kept[0][1] <= max_states:
        return kept[0][0]
    with frames_cleared_on_refusal():
        dfa = determinized(node, max_states)
        table, accepting = shrink(dfa.table, dfa.accepting, all_reachable=True, all_live=dfa.all_live,
                                  in_bfs_order=dfa.in_bfs_order)
    automaton = Automaton.from_classes(table, accepting, dfa.byte_class)
    _MINIMAL.add(automaton)
    _SUBSETS.put((), (automaton, len(dfa.accepting)), (node,))
    return automaton


def counted_automaton(node: ir.Repeat, max_states: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The DFA of `node` (a counted repetition of at least `COUNTED_DIRECT_FROM` copies over bytes) built from its
    body's automaton (`counted_table`), or None: fewer copies, a body over call symbols or without an automaton of
    its own within `max_states` states, or one whose end is not deterministic."""
    copies = node.min + 1 if node.max is None else node.max
    if copies < COUNTED_DIRECT_FROM or not _over_bytes(node.item):
        return None
    try:
        body = build_automaton(node.item, max_states)
    except (StateBudgetError, EmptyLanguageError):
        return None
    return counted_table(body, node.min, node.max, max_states)


def _over_bytes(node: ir.Node) -> bool:
    """Whether `node` reads bytes only: no call symbol (a symbol past 255) and no recursive grammar."""
    for part in ir.distinct_nodes(node):
        if isinstance(part, ir.EmbeddedGrammar):
            return False
        if isinstance(part, ir.ByteSet) and part.ranges and part.ranges[-1][1] > 255:
            return False
        if isinstance(part, ir.Embedded) and np.shape(part.transitions)[1:] != (256,):
            return False
    return True


def _leaf_automaton(node: ir.Embedded) -> Automaton:
    """An embedded automaton's table, trimmed and minimized."""
    given = Automaton(np.asarray(node.transitions), np.asarray(node.accepting))
    table, accepting = shrink(given.class_transitions.astype(np.int64), given.accepting)
    return Automaton.from_classes(table, accepting, given.byte_class)


def compile_regex(pattern: str, max_states: int = DEFAULT_MAX_STATES) -> Automaton:
    """The minimal byte automaton of a Python `re` pattern matched whole (like `re.fullmatch`) on UTF-8."""
    return build_automaton(parse_regex(pattern), max_states)
