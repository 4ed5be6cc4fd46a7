"""The controller of one output under a compiled constraint: the one place that tells DFA from pushdown.

Every surface that decodes (the engine, the transformers and vLLM processors) starts a row's
controller here, so a constraint is read the same way everywhere: a pushdown machine gets a
`PushdownState`, an automaton a `ConstraintState`, both over the vocabulary the constraint needs
(the tokenizer's shared one, or the variant that spells its special tokens).
"""

from __future__ import annotations

from typing import Any

from stdsl.compiler.automata.automaton import Automaton
from stdsl.control.constraint_state import ConstraintState
from stdsl.control.pushdown_state import PushdownState, machine_of
from stdsl.control.special_vocabulary import vocabulary_for
from stdsl.control.split.planner import PreTokenizingTokenizer
from stdsl.errors import StdslError


def automaton_of(compiled: Any) -> Automaton | None:
    """The DFA of a compiled constraint (a `Constraint` or an `Automaton`), or None for anything else."""
    if isinstance(compiled, Automaton):
        return compiled
    automaton = getattr(compiled, "automaton", None)
    return automaton if isinstance(automaton, Automaton) else None


def controller_for(compiled: Any, tokenizer: PreTokenizingTokenizer, *, max_tokens: int | None,
                   healing: bool = True) -> ConstraintState:
    """A fresh (not started) controller of `compiled` for `tokenizer`: a `PushdownState` for a recursive
    constraint, a `ConstraintState` for a DFA one; StdslError naming the type of anything else. Masks come from
    the host rows (numpy only: a process without MLX, torch or vLLM, never loads it)."""
    vocab = vocabulary_for(tokenizer, compiled)
    machine = machine_of(compiled)
    if machine is not None:
        return PushdownState(machine, tokenizer, vocab, max_tokens=max_tokens, healing=healing)
    automaton = automaton_of(compiled)
    if automaton is None:
        raise StdslError(f"expected a compiled constraint (stdsl.compile), got {type(compiled).__name__}")
    return ConstraintState(automaton, tokenizer, vocab, max_tokens=max_tokens, healing=healing)
