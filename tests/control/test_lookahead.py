"""The lookahead warms a new grammar's tables ahead of its row and changes no token.

Oracles: the same constraint decoded by a controller on tables of its own (a pickled copy of the compiled
constraint, so nothing the lookahead filled is shared), and the row cache's size (a state the lookahead
visited costs the row no new row walk).
"""

from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.control.controller import MAX_MASKS, Controller
from stdsl.control.lookahead import Lookahead
from stdsl.control.tables import controller_of

TREE = {"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                        "required": ["k"], "additionalProperties": False}}, "$ref": "#/$defs/n"}
TWO_FIELDS = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
              "required": ["name", "city"]}
SPECS: list[tuple[Any, bool]] = [
    (TWO_FIELDS, True),  # closed: one DFA
    (TWO_FIELDS, False),  # open: a pushdown (undeclared members nest freely)
    (TREE, True),
    (stdsl.Regex(r"(ab|cd)*e[0-9]{2,4}"), True),
]


def _controllers(tokenizer: Any, spec: int, budget: int | None) -> tuple[Controller, Controller]:
    """Two controllers of one constraint that share no table: one for the lookahead's row, one as the oracle."""
    constraint, strict = SPECS[spec]
    compiled = stdsl.compile(constraint, strict=strict) if isinstance(constraint, dict) else stdsl.compile(constraint)
    copy = pickle.loads(pickle.dumps(compiled))
    return tuple(controller_of(c, tokenizer, max_tokens=budget, masks=MAX_MASKS)
                 for c in (compiled, copy))  # type: ignore[return-value]


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.integers(0, len(SPECS) - 1), budget=st.sampled_from([None, 12, 40]),
       picks=st.lists(st.integers(0, 10_000), min_size=1, max_size=12))
def test_a_row_with_a_lookahead_decodes_the_same_tokens(smollm2_tokenizer, spec, budget, picks) -> None:
    """At every step the lookahead runs to its end first; masks and feeds equal those on untouched tables."""
    warmed, oracle = _controllers(smollm2_tokenizer, spec, budget)
    lookahead = Lookahead(warmed)
    first, expected = warmed.start(), oracle.start()
    assert first.feed == expected.feed
    at, oracle_at = first.configuration, expected.configuration
    for pick in picks:
        if at.finished:
            assert oracle_at.finished
            break
        lookahead.follow(at)
        while lookahead.step():
            pass
        allowed = warmed.mask(at)
        np.testing.assert_array_equal(allowed, oracle.mask(oracle_at))
        token = int(np.flatnonzero(allowed)[pick % int(allowed.sum())])
        if warmed.vocab.eos[token]:
            break
        move, oracle_move = warmed.advance(at, token), oracle.advance(oracle_at, token)
        assert move.feed == oracle_move.feed and move.forced == oracle_move.forced
        at, oracle_at = move.configuration, oracle_move.configuration


def test_the_states_one_token_ahead_are_warm(smollm2_tokenizer) -> None:
    """After the lookahead from the start, the row's next mask (after any of the likeliest branches) walks no
    new row; without it, the same step walks some."""
    warmed, cold = _controllers(smollm2_tokenizer, 0, None)
    lookahead = Lookahead(warmed)
    at = warmed.start().configuration
    cold_at = cold.start().configuration
    lookahead.follow(at)
    while lookahead.step():
        pass
    assert lookahead.units > 0
    allowed = warmed.mask(at)
    for token in lookahead._representatives(at.state, allowed):
        rows = len(warmed.rows)
        warmed.mask(warmed.advance(at, token).configuration)
        assert len(warmed.rows) == rows
    walked = []
    for token in lookahead._representatives(at.state, allowed):
        rows = len(cold.rows)
        cold.mask(cold.advance(cold_at, token).configuration)
        walked.append(len(cold.rows) - rows)
    assert any(walked)


def test_following_the_same_configuration_keeps_its_work(smollm2_tokenizer) -> None:
    """`follow` of the configuration already followed does not start over; a finished one leaves nothing to do."""
    warmed, _ = _controllers(smollm2_tokenizer, 3, None)
    lookahead = Lookahead(warmed, depth=2)
    at = warmed.start().configuration
    lookahead.follow(at)
    assert lookahead.step()
    while lookahead.step():
        pass
    done = lookahead.units
    lookahead.follow(at)
    assert not lookahead.step() and lookahead.units == done
    lookahead.follow(replace(at, finished=True))
    assert not lookahead.step()
