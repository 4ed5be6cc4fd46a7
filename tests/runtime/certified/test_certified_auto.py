"""`parallel_fields="auto"`: certified drafts only where this machine's pass cost forecasts them cheaper.

The decision is tested against injected pass costs and acceptance (width nearly free: drafts; width as
expensive as on a CPU: sequential), outputs against sequential greedy decoding (token-identical, or a first
difference at a near-tie, `engine_oracle.agrees`) on DFA and pushdown constraints, and the measurement of
the pass cost against its time bound.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stdsl.cli import parse_args
from stdsl.compiler.automata.build import compile_regex
from stdsl.compiler.constraint import compile as compile_constraint
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.control.tables import machine_of
from stdsl.errors import OptionError
from stdsl.runtime.certified.blocks import block_plan
from stdsl.runtime.certified.forecast import (
    Acceptance,
    Forecast,
    KeptDraft,
    certified_units,
    later_agreement,
    remaining_forecast,
    sequential_units,
    set_acceptance,
    worth_drafting,
)
from stdsl.runtime.decode import generate, generate_batch, stream
from stdsl.runtime.options import DecodeOptions
from stdsl.runtime.pass_cost import PassCost, measure_pass_cost, pass_cost, set_pass_cost
from tests.runtime.engine_oracle import agrees
from tests.runtime.json_documents import load_task

FREE_WIDTH = PassCost((1.0, 4096.0), (1.0, 1.0))
CPU_WIDTH = PassCost.linear(1.0)
TEMPLATE = r'Verdict: (accept|reject|revise)\nScore: ([1-9]|10)\nTitle: "[A-Za-z ]{1,12}"\nNote: "[a-z ]{1,20}"\n'


@pytest.fixture
def model(tiny_model) -> Any:
    """The tiny model as a new model object: its pass cost unmeasured and its acceptance at the prior."""
    return replace(tiny_model)


def pinned(rate: float) -> Acceptance:
    """An acceptance estimate that observations cannot move."""
    return Acceptance(rate, 1e15)


def opened(schema: Any) -> Any:
    """The schema with every `additionalProperties` removed (its objects open)."""
    if isinstance(schema, dict):
        return {k: opened(v) for k, v in schema.items() if k != "additionalProperties"}
    return [opened(v) for v in schema] if isinstance(schema, list) else schema


def extraction(name: str, open_objects: bool = False) -> tuple[dict, str]:
    """An extraction task's schema (its objects opened with `open_objects`) and its first prompt."""
    task = load_task(name)
    schema = opened(task["schema"]) if open_objects else task["schema"]
    return schema, task["prompts"][0].format(schema=json.dumps(schema), source=task["source"])


# ---------------------------------------------------------------------------------------------- the decision


def forecast() -> Forecast:
    return Forecast(new_tokens=40, kept_tokens=0, blocks=6, rows=4, literal_tokens=10, context_tokens=2)


def test_free_width_drafts_and_expensive_width_decodes_sequentially() -> None:
    assert worth_drafting(forecast(), FREE_WIDTH, 0.3)
    assert not worth_drafting(forecast(), CPU_WIDTH, 0.3)
    assert not worth_drafting(forecast(), CPU_WIDTH, 1.0)


def test_one_block_left_never_drafts() -> None:
    alone = Forecast(new_tokens=40, kept_tokens=0, blocks=1, rows=1)
    assert not worth_drafting(alone, FREE_WIDTH, 1.0)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 2.0), st.integers(2, 12),
       st.floats(1.0, 200.0), st.floats(0.0, 100.0))
def test_the_forecast_is_monotone(low: float, high: float, token_cost: float, blocks: int, new: float,
                                  kept: float) -> None:
    """More acceptance never makes drafting costlier; a costlier width never makes it cheaper."""
    low, high = min(low, high), max(low, high)
    case = Forecast(new, kept, blocks, min(4, blocks), literal_tokens=blocks, context_tokens=2)
    cost = PassCost.linear(token_cost)
    assert certified_units(case, cost, high) <= certified_units(case, cost, low) + 1e-9
    assert certified_units(case, PassCost.linear(token_cost + 0.5), low) >= certified_units(case, cost, low) - 1e-9
    assert sequential_units(case, cost) == pytest.approx(new + kept)


def test_remaining_forecast_counts_blocks_left_kept_drafts_and_literals() -> None:
    automaton = compile_regex(TEMPLATE)
    blocks = block_plan(automaton)
    assert len(blocks) == 4
    whole = remaining_forecast(automaton, blocks, 0, 0, {}, 4)
    assert (whole.blocks, whole.rows, whole.kept_tokens) == (4, 4, 0)
    assert whole.new_tokens >= 4
    later = remaining_forecast(automaton, blocks, 2, 0, {3: KeptDraft(tokens=5, size=30)}, 4)
    assert (later.blocks, later.rows, later.kept_tokens) == (2, 2, 5)
    assert later.new_tokens < whole.new_tokens


def test_later_agreement_counts_each_later_block_up_to_its_first_disagreement() -> None:
    blocks = [0, 0, 1, 1, 1, 2, 2, None]
    verdict = [True, False, True, False, True, True, True, True]
    asked: list[int] = []

    def agrees_at(k: int) -> bool:
        asked.append(k)
        return verdict[k]

    assert later_agreement(blocks, 0, agrees_at) == (1 + 2, 3 + 2)
    assert 4 not in asked and 0 not in asked


def test_acceptance_learns_from_observations() -> None:
    rate = Acceptance(0.5, 10)
    rate.observe(0, 90)
    assert rate.rate == pytest.approx(0.05)
    with pytest.raises(ValueError):
        rate.observe(3, 2)


# ---------------------------------------------------------------------------------------------- pass cost


@given(st.floats(0.0, 5.0), st.integers(1, 16), st.integers(1, 512))
def test_the_linear_cost_is_the_drip_rule(token_cost: float, rows: int, width: int) -> None:
    expected = (1 + token_cost * rows * width) / (1 + token_cost)
    assert PassCost.linear(token_cost).units(rows, width) == pytest.approx(expected)


def test_measured_samples_keep_the_fastest_time_and_never_decrease() -> None:
    cost = PassCost.from_samples({1: [0.3, 0.1], 4: [0.09, 0.5], 16: [0.4]})
    assert cost.tokens == (1.0, 4.0, 16.0)
    assert cost.seconds == (0.1, 0.1, 0.4)
    assert cost.units(1, 1) == 1.0
    assert cost.units(2, 8) == pytest.approx(4.0)
    assert cost.units(1, 28) == pytest.approx(7.0)


@pytest.mark.parametrize("points", [((1.0,), (1.0,)), ((2.0, 1.0), (1.0, 2.0)), ((1.0, 2.0), (2.0, 1.0)),
                                    ((0.0, 2.0), (1.0, 2.0)), ((1.0, 2.0), (0.0, 1.0))])
def test_a_malformed_pass_cost_is_refused(points) -> None:
    with pytest.raises(OptionError) as refused:
        PassCost(*points)
    assert refused.value.argument == "pass_cost"


def test_measuring_is_bounded_in_time(model) -> None:
    began = time.perf_counter()
    cost = measure_pass_cost(model.net, budget_seconds=0.2)
    assert time.perf_counter() - began < 0.2 + 2.0
    assert len(cost.tokens) >= 2
    assert cost.units(8, 1) >= 1.0


def test_the_cost_is_measured_once_per_model_and_can_be_overridden(model) -> None:
    runs: list[int] = []

    def run(work):
        runs.append(1)
        return work()

    first = pass_cost(model, run)
    assert pass_cost(model, run) is first and len(runs) == 1
    set_pass_cost(model, FREE_WIDTH)
    assert pass_cost(model, run) is FREE_WIDTH and len(runs) == 1


# ---------------------------------------------------------------------------------------------- the option


def test_auto_is_an_accepted_value_and_anything_else_is_refused() -> None:
    assert DecodeOptions.of(parallel_fields="auto").parallel_fields == "auto"
    assert DecodeOptions.of(parallel_fields=True).parallel_fields is True
    with pytest.raises(OptionError, match="parallel_fields"):
        DecodeOptions.of(parallel_fields="always")


def test_the_cli_flag_takes_auto() -> None:
    assert parse_args(["run", "p.stc", "--parallel-fields=auto"]).parallel_fields == "auto"
    assert parse_args(["run", "p.stc", "--parallel-fields", "auto"]).parallel_fields == "auto"
    assert parse_args(["run", "p.stc", "--parallel-fields"]).parallel_fields is True
    assert parse_args(["run", "p.stc", "--parallel-fields", "off"]).parallel_fields is False
    assert parse_args(["run", "p.stc"]).parallel_fields is False
    with pytest.raises(SystemExit):
        parse_args(["run", "p.stc", "--parallel-fields=yes"])


@pytest.mark.parametrize("argv", (["run", "--parallel-fields", "p.stc"],
                                  ["run", "--parallel-fields", "p.stc", "--seed", "1"],
                                  ["run", "--parallel-fields", "--seed", "1", "p.stc"]))
def test_the_bare_flag_before_the_program_file_is_the_flag_alone(argv: list[str]) -> None:
    args = parse_args(argv)
    assert (args.file, args.parallel_fields) == ("p.stc", True)


# ---------------------------------------------------------------------------------------------- decoding


def _drafted_equals_sequential(model: Any, name: str, max_tokens: int) -> tuple[Any, Any, str]:
    """Decode task `name` sequentially, then with "auto" made to draft (free width, drafts accepted at 0.9); assert
    the draft ran and gave the sequential output; returns the sequential result, the schema and the prompt."""
    schema, prompt = extraction(name)
    sequential = generate(model, prompt, schema, max_tokens=max_tokens)
    set_acceptance(model, pinned(0.9))
    set_pass_cost(model, FREE_WIDTH)
    drafted = generate(model, prompt, schema, max_tokens=max_tokens, parallel_fields="auto")
    assert drafted.stats.rounds >= 1
    assert drafted.tokens == sequential.tokens or agrees(model, prompt, schema, max_tokens, drafted.tokens)
    assert drafted.finish_reason == sequential.finish_reason
    return sequential, schema, prompt


@pytest.mark.parametrize("name", ("person", "contact_card", "event"))
def test_auto_equals_sequential_where_it_drafts_and_where_it_does_not(model, name) -> None:
    sequential, schema, prompt = _drafted_equals_sequential(model, name, 80)
    set_pass_cost(model, CPU_WIDTH)
    plain = generate(model, prompt, schema, max_tokens=80, parallel_fields="auto")
    assert plain.stats.rounds == 0
    assert plain.tokens == sequential.tokens
    assert plain.stats.passes == sequential.stats.passes


def test_auto_stops_drafting_midway_when_drafts_stop_paying(model) -> None:
    """With drafts accepted at 0.3, free width pays while many blocks are left and not for the last ones."""
    schema, prompt = extraction("person")
    sequential = generate(model, prompt, schema, max_tokens=80)
    set_acceptance(model, pinned(0.3))
    set_pass_cost(model, FREE_WIDTH)
    mixed = generate(model, prompt, schema, max_tokens=80, parallel_fields="auto")
    certified = generate(model, prompt, schema, max_tokens=80, parallel_fields=True)
    assert 1 <= mixed.stats.rounds < certified.stats.rounds
    assert mixed.tokens == sequential.tokens or agrees(model, prompt, schema, 80, mixed.tokens)


def test_auto_on_a_template_equals_sequential(model) -> None:
    pattern = compile_regex(TEMPLATE)
    sequential = generate(model, "Review it.", pattern, max_tokens=60)
    set_acceptance(model, pinned(0.9))
    set_pass_cost(model, FREE_WIDTH)
    drafted = generate(model, "Review it.", pattern, max_tokens=60, parallel_fields="auto")
    assert drafted.stats.rounds >= 1
    assert drafted.tokens == sequential.tokens or agrees(model, "Review it.", pattern, 60, drafted.tokens)


@pytest.mark.parametrize("name", ("person", "product"))
def test_auto_on_open_objects_equals_sequential(model, name) -> None:
    """Open objects (`strict=False`) compile to a pushdown: auto forecasts over its cut configurations."""
    schema, prompt = extraction(name, open_objects=True)
    open_language = compile_constraint(schema, strict=False)
    assert isinstance(machine_of(open_language), PushdownMachine)
    sequential = generate(model, prompt, open_language, max_tokens=60)
    set_acceptance(model, pinned(0.9))
    set_pass_cost(model, FREE_WIDTH)
    drafted = generate(model, prompt, open_language, max_tokens=60, parallel_fields="auto")
    assert drafted.stats.rounds >= 1
    assert drafted.tokens == sequential.tokens or agrees(model, prompt, open_language, 60, drafted.tokens)
    set_pass_cost(model, CPU_WIDTH)
    plain = generate(model, prompt, open_language, max_tokens=60, parallel_fields="auto")
    assert plain.stats.rounds == 0 and plain.tokens == sequential.tokens


def test_auto_measures_the_pass_cost_at_first_use(model) -> None:
    schema, prompt = extraction("tool_call")
    sequential = generate(model, prompt, schema, max_tokens=60)
    measured = generate(model, prompt, schema, max_tokens=60, parallel_fields="auto")
    assert measured.tokens == sequential.tokens or agrees(model, prompt, schema, 60, measured.tokens)
    assert pass_cost(model, lambda work: pytest.fail("measured twice")) is not None


def test_auto_through_generate_batch_and_stream(model) -> None:
    schema, prompt = extraction("person")
    sequential = generate(model, prompt, schema, max_tokens=60)
    set_acceptance(model, pinned(0.9))
    set_pass_cost(model, FREE_WIDTH)
    batch = generate_batch(model, [{"prompt": prompt, "constraint": schema}] * 2, max_tokens=60,
                           parallel_fields="auto")
    streamed = stream(model, prompt, schema, max_tokens=60, parallel_fields="auto")
    text = "".join(streamed)
    for result in [*batch, streamed.result()]:
        assert not isinstance(result, Exception)
        assert result.stats.rounds >= 1
        assert result.tokens == sequential.tokens or agrees(model, prompt, schema, 60, result.tokens)
    assert text == streamed.result().text


@pytest.mark.slow
@pytest.mark.parametrize("name", ("person", "contact_card"))
def test_auto_drafting_on_smollm2_equals_sequential(smollm2, name) -> None:
    """The real model, made to draft (free width, drafts accepted at 0.9): the same output as sequential greedy."""
    _drafted_equals_sequential(replace(smollm2), name, 300)
