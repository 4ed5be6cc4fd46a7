"""SmolLM2 behind a thinking chat template: free thinking text, the block closed by the reasoning budget, then a
valid answer, under every feasible `max_tokens` (and refused below the least output)."""
from __future__ import annotations

import re

import pytest

import stdsl
from stdsl.errors import BudgetError
from tests.runtime.thinking_templates import CLOSE, OPENING, tokens_before, with_template

ANSWER = r"(yes|no), [0-9]"
BUDGET = 3


def test_every_feasible_max_tokens_thinks_then_answers(smollm2) -> None:
    model = with_template(smollm2, OPENING, "smollm2-thinking")
    prompt = "Is 7 a prime number? Answer yes or no and a digit."
    constraint = stdsl.Regex(ANSWER)
    least = None
    for max_tokens in range(1, 14):
        try:
            generation = stdsl.generate(model, prompt, constraint=constraint, max_tokens=max_tokens,
                                        reasoning_budget=BUDGET)
        except BudgetError:
            assert least is None, f"max_tokens={max_tokens} refused after {least} fitted"
            continue
        least = least or max_tokens
        assert re.fullmatch(ANSWER, generation.text) and len(generation.tokens) <= max_tokens
        assert generation.reasoning is not None and CLOSE not in generation.reasoning
        spelled = b"".join(model.tokenizer.token_bytes[t] for t in generation.tokens)
        assert spelled == generation.reasoning.encode() + b"</think>\n\n" + generation.text.encode()
        assert tokens_before(model.tokenizer, generation.tokens, len(generation.reasoning.encode())) <= BUDGET
    assert least is not None and least > 1
    assert generation.reasoning, "the last run had room to think"
    with pytest.raises(BudgetError):
        stdsl.generate(model, prompt, constraint=constraint, max_tokens=least - 1)
