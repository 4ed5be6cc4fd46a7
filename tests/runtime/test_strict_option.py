"""The `strict` decoding option: a JSON Schema compiled for a call closes its objects unless `strict=False`, a
compiled constraint keeps its own (the other one asked for is refused), and the docs' serving example is short."""

from __future__ import annotations

import json

import jsonschema
import pytest

import stdsl
from stdsl.errors import OptionError

NOTHING_DECLARED = {"type": "object", "properties": {}}
"""Closed, its only output is `{}`; open, any object."""


def test_the_default_closes_and_strict_false_opens(tiny_model) -> None:
    closed = [stdsl.generate(tiny_model, "x", NOTHING_DECLARED, temperature=1.0, seed=seed, max_tokens=12).text
              for seed in range(4)]
    assert closed == ["{}"] * 4
    opened = [stdsl.generate(tiny_model, "x", NOTHING_DECLARED, temperature=1.0, seed=seed, max_tokens=12,
                             strict=False) for seed in range(4)]
    assert any(result.text != "{}" for result in opened)
    assert all(isinstance(json.loads(result.text), dict) for result in opened if result.finish_reason == "stop")


def test_batch_defaults_and_streams_carry_strict(tiny_model) -> None:
    results = stdsl.generate_batch(tiny_model, [{"prompt": "x", "constraint": NOTHING_DECLARED, "seed": s}
                                                for s in range(4)], temperature=1.0, max_tokens=12, strict=False)
    assert any(result.text != "{}" for result in results)
    assert "".join(stdsl.stream(tiny_model, "x", NOTHING_DECLARED, temperature=1.0, seed=0, max_tokens=12)) == "{}"


def test_a_compiled_constraint_keeps_its_own_strict(tiny_model) -> None:
    exact = stdsl.compile(NOTHING_DECLARED, strict=False)
    assert stdsl.generate(tiny_model, "x", exact, max_tokens=12, strict=False).finish_reason in ("stop", "length")
    with pytest.raises(OptionError, match="strict=False") as caught:
        stdsl.generate(tiny_model, "x", stdsl.compile(NOTHING_DECLARED), strict=False)
    assert caught.value.argument == "strict"
    with pytest.raises(OptionError, match="strict"):
        stdsl.generate(tiny_model, "x", exact, strict=True)
    assert stdsl.generate(tiny_model, "x", stdsl.compile(NOTHING_DECLARED), max_tokens=12).text == "{}"


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
"""The `strict: true` schema of docs/serving.md's example request."""


def test_the_serving_example_answers_briefly(smollm2) -> None:
    result = stdsl.generate(smollm2, [{"role": "user", "content": "Invent a person."}], PERSON, max_tokens=256)
    jsonschema.validate(json.loads(result.text), PERSON)
    assert set(json.loads(result.text)) == {"name", "age"}
    assert result.stats.emitted_tokens < 40, (result.text, result.stats.as_dict())
