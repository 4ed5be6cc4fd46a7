"""Per-row control budget (issue 37 item 3): a grammar whose masks are costly cannot stretch other rows' steps.

The hostile grammar is a recursive Lark grammar of thousands of random words under a token budget: each new
pushdown configuration costs its first live and budget masks, about 10-16 ms on this CPU against a 4 ms step
of the tiny model, so on main (e3f461c) a normal row beside two rows of it stepped 1.5-4.6x slower than beside
two normal rows. A row past its share now rests while the others run; its output and theirs are unchanged.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from engine_oracle import agrees

import stdsl
from stdsl.errors import ControlBudgetError
from stdsl.runtime.engine import Engine

PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 6},
    "bio": {"type": "string", "minLength": 150, "maxLength": 170}},
    "required": ["name", "age", "tags", "bio"]}
NORMAL_TOKENS = 320
"""The normal row writes a bio of 150+ characters, so it samples enough tokens that the two hostile rows' one-time
`CONTROL_GRACE` (20 ms each, for a grammar's first masks) is a small part of its time: over the 9 tokens it sampled
without a bio the grace alone was 1.4x of a 10 ms step, and with a 60-character bio (about 20 tokens) it was most of
a 1.5x ratio once the tiny model's step fell to 6.4 ms (base and main alike measured 1.52-1.55x)."""


def hostile_grammar(words: int, seed: int) -> stdsl.Constraint:
    """A recursive grammar of `words` random lowercase words (a fresh machine per seed: nothing cached)."""
    rng = random.Random(seed)
    vocabulary = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
                         for _ in range(words)})
    alternatives = " | ".join(f'"{word}"' for word in vocabulary)
    return stdsl.compile(stdsl.Grammar(f'start: item+\nitem: "(" start ")" | {alternatives}\n'))


def normal_step_seconds(model: Any, companion: Any) -> float:
    """The normal row's mean seconds per sampled token beside two rows of `companion` (sampled at temperature 1,
    which visits new configurations), in a fresh engine; the companions are cancelled once the normal row ends."""
    engine = Engine(model, max_rows=4, prompt_cache_bytes=0)
    others = [engine.submit("Write words:", companion, max_tokens=300, temperature=1.0, seed=seed) for seed in (3, 4)]
    began = time.perf_counter()
    result = engine.submit("A person:", stdsl.compile(PERSON), max_tokens=NORMAL_TOKENS).result()
    seconds = (time.perf_counter() - began) / result.stats.sampled_tokens
    for other in others:
        other.cancel()
    engine.close()
    return seconds


def test_a_hostile_grammar_does_not_stretch_a_normal_rows_steps(tiny_model) -> None:
    normal = stdsl.compile(PERSON)
    normal_step_seconds(tiny_model, normal)  # warm-up: the schema's tables and the model's kernels
    beside_normal, beside_hostile = [], []
    for trial in range(3):
        beside_normal.append(normal_step_seconds(tiny_model, normal))
        beside_hostile.append(normal_step_seconds(tiny_model, hostile_grammar(3000, trial)))
    # Other processes share this machine: the least disturbed trial of each kind is compared.
    # Quiet, 2026-12-06: 1.15-1.21 with rests, 1.48-1.49 with shares and grace lifted (no row ever rests).
    ratio = min(beside_hostile) / min(beside_normal)
    assert ratio <= 1.35, (beside_normal, beside_hostile)


def test_a_resting_row_and_its_companion_decode_as_alone(tiny_model) -> None:
    hostile = hostile_grammar(3000, 100)
    normal = stdsl.compile(PERSON)
    engine = Engine(tiny_model, max_rows=4, prompt_cache_bytes=0)
    first = engine.submit("Write words:", hostile, max_tokens=40)
    second = engine.submit("A person:", normal, max_tokens=NORMAL_TOKENS)
    hostile_out, normal_out = first.result(), second.result()
    rests = engine.metrics()["control_rests"]
    engine.close()
    assert rests > 0
    assert agrees(tiny_model, "Write words:", hostile, 40, list(hostile_out.tokens))
    assert agrees(tiny_model, "A person:", normal, NORMAL_TOKENS, list(normal_out.tokens))
    assert hostile.accepts(hostile_out.text)


def test_a_row_past_max_control_seconds_fails_naming_the_limit(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=2, max_control_seconds=0.01)
    handle = engine.submit("Write words:", hostile_grammar(3000, 200), max_tokens=60)
    with pytest.raises(ControlBudgetError, match="max_control_seconds"):
        handle.result()
    engine.close()


def test_control_work_is_timed_in_cpu_seconds_so_a_loaded_machine_fails_no_row(tiny_model, monkeypatch) -> None:
    """A mask that waits 50 ms of wall-clock time per token (as on a machine busy with other processes) while using
    little CPU: 0.5 s of wall time against a 0.2 s `max_control_seconds`, and the row still completes."""
    from stdsl.control.controller import Controller

    fill_row = Controller.fill_row

    def descheduled(self: Controller, log: Any, out: Any) -> None:
        time.sleep(0.05)
        fill_row(self, log, out)

    monkeypatch.setattr(Controller, "fill_row", descheduled)
    constraint = stdsl.compile(stdsl.Regex(r"[a-z]{60,70}"))
    engine = Engine(tiny_model, max_rows=2, max_control_seconds=0.2)
    began = time.perf_counter()
    result = engine.submit("Write a word:", constraint, max_tokens=60).result()
    waited = time.perf_counter() - began
    engine.close()
    assert result.stats.sampled_tokens >= 10 and waited >= 0.5
    assert constraint.accepts(result.text)


def test_the_server_answers_a_too_costly_constraint_with_a_400() -> None:
    from stdsl.server.openai_api.errors import from_stdsl_error

    answer = from_stdsl_error(ControlBudgetError("the constraint took 61.0 s ... max_control_seconds (60 s)"))
    assert answer.status == 400 and answer.code == "constraint_too_costly"


def test_max_control_seconds_must_be_positive(tiny_model) -> None:
    with pytest.raises(stdsl.OptionError, match="max_control_seconds"):
        Engine(tiny_model, max_control_seconds=0)
