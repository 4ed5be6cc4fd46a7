"""The input language of an OpenAI custom tool compiled to one DFA (in the compile worker): any text, a regex or
a Lark grammar.

A recursive grammar (a pushdown) becomes an embedded grammar, so the reply's constraint is then a pushdown
(`pushdown.embedding`); one with special tokens is refused naming the field and saying why, and a malformed
one is located at the definition's field, line and column.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.constraint import Constraint, Regex
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.pushdown.embedding import grammar_leaf
from stdsl.errors import CompileError, CompileTimeError, RegexError, StdslError


@lru_cache(maxsize=1)
def _any_text() -> Automaton:
    return build_automaton(ir.star(ir.any_char()))


def _regex_error(field: str, error: RegexError) -> CompileError:
    """A malformed regex located at line and column of the definition."""
    before = error.pattern[: error.position]
    line, column = before.count("\n") + 1, error.position - (before.rfind("\n") + 1) + 1
    reason = str(error).split(" at position ")[0]
    return CompileError(f"{field}:{line}:{column}: {reason}")


def input_language(custom: Mapping[str, Any], seconds: float) -> Automaton | ir.EmbeddedGrammar:
    """The DFA of a custom tool's raw input (`custom`: its spec entry), or the embedded grammar of a recursive one
    (labelled with the field), compiled within `seconds`; errors name the definition's field (and the line and
    column where the grammar is malformed)."""
    syntax, field = custom["syntax"], custom["field"]
    if syntax == "text":
        return _any_text()
    try:
        if syntax == "regex":
            compiled = compile_constraint(Regex(custom["definition"]), max_seconds=seconds)
        else:
            from stdsl.compiler.grammar import Grammar

            compiled = compile_constraint(Grammar(custom["definition"], syntax="lark", source=field),
                                          max_seconds=seconds)
    except RegexError as error:
        raise _regex_error(field, error) from None
    except CompileTimeError:
        raise
    except StdslError as error:
        text = str(error)
        raise CompileError(text if text.startswith(field) else f"{field}: {text}") from None
    if compiled.special_tokens:
        raise CompileError(f"{field}: special tokens ({', '.join(sorted(compiled.special_tokens)[:3])}) cannot be "
                           "part of a custom tool's input, which is text")
    if isinstance(compiled, PushdownConstraint):
        return grammar_leaf(compiled.grammar, field)
    assert isinstance(compiled, Constraint)
    return compiled.automaton
