"""Pushdown masks on the decode path from the device vector equal the host rows' on every configuration to depth 4.

The oracle is the host path of the same `RowDriver` (`PushdownRows`, the exact budget of `PushdownBudget`),
the device one that state after the runtime placed its device masks (`stdsl.runtime.batch.device_masks`):
at every configuration reachable byte by byte to stack depth 4, with no budget and with budgets around the
configuration's least need (where the budget binds), the device-sourced mask equals it bit for bit.  On a
GPU (benchmarks/gpu_checks.sh) the same tests run on the device; here on MLX's CPU backend.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from row_driver import RowDriver

import stdsl
from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
from stdsl.compiler.pushdown.machine import PushdownMachine
from stdsl.control.budget.automaton_budget import UNREACHABLE
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.tables import Tables
from stdsl.errors import GenerationError, StdslError
from stdsl.kernels.pushdown.device_masks import MASK_SOURCE_ENV, DeviceMasks, mask_source
from stdsl.kernels.pushdown.rows import PushdownRows
from stdsl.kernels.walk import backend
from stdsl.model_files.tokenizer import Tokenizer
from stdsl.runtime.batch.device_masks import place_masks
from tests.control.budget import test_pushdown_budget
from tests.control.budget.test_pushdown_budget import recursive_trees
from tests.kernels.pushdown.test_pushdown_context_rows import MACHINES, mixed_vocabulary, reachable, recursive_tasks


@pytest.fixture(scope="module")
def small_tokenizer() -> Tokenizer:
    """The budget tests' byte-level BPE (every byte, JSON punctuation runs and key words, an eos special)."""
    return test_pushdown_budget.small_tokenizer.__wrapped__()


BUDGET_SLACK = (0, 1, 3)
"""Budgets tried at a configuration: its least need plus each of these (0 and 1 bind; 3 mostly does not)."""


def test_the_choice_is_the_argument_else_the_environment_else_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MASK_SOURCE_ENV, raising=False)
    on_gpu = backend() in ("metal", "cuda")
    assert mask_source() == ("device" if on_gpu else "host") == mask_source("auto")
    monkeypatch.setenv(MASK_SOURCE_ENV, "device")
    assert mask_source() == "device" and mask_source("host") == "host"
    monkeypatch.setenv(MASK_SOURCE_ENV, " Host ")
    assert mask_source() == "host" and mask_source("device") == "device"
    monkeypatch.setenv(MASK_SOURCE_ENV, "gpu")
    with pytest.raises(StdslError, match=r"'gpu' from \$STDSL_PUSHDOWN_MASKS is not one of auto, device, host"):
        mask_source()
    with pytest.raises(StdslError, match="'tpu' from the mask source argument"):
        mask_source("tpu")
    with pytest.raises(StdslError, match="max_masks"):
        DeviceMasks(PushdownRows(MACHINES["expressions"](4), mixed_vocabulary()), max_masks=0)


@pytest.mark.parametrize("name", sorted(MACHINES))
@pytest.mark.parametrize("max_depth", [3, 64])
def test_device_masks_equal_host_rows_on_every_configuration_to_depth_four(name: str, max_depth: int) -> None:
    vocab = mixed_vocabulary()
    rows = PushdownRows(MACHINES[name](max_depth), vocab)
    masks = DeviceMasks(rows, max_masks=2)
    configs = reachable(rows.machine)
    for config in configs:
        got = masks.mask(config)
        assert np.array_equal(got, rows.mask(config)), rows.machine.configuration(config)
        got[:] = False  # a caller's edits never reach the kept mask
        assert np.array_equal(masks.mask(config), rows.mask(config))
    assert masks.device.stats.masks == len(configs)  # each asked twice, computed once
    assert np.array_equal(masks.mask(configs[0]), rows.mask(configs[0]))
    assert masks.device.stats.masks == len(configs) + 1  # evicted (two are kept), computed again


def state_pair(machine: PushdownMachine, tokenizer: Tokenizer, budgeted: bool) -> tuple[RowDriver, RowDriver]:
    """A host-sourced and a device-sourced state of one machine (with a budget to set per configuration)."""
    vocab = vocabulary_of(tokenizer)
    max_tokens = UNREACHABLE if budgeted else None
    host = RowDriver(machine, tokenizer, vocab, max_tokens=max_tokens)
    device = RowDriver(machine, tokenizer, vocab, max_tokens=max_tokens)
    host.controller = place_masks(host.controller, "host")
    device.controller = place_masks(device.controller, "device")
    assert host.controller.device_masks is None and device.controller.device_masks is not None
    return host, device


def state_mask(control: RowDriver, config: int, remaining: int | None) -> np.ndarray | str:
    """The state's mask at `config` with `remaining` tokens left (the error's text where none is admissible)."""
    control.log = replace(control.log, configuration=replace(control.log.configuration, state=config,
                                                             remaining=remaining, finished=False))
    try:
        return control.mask()
    except GenerationError as error:
        return str(error)


def assert_states_agree(machine: PushdownMachine, tokenizer: Tokenizer) -> int:
    """Host and device masks of `RowDriver` agree at every configuration to depth 4, without a budget and with
    budgets around each configuration's least need; returns the comparisons made where the budget bound."""
    plain = state_pair(machine, tokenizer, budgeted=False)
    host, device = state_pair(machine, tokenizer, budgeted=True)
    budget = Tables.of(machine, host.vocab).budget(host.planner)
    bound = 0
    for config in reachable(machine):
        expected = state_mask(plain[0], config, None)
        assert np.array_equal(state_mask(plain[1], config, None), expected), machine.configuration(config)
        need = budget.need_at(config)
        if need >= UNREACHABLE:
            continue
        for slack in BUDGET_SLACK:
            narrowed = state_mask(host, config, need + slack)
            got = state_mask(device, config, need + slack)
            if isinstance(narrowed, str) or isinstance(got, str):
                assert got == narrowed, (machine.configuration(config), need + slack)
                continue
            assert np.array_equal(got, narrowed), (machine.configuration(config), need + slack)
            bound += not np.array_equal(narrowed, expected)
    return bound


TREE = {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
    "n": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["n", "kids"], "additionalProperties": False}}}


@pytest.mark.parametrize("max_depth", [3, 64])
def test_states_agree_with_and_without_budgets_on_a_tree(small_tokenizer: Tokenizer, max_depth: int) -> None:
    assert assert_states_agree(compile_recursive(TREE, max_depth=max_depth).machine, small_tokenizer) > 0


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schema=recursive_trees())
def test_states_agree_on_random_recursive_schemas(small_tokenizer: Tokenizer, schema: dict) -> None:
    assert_states_agree(stdsl.compile(schema).machine, small_tokenizer)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schema=recursive_trees())
def test_states_agree_on_many_random_recursive_schemas(small_tokenizer: Tokenizer, schema: dict) -> None:
    assert_states_agree(stdsl.compile(schema).machine, small_tokenizer)


def test_states_agree_on_the_shared_recursive_tasks(small_tokenizer: Tokenizer) -> None:
    bound = sum(assert_states_agree(stdsl.compile(schema).machine, small_tokenizer)
                for schema, _ in recursive_tasks())
    assert bound > 0


def test_a_stack_cap_past_the_vector_keeps_host_rows(small_tokenizer: Tokenizer) -> None:
    machine = compile_recursive(TREE, max_depth=65).machine
    control = RowDriver(machine, small_tokenizer, vocabulary_of(small_tokenizer))
    control.controller = place_masks(control.controller, "device")
    assert control.controller.device_masks is None
    control.start()
    assert control.mask().any()
