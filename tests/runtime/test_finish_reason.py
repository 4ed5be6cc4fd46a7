"""`finish_reason` says whether `max_tokens` shaped the output (issue 28 item 7).

"length": at some step the budget mask withheld a token the constraint alone admitted, a forced span was
split on its own to fit, or the budget ran out where the constraint admitted more; a larger `max_tokens`
could have given another output. "stop" / "eos": none of that happened, so the output is token for token
what decoding with any larger budget gives. The oracle is that larger run itself (greedy, one row at a time).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "bio": {"type": "string", "maxLength": 12}},
          "required": ["name", "bio"], "additionalProperties": False}
TREE = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "string", "maxLength": 6},
                                                           "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                                    "maxItems": 2}},
                           "required": ["v", "kids"], "additionalProperties": False}},
        "$ref": "#/$defs/node"}
ROOMY = 256


def _reference(model, constraint):
    reference = stdsl.generate(model, "Invent one.", constraint, max_tokens=ROOMY)
    assert reference.finish_reason in ("stop", "eos") and len(reference.tokens) < ROOMY // 2
    return reference


@pytest.mark.parametrize(("constraint", "past"), [(PERSON, 3), (TREE, 16)], ids=["dfa", "pushdown"])
def test_stop_means_the_budget_changed_nothing(tiny_model, constraint, past: int) -> None:
    """A pushdown's budget bounds tokens by bytes (Proposition 2), so it binds further past the output's end."""
    reference = _reference(tiny_model, constraint)
    finished = len(reference.tokens)
    seen = set()
    for budget in range(max(1, finished - 6), finished + past):
        try:
            result = stdsl.generate(tiny_model, "Invent one.", constraint, max_tokens=budget)
        except stdsl.BudgetError:
            continue
        json.loads(result.text)
        seen.add(result.finish_reason)
        if result.finish_reason != "length":
            assert result.tokens == reference.tokens and result.finish_reason == reference.finish_reason, budget
        if result.tokens != reference.tokens:
            assert result.finish_reason == "length", (budget, result.text)
        if budget < finished:
            assert result.finish_reason == "length" and result.tokens != reference.tokens
    assert "length" in seen


def test_a_value_the_budget_closed_reports_length(tiny_model) -> None:
    """The issue's case: the object is complete and valid, but only because the budget closed it early."""
    reference = _reference(tiny_model, PERSON)
    result = stdsl.generate(tiny_model, "Invent one.", PERSON, max_tokens=len(reference.tokens) - 4)
    value = json.loads(result.text)
    assert set(value) == {"name", "bio"} and result.text.endswith('"}')
    assert result.finish_reason == "length"
    assert reference.finish_reason in ("stop", "eos")


@settings(max_examples=6, deadline=None)
@given(st.integers(4, 40))
def test_certified_parallel_fields_report_the_same_reason(tiny_model, budget: int) -> None:
    """Certified drafts are token-identical to greedy decoding, so their finish reason is the same."""
    try:
        sequential = stdsl.generate(tiny_model, "Invent one.", PERSON, max_tokens=budget)
    except stdsl.BudgetError:
        return
    parallel = stdsl.generate(tiny_model, "Invent one.", PERSON, max_tokens=budget, parallel_fields=True)
    assert parallel.tokens == sequential.tokens
    assert parallel.finish_reason == sequential.finish_reason


def test_an_output_the_tokenizer_can_only_end_is_stop_not_length(tiny_model) -> None:
    """Under "b" | "bc", after the token "b" only the end is left (the vocabulary spells "bc" as one token, so "c"
    after "b" is no canonical split): the output stopped, it was not cut by max_tokens=200 (it said "length")."""

    assert len(tiny_model.tokenizer.encode("bc")) == 1
    grammar = stdsl.Grammar('start: "b" | "bc"')
    for seed in range(4):
        out = stdsl.generate(tiny_model, "Say b.", constraint=grammar, max_tokens=200, temperature=1.0, seed=seed)
        assert out.finish_reason in ("stop", "eos"), (out.text, out.finish_reason)
        again = stdsl.generate(tiny_model, "Say b.", constraint=grammar, max_tokens=400, temperature=1.0, seed=seed)
        assert again.tokens == out.tokens
