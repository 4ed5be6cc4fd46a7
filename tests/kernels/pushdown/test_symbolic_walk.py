"""The symbolic level pass over its growing step table equals stepping each token's bytes one by one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.pushdown.machine import DEAD
from stdsl.kernels import level_pass
from stdsl.kernels.pushdown import symbolic_walk as walk_module
from stdsl.kernels.pushdown.context_rows import ContextRows, subset_levels
from stdsl.kernels.pushdown.symbolic_walk import NEEDS_STACK, SymbolicStepper, symbolic_walk
from stdsl.kernels.vocabulary import Vocabulary
from tests.kernels.pushdown.test_pushdown_context_rows import MACHINES, assert_rows_equal, mixed_vocabulary, reachable


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return mixed_vocabulary(seed=3, count=400)


def stepped_bytes(stepper: SymbolicStepper, start: int, data: bytes) -> int:
    """The node after `data` from `start`, one byte at a time (DEAD ends the walk, NEEDS_STACK holds)."""
    node = start
    for byte in data:
        if node < 0:
            break
        node = stepper.step(node, byte)
    return node


def walked_nodes(stepper: SymbolicStepper, levels: list, start: int, size: int) -> np.ndarray:
    """The node per token id of a symbolic walk (DEAD for tokens it does not list)."""
    tokens, index, nodes = symbolic_walk(stepper, levels, start)
    out = np.full(size, DEAD, dtype=np.int64)
    out[tokens] = nodes[index]
    return out


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(MACHINES)), depth=st.sampled_from([2, 64]), fraction=st.sampled_from([0, 4, 10**6]),
       small=st.sampled_from([0, 20, 10**6]), known=st.integers(0, 2), below_empty=st.booleans(), data=st.data())
def test_the_walk_equals_stepping_every_token_byte_by_byte(
        vocab: Vocabulary, name: str, depth: int, fraction: int, small: int, known: int, below_empty: bool,
        data: st.DataObject) -> None:
    machine = MACHINES[name](depth)
    configs = reachable(machine, max_depth=2)
    config = data.draw(st.sampled_from(configs))
    top, empty = machine.stack_top(config, known)
    subset = np.asarray(sorted(data.draw(st.sets(st.integers(0, vocab.size - 3), min_size=1, max_size=60))))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(level_pass, "DENSE_FRACTION", fraction)
        patch.setattr(level_pass, "SMALL_LEVEL", small)
        stepper = SymbolicStepper(machine)
        start = stepper.start(machine.state_of(config), top, below_empty and empty)
        whole = walked_nodes(stepper, vocab.levels, start, vocab.size)
        part = walked_nodes(stepper, subset_levels(vocab, subset), start, vocab.size)
    oracle = SymbolicStepper(machine)
    first = oracle.start(machine.state_of(config), top, below_empty and empty)
    for token in range(vocab.size):
        spelled = vocab.token_bytes[token]
        expected = DEAD if not spelled or vocab.eos[token] else stepped_bytes(oracle, first, spelled)
        got = int(whole[token])
        kinds = {DEAD, NEEDS_STACK}
        if expected in kinds or got in kinds:
            assert got == expected, (spelled, got, expected)
        else:
            assert stepper.outcome(got) == oracle.outcome(expected), spelled
        if token in set(subset.tolist()):
            assert int(part[token]) == got


def test_rows_stay_exact_when_the_stepper_forgets_its_table_at_every_walk(
        vocab: Vocabulary, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walk_module, "MAX_STEP_TABLE_BYTES", 0)
    monkeypatch.setattr(walk_module, "FIRST_ROWS", 1)
    machine = MACHINES["number lists schema"](64)
    rows = assert_rows_equal(machine, vocab, reachable(machine, max_depth=3), ContextRows(machine, vocab))
    assert rows.stats.context_misses > 0 and len(rows.stepper) > 0
