"""The one-token-per-step adapter over the controller: what it refuses, and how its outputs end.

The oracle for the end of an output is the controller's own decode loop with a budget too large to
matter: an output the adapter reports as "stop" or "eos" must be that output token for token, and any
other output must be reported as "length".
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from row_driver import RowDriver

import stdsl
from stdsl.errors import BudgetError, GenerationError, StdslError
from stdsl.integrations.stepwise import StepwiseConstraint, stepwise_controller

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer",
                                                                                             "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
TREE = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer", "maximum": 9},
                                                           "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                                    "maxItems": 1}},
                           "required": ["v", "kids"], "additionalProperties": False}},
        "$ref": "#/$defs/node"}
ROOMY = 200


def run_engine(constraint, tokenizer, budget: int | None, seed: int) -> StepwiseConstraint:
    """An engine that appends one token per step: the argmax of seeded random scores under the adapter's mask,
    until eos or the budget; every step's scores come from the step's index, so two runs agree until their
    masks do."""
    steps = StepwiseConstraint(stdsl.compile(constraint), tokenizer, budget)
    steps.start()
    for step in range(budget if budget is not None else ROOMY):
        scores = np.random.default_rng((seed, step)).standard_normal(steps.vocab.size)
        token = int(np.argmax(np.where(steps.mask(), scores, -np.inf)))
        steps.accept(token)
        if token == steps.eos_id:
            break
    return steps


def test_a_constraint_with_special_tokens_is_refused(smollm2_tokenizer) -> None:
    """vLLM's and transformers' processors mask every row with one shared vocabulary: refused, not approximated."""
    compiled = stdsl.compile(stdsl.Grammar('start: "a" <|im_start|>'))
    with pytest.raises(StdslError, match="<|im_start|>"):
        stepwise_controller(compiled, smollm2_tokenizer, None)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), cut=st.integers(0, 8), recursive=st.booleans())
def test_stop_and_eos_mean_the_budget_changed_nothing(smollm2_tokenizer, seed: int, cut: int,
                                                      recursive: bool) -> None:
    constraint = TREE if recursive else PERSON
    roomy = run_engine(constraint, smollm2_tokenizer, ROOMY, seed).generation()
    assert roomy.finish_reason in ("stop", "eos")
    budget = max(1, len(roomy.tokens) + 2 - cut)
    try:
        result = run_engine(constraint, smollm2_tokenizer, budget, seed).generation()
    except BudgetError:
        return
    assert stdsl.compile(constraint).accepts(result.text) and len(result.tokens) <= budget
    if result.finish_reason != "length":
        assert (result.tokens, result.finish_reason) == (roomy.tokens, roomy.finish_reason)
    if result.tokens != roomy.tokens:
        assert result.finish_reason == "length"
    if budget < len(roomy.tokens):
        assert result.finish_reason == "length"


def test_counts_agree_with_the_tokens(smollm2_tokenizer) -> None:
    steps = run_engine(PERSON, smollm2_tokenizer, 40, seed=5)
    result = steps.generation(prompt_tokens=7)
    assert result.stats.prompt_tokens == 7
    assert result.stats.emitted_tokens == len(result.tokens) == result.stats.forced_tokens + result.stats.sampled_tokens
    assert smollm2_tokenizer.decode(result.tokens) == result.text == result.data.decode()
    assert result.value == stdsl.compile(PERSON).parse(result.text)


def test_an_output_the_engine_cut_short_is_an_error_not_a_result(smollm2_tokenizer) -> None:
    steps = StepwiseConstraint(stdsl.compile(PERSON), smollm2_tokenizer, None)
    steps.start()
    steps.accept(int(np.flatnonzero(steps.mask())[0]))
    with pytest.raises(GenerationError, match="outside an accepting state"):
        steps.generation()


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), recursive=st.booleans(), budget=st.sampled_from([None, 18, 30]))
def test_the_adapter_is_the_controller_and_masks_as_the_row_state(smollm2_tokenizer, seed: int, recursive: bool,
                                                                  budget: int | None) -> None:
    """The adapter keeps a controller configuration and a log, no row state; every step's mask equals the one a
    row state (stdsl's own loop without healing) gives on the same tokens, singletons where it forces."""
    constraint = stdsl.compile(TREE if recursive else PERSON)
    try:
        steps = run_engine(TREE if recursive else PERSON, smollm2_tokenizer, budget, seed)
    except BudgetError:
        return
    assert not any(isinstance(value, RowDriver) for value in vars(steps).values())
    row = RowDriver.of(constraint, smollm2_tokenizer, max_tokens=budget, healing=False)
    replay = StepwiseConstraint(constraint, smollm2_tokenizer, budget)
    replay.start()
    queue = list(row.start())
    for token in steps.tokens[: len(steps.tokens)] + ([steps.eos_id] if steps.eos_sampled else []):
        if queue:
            expected = np.zeros(steps.vocab.size, dtype=bool)
            expected[queue.pop(0)] = True
        elif row.finished:
            break
        else:
            expected = row.mask()
            queue = list(row.advance(token))[1:]
        assert np.array_equal(replay.mask(), expected)
        replay.accept(token)
    assert replay.generation().tokens == steps.generation().tokens
