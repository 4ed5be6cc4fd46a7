"""A pushdown grammar read after a regular prefix: a new root body PREFIX · call(old root).

The old root body becomes a nonterminal of its own, called once from the new root, so every
definition, call edge and completion table of the old grammar is reused as laid out; the stack cap
grows by one so the old grammar nests exactly as deep as before.  The reasoning block of a
thinking model (free text, then its closing tag) precedes a recursive answer this way.
"""

from __future__ import annotations

import numpy as np

from stdsl.compiler import ir
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES, determinize_expression
from stdsl.compiler.automata.minimization.minimize import shrink
from stdsl.compiler.pushdown.grammar import CALL_BASE, MAIN, PushdownGrammar, call_symbol, common_byte_classes

ANSWER = "<answer>"


def prefixed_grammar(prefix: ir.Node, grammar: PushdownGrammar, max_states: int = DEFAULT_MAX_STATES
                     ) -> PushdownGrammar:
    """The grammar of `prefix` followed by a string of `grammar` (whose root becomes the nonterminal ANSWER).

    Raises GrammarConflictError (an L(1) condition) when the prefix may end where the answer may begin
    with the same byte, e.g. an optional prefix before an answer that may start like it.
    """
    answer = len(grammar.names)
    alphabet = CALL_BASE + answer
    dfa = determinize_expression(ir.seq(prefix, call_symbol(answer - 1)), max_states, alphabet)
    table, root_accepting = shrink(dfa.table, dfa.accepting, all_reachable=True)
    symbol_class = np.asarray(dfa.byte_class, dtype=np.intp)
    byte_class, first_byte = common_byte_classes([symbol_class[:CALL_BASE], grammar.byte_class])
    shift = table.shape[0]
    total = shift + grammar.num_states
    own_classes = np.empty((total, len(first_byte)), dtype=np.int16 if total < 2**15 else np.int32)
    own_classes[:shift] = table[:, symbol_class[first_byte]]
    old = grammar.own_classes[:, grammar.byte_class[first_byte]]
    own_classes[shift:] = np.where(old >= 0, old.astype(np.int64) + shift, -1)
    root = table[:, symbol_class[CALL_BASE:]]
    owner = np.concatenate([np.zeros(shift, dtype=np.int32),
                            np.where(grammar.owner == 0, answer, grammar.owner).astype(np.int32)])
    starts = np.concatenate([[0], grammar.starts[1:] + shift, [grammar.starts[0] + shift]]).astype(np.int32)
    states, columns = np.nonzero(root >= 0)
    call_state = np.concatenate([states, grammar.call_state + shift]).astype(np.int32)
    call_callee = np.concatenate([columns + 1, grammar.call_callee]).astype(np.int32)
    call_return = np.concatenate([root[states, columns], grammar.call_return + shift]).astype(np.int32)
    accepting = np.concatenate([root_accepting, grammar.accepting])
    names = [MAIN, *grammar.names[1:], ANSWER]
    return PushdownGrammar(names, starts, owner, own_classes, byte_class, accepting, call_state, call_callee,
                           call_return, grammar.max_depth + 1)
