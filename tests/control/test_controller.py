"""The pure controller: `advance` leaves its configuration as it was, moves equal a row state's, and the batched
bitmask equals the token table (DFA and pushdown configurations).

Oracles: a deep copy of the configuration taken before the move, the mutable row state decoding the same tokens,
and brute force over the vocabulary (each token's bytes walked through the automaton or the pushdown machine).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from row_driver import RowDriver

import stdsl
from stdsl.compiler.automata.automaton import Automaton
from stdsl.control.controller import MAX_MASKS, Configuration, Controller
from stdsl.control.tables import controller_of, machine_of
from stdsl.errors import GenerationError, StdslError
from stdsl.kernels.token_mask import pack_words

TREE = {"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                        "required": ["k"], "additionalProperties": False}}, "$ref": "#/$defs/n"}
SPECS: list[Any] = [
    stdsl.Regex(r'\{"id":[0-9]{1,3},"ok":(true|false)\}'),
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "n": {"type": "integer"}},
     "required": ["name", "n"]},
    TREE,
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "bc"]}}}},
]


def _walk(constraint: Any, state: int, data: bytes) -> bool:
    """Whether `data` read from `state` stays live (brute force: byte by byte)."""
    machine = machine_of(constraint)
    if not isinstance(machine, Automaton):
        return machine.step(state, data) >= 0
    automaton: Automaton = machine
    for byte in data:
        state = automaton.next_state(state, byte)
        if state < 0:
            return False
    return True


def _run(controller: Controller, picks: list[int], limit: int = 12) -> list[Configuration]:
    """The configurations a controller reaches taking, at each step, the admissible token at index pick % count."""
    move = controller.start()
    reached = [move.configuration]
    for pick in picks[:limit]:
        config = reached[-1]
        if config.finished:
            break
        allowed = np.flatnonzero(controller.mask(config))
        token = int(allowed[pick % len(allowed)])
        if token in controller.vocab.eos_ids:
            break
        reached.append(controller.advance(config, token).configuration)
    return reached


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.integers(0, len(SPECS) - 1), budget=st.sampled_from([None, 14, 40]),
       picks=st.lists(st.integers(0, 10_000), min_size=1, max_size=14))
def test_advance_is_pure_and_moves_as_the_row_state(smollm2_tokenizer, spec, budget, picks) -> None:
    compiled = stdsl.compile(SPECS[spec])
    controller = controller_of(compiled, smollm2_tokenizer, max_tokens=budget, masks=MAX_MASKS)
    row = RowDriver.of(compiled, smollm2_tokenizer, max_tokens=budget)
    move = controller.start()
    assert list(move.feed) == row.start() and move.configuration == row.configuration
    config = move.configuration
    for pick in picks:
        if config.finished:
            with pytest.raises(GenerationError):
                controller.advance(config, 0)
            break
        allowed = controller.mask(config)
        np.testing.assert_array_equal(allowed, row.mask())
        token = int(np.flatnonzero(allowed)[pick % int(allowed.sum())])
        if row.vocab.eos[token]:
            assert controller.accepting(config) and row.accepting
            break
        before = copy.deepcopy(config)
        first, second = controller.advance(config, token), controller.advance(config, token)
        assert first == second and config == before  # same input, same move; the configuration given unchanged
        assert list(first.feed) == row.advance(token)
        assert first.configuration == row.configuration
        config = first.configuration
    assert controller.finish_reason(config, eos_sampled=False) in ("stop", "length")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.integers(0, len(SPECS) - 1), budget=st.sampled_from([None, 14, 40]),
       picks=st.lists(st.integers(0, 10_000), min_size=1, max_size=10))
def test_the_batched_bitmask_is_the_token_table(smollm2_tokenizer, spec, budget, picks) -> None:
    # Words come straight from the rows' packed words where a mask is its state's live row, else packed from it.
    compiled = stdsl.compile(SPECS[spec])
    controller = controller_of(compiled, smollm2_tokenizer, max_tokens=budget, masks=MAX_MASKS)
    reached = _run(controller, picks)
    vocab = controller.vocab
    size = vocab.size
    flags = np.zeros((len(reached) + 1, size + 5), dtype=bool)
    words = np.full((len(reached), -(-size // 32) + 1), -1, dtype=np.int32)
    controller.fill(reached, flags)
    controller.fill(reached, words)
    assert not flags[:, size:].any() and not flags[len(reached)].any() and not words[:, -1].any()
    for row, config in enumerate(reached):
        np.testing.assert_array_equal(words[row, :-1], pack_words(flags[row, :size]))
        unpacked = np.unpackbits(words[row, :-1].view(np.uint8), bitorder="little")[:size].astype(bool)
        np.testing.assert_array_equal(unpacked, flags[row, :size])
        allowed = flags[row, :size]
        if config.finished:  # only eos is left
            assert set(np.flatnonzero(allowed)) == set(vocab.eos_ids.tolist())
            continue
        table = np.array([bool(spelled) and _walk(compiled, config.state, spelled) for spelled in vocab.token_bytes])
        table[vocab.eos_ids] = controller.accepting(config)
        if config.cover is None and not config.pending and budget is None:
            np.testing.assert_array_equal(allowed, table)  # nothing held back: exactly the live tokens
        else:
            assert not (allowed & ~table).any()  # the boundary cover and the budget keep a subset of them
            assert allowed.any()


def test_forks_are_kept_configurations(smollm2_tokenizer) -> None:
    compiled = stdsl.compile(SPECS[0])
    controller = controller_of(compiled, smollm2_tokenizer, max_tokens=None, masks=MAX_MASKS)
    start = controller.start().configuration
    digits = [int(t) for t in np.flatnonzero(controller.mask(start))][:2]
    left, right = (controller.advance(start, token) for token in digits)
    assert left.configuration != right.configuration
    assert controller.advance(start, digits[0]) == left  # the shared start is still there to fork from


def test_refusals(smollm2_tokenizer) -> None:
    compiled = stdsl.compile(SPECS[0])
    controller = controller_of(compiled, smollm2_tokenizer, max_tokens=None)
    config = controller.start().configuration
    refused = int(np.flatnonzero(~controller.mask(config))[0])
    with pytest.raises(GenerationError):
        controller.advance(config, refused)
    with pytest.raises(StdslError, match="Configuration"):
        controller.mask("not a configuration")  # type: ignore[arg-type]
    with pytest.raises(StdslError, match="bool or int32"):
        controller.fill([config], np.zeros((1, 10), dtype=np.float32))
    with pytest.raises(StdslError, match="columns"):
        controller.fill([config], np.zeros((1, 10), dtype=bool))


def _ends_after_brute_force(automaton: Automaton, token_bytes: list[bytes | None], state: int) -> bool:
    """Whether some token's bytes, walked byte by byte from `state` and then along the forced bytes after them, reach
    a state with no live byte."""
    for data in token_bytes:
        at = state
        for byte in data or b"":
            at = automaton.next_state(at, byte)
            if at < 0:
                break
        if at < 0 or not data:
            continue
        seen = set()
        while automaton.forced_byte[at] >= 0 and at not in seen:
            seen.add(at)
            at = automaton.next_state(at, int(automaton.forced_byte[at]))
        if automaton.live_count[at] == 0:
            return True
    return False


@pytest.mark.parametrize("pattern", [r"[a-z]{1,3}", r"(yes|no)!?", r"[a-z ]+", r"ab(cd|ce)", r"[0-9]{2}-x"])
def test_may_end_after_is_brute_force_over_the_vocabulary(smollm2_tokenizer, pattern: str) -> None:
    """`may_end_after` at every state equals the walk of every token's bytes (a forced chain after them included)."""
    compiled = stdsl.compile(stdsl.Regex(pattern))
    controller = controller_of(compiled, smollm2_tokenizer, max_tokens=None)
    automaton = machine_of(compiled)
    assert isinstance(automaton, Automaton)
    token_bytes = list(controller.planner.token_bytes)
    for state in range(automaton.num_states):
        assert controller.may_end_after(state) == _ends_after_brute_force(automaton, token_bytes, state), state
