"""A JSON Schema compiled to a `PushdownConstraint`: reference cycles, or free-form values that nest to any depth."""

from __future__ import annotations

import time
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.determinize import DEFAULT_MAX_STATES
from stdsl.compiler.json_schema.json_tokens import Whitespace
from stdsl.compiler.json_schema.recursive import compile_recursive_schema, free_form_grammar
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.grammar import MAX_DEPTH, PushdownGrammar


def compile_recursive(schema: dict, *, whitespace: Whitespace | None = None, max_states: int = DEFAULT_MAX_STATES,
                      max_depth: int = MAX_DEPTH, model_class: Any = None, outline: bool | None = False,
                      strict: bool = True) -> PushdownConstraint:
    """Compile a JSON Schema with `$ref` cycles (of a Pydantic `model_class`, if given) to a pushdown constraint.

    With `outline`, container members are nonterminals too (for schemas too large for one DFA); `outline=None`
    outlines them when the plain grammar's bodies are large or pass `max_states` (`recursive._calling_grammar`).
    A model's integers are written without a zero fraction (Pydantic reads `1.0` as a float).
    `strict` closes objects as `schema_to_ir` does.
    """
    began = time.perf_counter()
    grammar = compile_recursive_schema(schema, whitespace=whitespace, max_states=max_states, max_depth=max_depth,
                                       outline=outline, zero_fractions=model_class is None, strict=strict)
    return PushdownConstraint(grammar, "json_schema", schema, time.perf_counter() - began, model_class,
                              strict=strict)


def compile_free_form(schema: dict, *, whitespace: Whitespace | None = None, max_states: int = DEFAULT_MAX_STATES,
                      model_class: Any = None, outline: bool | None = False, strict: bool = True
                      ) -> PushdownConstraint | ir.Node:
    """A schema without reference cycles whose free-form values nest to any depth (calls of one nonterminal),
    or the schema's IR for a DFA when it has no free-form value (see `free_form_grammar`); `outline` as
    `compile_recursive`'s, `strict` closes objects as `schema_to_ir` does."""
    began = time.perf_counter()
    grammar = free_form_grammar(schema, whitespace=whitespace, max_states=max_states, outline=outline,
                                zero_fractions=model_class is None, strict=strict)
    if not isinstance(grammar, PushdownGrammar):
        return grammar
    return PushdownConstraint(grammar, "json_schema", schema, time.perf_counter() - began, model_class,
                              strict=strict)
