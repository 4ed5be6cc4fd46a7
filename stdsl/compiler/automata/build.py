"""The compile pipeline from IR to a minimal trim `Automaton`: Thompson NFA, subset DFA, minimization."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

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


def build_automaton(node: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> Automaton:
    """The trim byte automaton of an IR expression, minimal up to `MINIMIZE_UP_TO` states: Thompson NFA → subset
    DFA → `shrink`.

    An embedded automaton is only minimized.  A finite set of literal strings (an enum) skips the NFA: its trie,
    merged bottom-up, is the minimal DFA.
    Raises `StateBudgetError` past `max_states` DFA states and `EmptyLanguageError` for an empty language.
    """
    with frames_cleared_on_refusal():
        return _build(node, max_states)


def _build(node: ir.Node, max_states: int) -> Automaton:
    """`build_automaton` past its refusal handling: the direct string DFA, else NFA → DFA → `shrink`."""
    if isinstance(node, ir.Embedded) and np.shape(node.transitions)[1:] == (256,):
        given = Automaton(np.asarray(node.transitions), np.asarray(node.accepting))
        table, accepting = shrink(given.class_transitions.astype(np.int64), given.accepting)
        return Automaton.from_classes(table, accepting, given.byte_class)
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


def compile_regex(pattern: str, max_states: int = DEFAULT_MAX_STATES) -> Automaton:
    """The minimal byte automaton of a Python `re` pattern matched whole (like `re.fullmatch`) on UTF-8."""
    return build_automaton(parse_regex(pattern), max_states)
