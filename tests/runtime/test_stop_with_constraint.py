"""`stop` applies to free text only: with a constraint, a stop string would cut the output short of acceptance and
hand back truncated text marked accepted (`.value` then raised a raw JSONDecodeError). Every entry point refuses
the pair with an OptionError naming `stop` before any model pass; the server's refusal is
tested in tests/server/test_stop_refused_with_constraint.py."""

from __future__ import annotations

from typing import Any

import pytest

import stdsl
from stdsl.compiler.constraint import Regex
from stdsl.errors import OptionError
from stdsl.runtime.decode import engine_for
from stdsl.runtime.engine import Engine

CONSTRAINTS = [{"type": "integer"}, Regex(r"[0-9]{3}"), {"type": "object", "properties": {"a": {"type": "string"}}}]


@pytest.mark.parametrize("constraint", CONSTRAINTS)
@pytest.mark.parametrize("extra", [{}, {"parallel_fields": True}])
def test_generate_refuses_stop_with_a_constraint_before_any_pass(tiny_model, constraint: Any, extra: dict) -> None:
    passes = engine_for(tiny_model).metrics()["passes"]
    with pytest.raises(OptionError) as caught:
        stdsl.generate(tiny_model, "Go.", constraint, stop=["1"], **extra)
    assert caught.value.argument == "stop" and "stop" in str(caught.value)
    with pytest.raises(OptionError):
        stdsl.stream(tiny_model, "Go.", constraint, stop="}")
    assert engine_for(tiny_model).metrics()["passes"] == passes


def test_every_other_entry_point_refuses_it_too(tiny_model) -> None:
    (outcome,) = stdsl.generate_batch(tiny_model, [{"prompt": "Go.", "constraint": {"type": "integer"}, "stop": "1"}])
    assert isinstance(outcome, OptionError) and outcome.argument == "stop"
    engine = Engine(tiny_model, max_rows=1)
    with pytest.raises(OptionError) as caught:
        engine.submit("Go.", {"type": "integer"}, stop=["1"])
    assert caught.value.argument == "stop"
    engine.close()


def test_stop_still_ends_free_text(tiny_model) -> None:
    whole = stdsl.generate(tiny_model, "Say things.", None, max_tokens=24)
    cut_at = whole.text[len(whole.text) // 2:][:2]
    cut = stdsl.generate(tiny_model, "Say things.", None, max_tokens=24, stop=[cut_at])
    assert cut.text == whole.text[:whole.text.find(cut_at)] and cut.finish_reason == "stop"
