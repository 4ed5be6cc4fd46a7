"""The device pushdown state `[q, pointer, stack[0..63], S]`: masks equal `PushdownRows`, advances equal the machine."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.pushdown.machine import DEAD
from stdsl.errors import StdslError
from stdsl.kernels.pushdown.device import (
    POINTER,
    STACK,
    SUM,
    VECTOR_SIZE,
    PushdownDevice,
    check_pushdown_device,
    compare_device,
)
from stdsl.kernels.pushdown.rows import PushdownRows
from stdsl.kernels.vocabulary import Vocabulary
from tests.compiler.pushdown.test_pushdown import nested_lists
from tests.kernels.pushdown.test_pushdown_context_rows import MACHINES, mixed_vocabulary, reachable, recursive_tasks


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return mixed_vocabulary()


def device_for(name: str, max_depth: int, vocab: Vocabulary) -> tuple[PushdownDevice, PushdownRows]:
    machine = MACHINES[name](max_depth)
    rows = PushdownRows(machine, vocab)
    return PushdownDevice(machine, vocab, rows.symbolic), rows


@pytest.mark.parametrize("name", sorted(MACHINES))
@pytest.mark.parametrize("max_depth", [3, 64])
def test_device_masks_and_advances_equal_rows_and_machine_on_every_configuration_to_depth_four(
        vocab: Vocabulary, name: str, max_depth: int) -> None:
    device, rows = device_for(name, max_depth, vocab)
    configs = reachable(device.machine)
    assert compare_device(device, rows, configs, remaining=(None, 4), dead_stride=50) > len(configs)
    assert device.stats.free_uploads <= device.machine.grammar.num_states


def test_the_suite_exercises_context_rows_host_steps_the_cap_and_the_budget(vocab: Vocabulary) -> None:
    device, rows = device_for("number lists schema", 64, vocab)
    compare_device(device, rows, reachable(device.machine), dead_stride=50)
    assert device.stats.context_uploads > 0 and device.stats.host_steps > 0
    capped, _ = device_for("number lists schema", 3, vocab)
    deep = capped.encode(capped.machine.step(capped.machine.start, b"[[["))
    allowed = np.array(capped.mask(deep))
    index = vocab.token_bytes.index
    assert not allowed[index(b"[")] and not allowed[index(b"1")] and allowed[index(b"]")]
    assert capped.configuration(capped.advance(deep, index(b"[")))[0] == DEAD
    start = device.start()
    assert np.array(device.mask(start)).sum() > np.array(device.mask(start, remaining=3)).sum() > 0


def test_vectors_are_canonical_and_carry_the_bn_sum(vocab: Vocabulary) -> None:
    device, rows = device_for("tree schema", 64, vocab)
    machine = device.machine
    text = b'{"v":1,"kids":[{"v":2,"kids":[{"v":1,"kids":['
    config = machine.step(machine.start, text)
    vector = np.array(device.encode(config))
    assert vector.shape == (VECTOR_SIZE,) and vector[POINTER] == machine.depth(config) == 3
    assert vector[SUM] + machine.grammar.bn[vector[0]] == machine.need(config)
    assert not vector[STACK + 3:SUM].any()
    stepped = device.start()
    for token in [vocab.token_bytes.index(bytes([byte])) for byte in text]:
        stepped = device.advance(stepped, token)
    assert np.array_equal(np.array(stepped), vector) and device.config_of(stepped) == config


def test_rows_are_uploaded_once_and_dead_vectors_refuse_to_mask(vocab: Vocabulary) -> None:
    device, _ = device_for("expressions", 64, vocab)
    start = device.start()
    device.mask(start)
    uploaded, count = device.stats.uploaded_bytes, device.stats.free_uploads
    device.mask(start)
    assert device.stats.uploaded_bytes == uploaded and device.stats.free_uploads == count
    assert device.nbytes >= uploaded > 0
    dead = device.advance(start, vocab.token_bytes.index(b"]"))
    assert device.configuration(dead) == (DEAD, ())
    with pytest.raises(StdslError, match="dead"):
        device.mask(dead)
    with pytest.raises(StdslError, match="stack slots"):
        PushdownDevice(nested_lists(max_depth=65), vocab)


WALKERS: dict[tuple[str, int], tuple[PushdownDevice, PushdownRows]] = {}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([("expressions", 64), ("mutual schema", 64), ("number lists schema", 3),
                        ("tree schema", 4)]),
       st.lists(st.integers(0, 10**6), min_size=1, max_size=40))
def test_random_walks_keep_the_vector_and_the_machine_in_lockstep(case: tuple[str, int], choices: list[int]) -> None:
    if case not in WALKERS:
        WALKERS[case] = device_for(*case, mixed_vocabulary())
    device, rows = WALKERS[case]
    machine, eos = device.machine, int(device.vocab.eos_ids[0])
    config, vector = machine.start, device.start()
    for choice in choices:
        allowed = np.array(device.mask(vector))
        assert np.array_equal(allowed, rows.mask(config))
        live = np.flatnonzero(allowed)
        token = int(live[choice % live.size])
        if token == eos:
            assert machine.config_accepts(config)
            return
        config = int(rows.next_states(config)[token])
        vector = device.advance(vector, token)
        assert device.configuration(vector) == machine.configuration(config)


def test_sampled_prefixes_of_gold_documents_with_smollm2(smollm2_tokenizer) -> None:
    from stdsl.compiler.json_schema.pushdown_constraint import compile_recursive
    from stdsl.control.special_vocabulary import vocabulary_of

    vocab = vocabulary_of(smollm2_tokenizer)
    for schema, gold in recursive_tasks()[:3]:
        machine = compile_recursive(schema).machine
        rows = PushdownRows(machine, vocab)
        device = PushdownDevice(machine, vocab, rows.symbolic)
        config, vector = machine.start, device.start()
        for step, token in enumerate(smollm2_tokenizer.encode(gold)):
            if step % 5 == 0:
                assert np.array_equal(np.array(device.mask(vector)), rows.mask(config)), (schema, step)
                compare_device(device, rows, [config], remaining=(7,), dead_stride=4099, live_limit=40)
            config = int(rows.next_states(config)[token])
            vector = device.advance(vector, token)
            assert device.configuration(vector) == machine.configuration(config), (schema, step)
        assert np.array(device.mask(vector))[vocab.eos_ids].all()


def test_check_pushdown_device_passes_on_this_backend() -> None:
    assert check_pushdown_device() > 1000
