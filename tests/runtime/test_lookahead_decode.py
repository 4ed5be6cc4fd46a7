"""The batch core warms new grammars' tables while its passes run, and no token changes for it.

Oracle: the same rows decoded by a core whose lookahead never runs, each constraint a pickled copy (tables of
its own, so nothing the first core warmed is shared).
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import stdsl
from stdsl.runtime.batch import pass_clock
from stdsl.runtime.batch.core import BatchCore
from stdsl.runtime.batch.requests import prepare_request
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.options import DecodeOptions

PROMPTS = ["Ann Lee lives in Oslo.", "Describe a city.", "Who?"]
SCHEMA = {"type": "object", "properties": {"who": {"type": "string"}, "town": {"type": "string"},
                                           "n": {"type": "integer"}}, "required": ["who", "town"]}


def _constraints() -> list[Any]:
    """A closed schema (DFA), the same open (pushdown) and a grammar, compiled anew (tables of their own)."""
    return [stdsl.compile(SCHEMA), stdsl.compile(SCHEMA, strict=False),
            stdsl.compile(stdsl.Grammar('start: item (", " item)*\nitem: /[a-z]{1,6}/ | NUMBER\n'
                                        '%import common.NUMBER'))]


def _decode(model: Any, constraints: list[Any], ahead: bool) -> tuple[list[list[int]], float]:
    """Every (prompt, constraint) row decoded greedily in one core; the tokens per row and the core's lookahead
    seconds. `ahead`: each pass is taken to last a second, so the lookahead runs to its end every step (on any
    backend: the CPU's default fraction is none); else never.
    """
    core = BatchCore(model, max_rows=4)
    core.clock.waited = (  # type: ignore[method-assign]
        lambda waited_from: setattr(core.clock, "expected", 1.0 if ahead else 0.0))
    handles = []
    for prompt in PROMPTS:
        for constraint in constraints:
            handle = RowHandle(lambda: None)
            core.insert(prepare_request(model, prompt, constraint, DecodeOptions.of(max_tokens=24)), handle)
            handles.append(handle)
    for _ in range(400):
        core.step()
        if not core.busy:
            break
    assert not core.busy
    return [handle.result(timeout=0).tokens for handle in handles], core.seconds["ahead"]


@pytest.mark.timeout(600)
def test_new_grammars_decode_the_same_tokens_with_their_tables_warmed_ahead(tiny_model, monkeypatch) -> None:
    monkeypatch.setattr(pass_clock, "AHEAD_FRACTION", pass_clock.GPU_AHEAD_FRACTION)
    constraints = _constraints()
    copies = [pickle.loads(pickle.dumps(c)) for c in constraints]
    warmed, ahead_seconds = _decode(tiny_model, constraints, ahead=True)
    plain, plain_seconds = _decode(tiny_model, copies, ahead=False)
    assert ahead_seconds > 0 and plain_seconds == 0
    assert warmed == plain


def test_a_cached_grammar_is_not_looked_ahead(tiny_model) -> None:
    """Rows of a grammar whose tables a row already filled get no lookahead (it would only repeat lookups)."""
    constraint = pickle.loads(pickle.dumps(_constraints()[0]))  # tables of its own, whatever ran before
    first = prepare_request(tiny_model, PROMPTS[0], constraint, DecodeOptions.of(max_tokens=24))
    second = prepare_request(tiny_model, PROMPTS[1], constraint, DecodeOptions.of(max_tokens=24))
    assert first.fresh and not second.fresh


def test_the_lookahead_is_off_by_default_where_the_pass_shares_the_host_cores(monkeypatch) -> None:
    """On MLX's CPU backend the pass's threads share the cores with the runner's Python: no lookahead by default;
    on a GPU it takes what is left of the pass; a set fraction wins on either."""
    import mlx.core as mx

    monkeypatch.setattr(pass_clock, "AHEAD_FRACTION", None)
    expected = pass_clock.GPU_AHEAD_FRACTION if mx.default_device() == mx.gpu else 0.0
    assert pass_clock.ahead_fraction() == expected
    monkeypatch.setattr(pass_clock, "AHEAD_FRACTION", 0.3)
    assert pass_clock.ahead_fraction() == 0.3
