"""Generation under grammars on SmolLM2-135M-Instruct (issue 26): every output is in the grammar's language.

One non-recursive Lark grammar (one DFA), a left-recursive Lark arithmetic grammar and a JSON grammar in GBNF
(both pushdowns), each under a roomy and a tight `max_tokens`: the output is accepted by the compiled constraint
and, for Lark, by Lark's own Earley parser; below the least feasible budget `generate` refuses with BudgetError
before decoding, and at that budget the output is still valid.
"""

from __future__ import annotations

import json

import lark
import pytest

import stdsl
from stdsl.errors import BudgetError

LIST_LARK = r"""
start: "Colors: " COLOR ("," COLOR)~0..2 "."
COLOR: "red" | "green" | "blue" | WORD
%import common.WORD
%ignore " "
"""

ARITHMETIC_LARK = r"""
?start: sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: atom | product "*" atom -> mul | product "/" atom -> div
?atom: NUMBER -> number | "-" atom -> neg | "(" sum ")"
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""

JSON_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ( string ":" ws value ("," ws string ":" ws value)* )? "}"
array  ::= "[" ( value ("," ws value)* )? "]"
string ::= "\"" [a-zA-Z0-9 _-]{0,12} "\""
number ::= "-"? [0-9]{1,6}
ws     ::= " "?
"""

CASES = [
    ("list", stdsl.Grammar(LIST_LARK), "Name two colors.", (40, 8)),
    ("arithmetic", stdsl.Grammar(ARITHMETIC_LARK), "Write an arithmetic expression that equals 10.", (32, 6)),
    ("json", stdsl.Grammar(JSON_GBNF, syntax="gbnf"), "Describe a cat as a JSON object.", (48, 10)),
]


def in_language(grammar: stdsl.Grammar, text: str) -> None:
    """The text is accepted by the compiled grammar and, where the grammar is Lark, by Lark's Earley parser."""
    assert stdsl.compile(grammar).accepts(text), f"constraint refuses its own output {text!r}"
    if grammar.syntax == "gbnf":
        json.loads(text)
        return
    lark.Lark(grammar.text, parser="earley", lexer="dynamic").parse(text)


@pytest.mark.parametrize("name, grammar, prompt, budgets", CASES, ids=[c[0] for c in CASES])
def test_outputs_are_in_the_language(smollm2, name: str, grammar: stdsl.Grammar, prompt: str,
                                     budgets: tuple[int, ...]) -> None:
    for max_tokens in budgets:
        result = stdsl.generate(smollm2, prompt, constraint=grammar, max_tokens=max_tokens)
        assert result.stats.emitted_tokens <= max_tokens
        in_language(grammar, result.text)


def test_budget_below_the_least_output_is_refused(smollm2) -> None:
    grammar = stdsl.Grammar('start: "The answer, in one word, is: " WORD "."\n%import common.WORD\n')
    refused = 0
    for max_tokens in range(1, 20):
        try:
            result = stdsl.generate(smollm2, "What is the capital of France?", constraint=grammar,
                                    max_tokens=max_tokens)
        except BudgetError:
            refused += 1
            continue
        assert result.stats.emitted_tokens <= max_tokens
        in_language(grammar, result.text)
        break
    else:
        pytest.fail("no budget up to 19 tokens was feasible")
    assert refused >= 8, f"only budgets below {refused + 1} refused: the forced prefix alone is longer"
