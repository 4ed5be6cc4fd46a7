"""The compile pipeline from IR to a minimal trim `Automaton`: Thompson NFA, subset DFA, minimization."""

from __future__ import annotations

import traceback
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES, determinize
from stdsl.compiler.automata.minimize import shrink
from stdsl.compiler.automata.nfa import build_nfa
from stdsl.compiler.automata.strings import literal_strings, strings_dfa
from stdsl.compiler.regex.parser import parse_regex
from stdsl.errors import StateBudgetError, StdslError


@contextmanager
def frames_cleared_on_refusal() -> Iterator[None]:
    """Run the block; a refusal (StdslError) leaving it drops the locals of the frames it unwound.

    Those frames hold the half-built NFA or DFA, millions of small objects: a caller that keeps the
    error (a test runner, a log) would keep them all alive, and the collector would walk them.
    """
    try:
        yield
    except StdslError as error:
        traceback.clear_frames(error.__traceback__)
        raise


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
    anything `build_automaton` returned: `build_automaton` of the leaf then returns it, with no second pass."""
    if minimal:
        _MINIMAL.add(automaton)

    def leaf() -> ir.Embedded:
        node = ir.Embedded(automaton.transitions, automaton.accepting)
        if automaton in _MINIMAL:
            _LEAVES.put((node,), automaton)
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
    dfa = determinize(build_nfa(node), max_states)
    table, accepting = shrink(dfa.table, dfa.accepting, all_reachable=True)
    return Automaton.from_classes(table, accepting, dfa.byte_class)


def _leaf_automaton(node: ir.Embedded) -> Automaton:
    """An embedded automaton's table, trimmed and minimized."""
    given = Automaton(np.asarray(node.transitions), np.asarray(node.accepting))
    table, accepting = shrink(given.class_transitions.astype(np.int64), given.accepting)
    return Automaton.from_classes(table, accepting, given.byte_class)


def compile_regex(pattern: str, max_states: int = DEFAULT_MAX_STATES) -> Automaton:
    """The minimal byte automaton of a Python `re` pattern matched whole (like `re.fullmatch`) on UTF-8."""
    return build_automaton(parse_regex(pattern), max_states)
