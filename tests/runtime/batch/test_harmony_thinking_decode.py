"""gpt-oss's analysis channel on the tiny model over a tokenizer with Harmony's markers as special tokens: free
analysis text, the block closed by the one `<|end|>` id (forced at `reasoning_budget`, the final-channel header
after it), then a valid answer in the final channel under every feasible `max_tokens`; the prompt decides the mode."""
from __future__ import annotations

import jsonschema
import pytest
from row_driver import RowDriver

import stdsl
from stdsl.compiler.reasoning import HARMONY
from stdsl.errors import BudgetError, OptionError
from stdsl.runtime.batch.requests import prepare_request
from stdsl.runtime.options import DecodeOptions
from tests.runtime.special_tokenizers import family_model
from tests.runtime.thinking_templates import HARMONY_TEMPLATE

SCHEMA = {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]},
                                           "days": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["unit", "days"], "additionalProperties": False}
TREE = {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "$ref": "#/$defs/node"}
ASK = "How warm is it, in how many days?"
PROMPT = f"<|start|>user<|message|>{ASK}<|end|><|start|>assistant"


@pytest.fixture(scope="module")
def harmony(smollm2_tokenizer):
    """A tiny model whose tokenizer has `<|channel|>`, `<|message|>`, `<|end|>`, `<|start|>`... as special tokens, with
    a Harmony chat template."""
    return family_model(smollm2_tokenizer, "special", HARMONY_TEMPLATE)[1]


def utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check(model, out, opened_by_model: bool = True, budget: int | None = None) -> None:
    """The output is [analysis header] · analysis text · `<|end|><|start|>assistant` · final header · answer, the
    block closed by the one `<|end|>` id, the markers written as their ids, and the budget held (a character begun
    within it is finished first)."""
    tokenizer = model.tokenizer
    ids = tokenizer.special_tokens
    assert out.reasoning is not None and HARMONY.close not in out.reasoning
    head = HARMONY.open if opened_by_model else ""
    assert tokenizer.decode(out.tokens) == head + out.reasoning + HARMONY.close_text + HARMONY.answer_head + out.text
    assert out.tokens.count(ids["<|end|>"]) == 1 and out.tokens.count(ids["<|start|>"]) == 1
    assert out.tokens.count(ids["<|channel|>"]) == out.tokens.count(ids["<|message|>"]) == 1 + int(opened_by_model)
    end = out.tokens.index(ids["<|end|>"])
    first = out.tokens.index(ids["<|message|>"]) + 1 if opened_by_model else 0
    assert tokenizer.decode(out.tokens[first:end]) == out.reasoning
    if budget is not None:
        for taken in range(first + budget, end):
            assert not utf8(b"".join(tokenizer.token_bytes[t] for t in out.tokens[first:taken])), \
                "an analysis token past the budget that did not finish a character"


def test_every_feasible_max_tokens_gives_analysis_then_a_valid_final_answer(harmony) -> None:
    budget, outcomes = 4, []
    for max_tokens in range(1, 42):
        try:
            outcomes.append(stdsl.generate(harmony, ASK, constraint=SCHEMA, max_tokens=max_tokens, temperature=1.0,
                                           seed=max_tokens, reasoning=True, reasoning_budget=budget))
        except BudgetError:
            assert all(g is None for g in outcomes), f"max_tokens={max_tokens} refused after a smaller one fitted"
            outcomes.append(None)
    results = [g for g in outcomes if g is not None]
    least = len(outcomes) - len(results) + 1
    assert 10 < least < 34 and results
    for max_tokens, generation in enumerate(results, start=least):
        jsonschema.validate(generation.value, SCHEMA)
        assert len(generation.tokens) <= max_tokens
        check(harmony, generation, budget=budget)
    assert any(generation.reasoning for generation in results), "no free analysis text was ever written"


@pytest.mark.parametrize("answer, budget", [(SCHEMA, None), (SCHEMA, 0), (SCHEMA, 7), (None, 5),
                                            pytest.param(TREE, 3, marks=pytest.mark.slow)])
def test_the_budget_closes_the_analysis_and_the_answer_is_valid(harmony, answer, budget) -> None:
    """A DFA answer, free text, and (slow: the pushdown's tables over this tokenizer take a while) a recursive one."""
    for seed in range(2):
        out = stdsl.generate(harmony, ASK, constraint=answer, max_tokens=50, temperature=1.0, seed=seed,
                             reasoning=True, reasoning_budget=budget)
        check(harmony, out, budget=budget)
        assert len(out.tokens) <= 50
        if budget == 0:
            assert out.reasoning == ""
        if answer is not None:
            jsonschema.validate(out.value, answer)


def test_the_prompt_decides_where_the_analysis_stands(harmony) -> None:
    tokenizer = harmony.tokenizer
    opened = tokenizer.encode(PROMPT + HARMONY.open)
    out = stdsl.generate(harmony, opened, constraint=SCHEMA, max_tokens=40, temperature=1.0, seed=1,
                         reasoning_budget=3)
    check(harmony, out, opened_by_model=False, budget=3)
    jsonschema.validate(out.value, SCHEMA)
    off = stdsl.generate(harmony, ASK, constraint=SCHEMA, max_tokens=30, reasoning=False)
    assert off.reasoning is None and tokenizer.decode(off.tokens) == HARMONY.answer_head + off.text
    jsonschema.validate(off.value, SCHEMA)
    answering = tokenizer.encode(PROMPT + HARMONY.answer_head)
    plain = stdsl.generate(harmony, answering, constraint=SCHEMA, max_tokens=30)
    assert plain.reasoning is None and tokenizer.decode(plain.tokens) == plain.text
    with pytest.raises(OptionError, match="already opens the answer"):
        stdsl.generate(harmony, answering, constraint=SCHEMA, max_tokens=30, reasoning=True)
    for seed in range(4):
        either = stdsl.generate(harmony, ASK, constraint=SCHEMA, max_tokens=40, temperature=1.0, seed=seed,
                                reasoning_budget=3)
        jsonschema.validate(either.value, SCHEMA)
        if either.reasoning is None:
            assert tokenizer.decode(either.tokens) == HARMONY.answer_head + either.text
        else:
            check(harmony, either, budget=3)


def test_end_text_cannot_close_the_analysis_and_the_budget_forces_the_end_token(harmony) -> None:
    """Inside the analysis, after text ending in `<|end|`, `>` is masked out (it would spell the tag) and the `<|end|>`
    id is admitted; once the budget is spent that id is the one way on, and the closing text and the final-channel
    header follow as forced tokens."""
    tokenizer = harmony.tokenizer
    end = tokenizer.special_tokens["<|end|>"]
    thought = tokenizer.encode_ordinary("a <|end|")
    control = RowDriver.of_request(prepare_request(harmony, tokenizer.encode(PROMPT + HARMONY.open), SCHEMA,
                              DecodeOptions(max_tokens=60)))
    assert control.mask()[end]
    for token in thought:
        control.advance(token)
    mask = control.mask()
    closing = [t for t, spelling in enumerate(tokenizer.token_bytes) if spelling.startswith(b">")]
    assert mask[end] and closing and not mask[closing].any()
    budgeted = RowDriver.of_request(prepare_request(harmony, ASK, SCHEMA, DecodeOptions(max_tokens=60, reasoning=True,
                                                                   reasoning_budget=2)))
    while not budgeted.reasoning.region.thinking_open(budgeted.decided):
        budgeted.advance(int(budgeted.mask().nonzero()[0][0]))
    budgeted.advance(thought[0])
    taken = budgeted.advance(thought[1])
    assert taken[:2] == [thought[1], end]
    assert tokenizer.decode(taken[1:]).startswith(HARMONY.close_text + HARMONY.answer_head)


def test_the_stream_keeps_the_analysis_apart(harmony) -> None:
    stream = stdsl.stream(harmony, ASK, constraint=None, max_tokens=24, temperature=1.0, seed=2, reasoning=True,
                          reasoning_budget=5)
    pieces = list(stream)
    generation = stream.generation
    assert generation is not None and "".join(pieces) == generation.text
    assert stream.reasoning == generation.reasoning
    check(harmony, generation, budget=5)
