"""Reasoning models on the tiny model: free thinking text, the block closed by a reasoning budget, then a valid
answer, under every feasible `max_tokens` (refused below the least), with a DFA, a pushdown and free text."""
from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

import stdsl
from stdsl.control.reasoning_budget import ReasoningPolicy
from stdsl.errors import BudgetError
from tests.runtime.thinking_templates import CHOOSING, CLOSE, OPENING, tokens_before, with_template

SCHEMA = {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]},
                                           "days": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["unit", "days"], "additionalProperties": False}
TREE = {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "$ref": "#/$defs/node"}
ASK = "How warm is it, in how many days?"


@pytest.fixture(scope="module")
def opening(tiny_model):
    return with_template(tiny_model, OPENING, "tiny-opening")


@pytest.fixture(scope="module")
def choosing(tiny_model):
    return with_template(tiny_model, CHOOSING, "tiny-choosing")


def spelled(model, generation) -> bytes:
    return b"".join(model.tokenizer.token_bytes[t] for t in generation.tokens)


def check_opened(model, generation, budget: int | None) -> None:
    """The thinking text has no closing tag, the output is thinking · closing text · answer, and the budget holds
    (a character begun within it is finished first: a byte constraint never cuts one)."""
    assert generation.reasoning is not None and CLOSE not in generation.reasoning
    thought = generation.reasoning.encode()
    assert spelled(model, generation) == thought + b"</think>\n\n" + generation.text.encode()
    if budget is not None:
        inside = tokens_before(model.tokenizer, generation.tokens, len(thought))
        for taken in range(budget, inside):
            prefix = b"".join(model.tokenizer.token_bytes[t] for t in generation.tokens[:taken])
            assert not utf8(prefix), "a thinking token past the budget that did not finish a character"


def utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_every_feasible_max_tokens_gives_thinking_then_a_valid_answer(opening) -> None:
    budget, outcomes = 4, []
    for max_tokens in range(1, 30):
        try:
            outcomes.append(stdsl.generate(opening, ASK, constraint=SCHEMA, max_tokens=max_tokens, temperature=1.0,
                                           seed=max_tokens, reasoning_budget=budget))
        except BudgetError:
            assert all(g is None for g in outcomes), f"max_tokens={max_tokens} refused after a smaller one fitted"
            outcomes.append(None)
    results = [g for g in outcomes if g is not None]
    least = len(outcomes) - len(results) + 1
    assert 1 < least < 20 and results
    for max_tokens, generation in enumerate(results, start=least):
        jsonschema.validate(generation.value, SCHEMA)
        assert len(generation.tokens) <= max_tokens
        check_opened(opening, generation, budget)
    assert max(tokens_before(opening.tokenizer, g.tokens, len(g.reasoning.encode())) for g in results) >= budget


@pytest.mark.parametrize("budget", [None, 0, 1, 7])
def test_the_budget_closes_the_block_and_max_tokens_bounds_both_parts(opening, budget) -> None:
    generation = stdsl.generate(opening, ASK, constraint=SCHEMA, max_tokens=60, temperature=1.0, seed=5,
                                reasoning_budget=budget)
    jsonschema.validate(json.loads(generation.text), SCHEMA)
    check_opened(opening, generation, budget)
    assert len(generation.tokens) == generation.stats.emitted_tokens <= 60
    if budget == 0:
        assert generation.reasoning == ""


def test_a_recursive_answer_follows_the_block(opening) -> None:
    for seed in range(3):
        generation = stdsl.generate(opening, "A tree:", constraint=TREE, max_tokens=40, temperature=1.0, seed=seed,
                                    reasoning_budget=6)
        jsonschema.validate(generation.value, TREE)
        check_opened(opening, generation, 6)


def test_free_text_after_the_block_and_the_stream_keeps_thinking_apart(opening) -> None:
    stream = stdsl.stream(opening, ASK, constraint=None, max_tokens=20, temperature=1.0, seed=2, reasoning_budget=5)
    pieces = list(stream)
    generation = stream.generation
    assert generation is not None and "".join(pieces) == generation.text
    assert stream.reasoning == generation.reasoning
    check_opened(opening, generation, 5)


def test_the_template_switch_and_the_model_choosing(choosing) -> None:
    off = stdsl.generate(choosing, ASK, constraint=SCHEMA, max_tokens=30, reasoning=False)
    assert off.reasoning is None and not spelled(choosing, off).startswith(b"<think>")
    jsonschema.validate(off.value, SCHEMA)
    on = stdsl.generate(choosing, ASK, constraint=SCHEMA, max_tokens=30, reasoning=True, reasoning_budget=3)
    assert spelled(choosing, on).startswith(b"<think>") and on.reasoning is not None
    jsonschema.validate(on.value, SCHEMA)
    for seed in range(4):
        either = stdsl.generate(choosing, ASK, constraint=SCHEMA, max_tokens=30, temperature=1.0, seed=seed,
                                reasoning_budget=3)
        jsonschema.validate(either.value, SCHEMA)
        assert (either.reasoning is not None) == spelled(choosing, either).startswith(b"<think>")


def test_below_the_least_output_is_refused_before_decoding(opening) -> None:
    with pytest.raises(BudgetError, match="no valid output fits"):
        stdsl.generate(opening, ASK, constraint=SCHEMA, max_tokens=3)


def test_no_thinking_template_changes_nothing(tiny_model) -> None:
    plain = stdsl.generate(tiny_model, ASK, constraint=SCHEMA, max_tokens=30)
    assert plain.reasoning is None
    with pytest.raises(stdsl.OptionError, match="reasoning_budget"):
        stdsl.generate(tiny_model, ASK, constraint=SCHEMA, reasoning_budget=-1)


def test_the_policy_lives_on_the_row(opening) -> None:
    from stdsl.runtime.batch.requests import prepare_request
    from stdsl.runtime.options import DecodeOptions

    request = prepare_request(opening, ASK, SCHEMA, DecodeOptions.of(reasoning_budget=2))
    assert isinstance(request.controller.reasoning, ReasoningPolicy) and request.controller.reasoning.budget == 2


def test_parallel_fields_decode_the_block_first_then_the_answer(opening) -> None:
    generation = stdsl.generate(opening, ASK, constraint=SCHEMA, max_tokens=40, parallel_fields=True,
                                reasoning_budget=2)
    jsonschema.validate(generation.value, SCHEMA)
    check_opened(opening, generation, 2)


def test_the_closing_tag_can_always_be_written(smollm2_tokenizer) -> None:
    """At every character boundary of random thinking text some token begins `</think>`."""
    from row_driver import RowDriver

    from stdsl.compiler.reasoning import THINK, think_then
    from stdsl.control.special_vocabulary import vocabulary_of

    composed = think_then(stdsl.compile(SCHEMA), THINK, "opened").constraint
    vocab = vocabulary_of(smollm2_tokenizer)
    rng, boundaries = random.Random(3), 0
    for _ in range(3):
        state = RowDriver(composed.automaton, smollm2_tokenizer, vocab, max_tokens=None)
        state.start()
        for _ in range(25):
            allowed = state.mask()
            spellings = state.planner.spellings
            closing = allowed & spellings.agreeing_with(CLOSE.encode()) & (spellings.lengths > 0)
            if utf8(state.decided):
                assert closing.any(), state.decided
                boundaries += 1
            others = np.flatnonzero(allowed & ~closing)
            state.advance(int(rng.choice(others.tolist())))
        assert CLOSE.encode() not in bytes(state.decided)
    assert boundaries > 30
