"""A log changes only by `apply`, which returns a new one: a move applied to a kept (forked) log leaves it as it was."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.control.log import Log
from stdsl.control.special_vocabulary import vocabulary_of
from stdsl.control.tables import Tables
from stdsl.runtime.certified.forks import start_at, unbudgeted

TREE = {"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                        "required": ["k"], "additionalProperties": False}}, "$ref": "#/$defs/n"}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
CONSTRAINTS = {"dfa": PERSON, "pushdown": TREE}


def _snapshot(log: Log) -> tuple:
    return (log.configuration, log.tokens, log.data, log.forced, log.sampled, log.decided)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(CONSTRAINTS)), seed=st.integers(0, 2**16), steps=st.integers(0, 12),
       budget=st.sampled_from([None, 40]), record=st.booleans())
def test_a_move_applied_to_a_kept_log_leaves_it_unchanged(smollm2_tokenizer, kind: str, seed: int, steps: int,
                                                           budget: int | None, record: bool) -> None:
    """Walk a random admissible prefix, keep its log, then apply every next move from it: the kept log is equal to
    its snapshot, and each new log extends it by exactly the move (tokens, bytes, forced count, configuration)."""
    compiled = stdsl.compile(CONSTRAINTS[kind])
    controller = Tables.of(compiled, vocabulary_of(smollm2_tokenizer)).controller(
        smollm2_tokenizer, max_tokens=budget)
    rng = random.Random(seed)
    log = Log(controller.initial()).apply(controller.start())
    log = log.recording() if record else log
    for _ in range(steps):
        if log.configuration.finished:
            break
        log = log.apply(controller.advance(log.configuration, int(rng.choice(np.flatnonzero(
            controller.mask(log.configuration))))))
    kept, before = log, _snapshot(log)
    if log.configuration.finished:
        return
    admitted = np.flatnonzero(controller.mask(kept.configuration)).tolist()
    for token in rng.sample(admitted, min(3, len(admitted))):
        move = controller.advance(kept.configuration, token)
        grown = kept.apply(move)
        assert _snapshot(kept) == before
        assert grown.tokens == kept.tokens + move.feed and grown.data == kept.data + move.data
        assert grown.forced == kept.forced + move.forced and grown.configuration == move.configuration
        assert grown.data == controller.spell(grown.tokens)
        assert (grown.sampled_tokens() == {**kept.sampled_tokens(), len(kept.data): token}) if record \
            else grown.sampled is None


def test_a_kept_row_log_is_a_fork(smollm2_tokenizer) -> None:
    """A row's log kept (as certified drafting forks a row) is left as it was by the moves taken from it, recording
    or not, and by the drafts' unbudgeted twin and placed start."""
    for compiled in (stdsl.compile(PERSON), stdsl.compile(TREE)):
        controller = Tables.of(compiled, vocabulary_of(smollm2_tokenizer)).controller(smollm2_tokenizer, max_tokens=30)
        log = controller.started()
        before = _snapshot(log)
        for twin in (log, log.recording()):
            token = int(np.flatnonzero(controller.row_mask(twin))[0])
            moved = twin.apply(controller.taken(twin, token))
            assert _snapshot(log) == before and moved != log
        free, unbudgeted_log = unbudgeted(controller, log)
        assert free.max_tokens is None and unbudgeted_log.configuration.remaining is None
        _, placed, forced = start_at(controller, log, controller.start_state)
        assert list(placed.tokens) == forced and placed.sampled == ()
        assert _snapshot(log) == before
