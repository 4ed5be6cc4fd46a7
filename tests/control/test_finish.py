"""The one end of an output: the controller's finish reason and the Generation, asked the same way by every surface."""

from __future__ import annotations

import pytest
from row_driver import RowDriver

import stdsl
from stdsl.control.finish import finished_generation
from stdsl.errors import GenerationError
from stdsl.generation import Stats

TREE = {"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                        "required": ["k"], "additionalProperties": False}}, "$ref": "#/$defs/n"}


def test_a_constraint_with_special_tokens_decodes_with_their_spellings(smollm2_tokenizer) -> None:
    compiled = stdsl.compile(stdsl.Grammar('start: "a" <|im_start|>').with_special_tokens(
        smollm2_tokenizer.special_tokens))
    control = RowDriver.of(compiled, smollm2_tokenizer, max_tokens=None)
    assert control.vocab.token_bytes[smollm2_tokenizer.special_tokens["<|im_start|>"]] is not None


def test_the_end_of_an_output(smollm2_tokenizer) -> None:
    control = RowDriver.of(stdsl.compile(stdsl.Regex("yes|no")), smollm2_tokenizer, max_tokens=None)
    control.start()
    with pytest.raises(GenerationError, match="outside an accepting state"):
        finished_generation(control.controller, control.log, Stats(), "length", None)
    cut = finished_generation(control.controller, control.log, Stats(), "length", None, partial=True)
    assert cut.text == "" and not cut.accepted
    token = smollm2_tokenizer.encode("yes")[0]
    control.advance(token)
    finish_reason, at = control.controller.finish_reason, control.configuration
    assert control.accepting and finish_reason(at, eos_sampled=False) == "stop"
    assert finish_reason(at, eos_sampled=True) == "eos"
    assert finish_reason(at, eos_sampled=True, stopped=True) == "stop"  # a stop string ended it
    result = finished_generation(control.controller, control.log, Stats(sampled_tokens=1), "stop", str.upper)
    assert (result.text, result.data, result.tokens, result.value) == ("yes", b"yes", [token], "YES")
    assert result.accepted
    assert result.stats.emitted_tokens == 1 and result.stats.forced_tokens == control.forced_count


def test_an_output_the_budget_shaped_ends_with_length(smollm2_tokenizer) -> None:
    control = RowDriver.of(stdsl.compile(stdsl.Regex("a{1,40}")), smollm2_tokenizer, max_tokens=3)
    control.start()
    while not control.finished:
        allowed = control.mask()
        control.advance(int(allowed.nonzero()[0][-1]))
    finish_reason, at = control.controller.finish_reason, control.configuration
    assert finish_reason(at, eos_sampled=False) == "length"
    assert not control.budget_shaped and finish_reason(at, eos_sampled=True, stopped=True) == "stop"
