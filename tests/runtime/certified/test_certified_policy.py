"""Certified drafting is a scheduling policy of the batch core (`batch/policies.py`), not a second engine.

Its run is resumed on the runner thread once the rows it waits for have ended, it starts no thread, a cancel
reaches its drafts, and a policy that fails fails only its own request.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence

import pytest

from stdsl.errors import Cancelled, GenerationError
from stdsl.runtime.batch.handle import RowHandle
from stdsl.runtime.decode import submit
from stdsl.runtime.engine import Engine
from stdsl.runtime.runner import RUNNER

FIELDS = {"type": "object", "required": [f"f{i}" for i in range(6)],
          "properties": {f"f{i}": {"type": "string", "minLength": 12, "maxLength": 16} for i in range(6)},
          "additionalProperties": False}


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def test_certified_decoding_starts_no_thread_and_drafts_on_the_runner(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=4)
    assert engine.submit("Warm up.", {"type": "integer"}, max_tokens=4).result(timeout=120).text
    before = _threads()
    handle = submit(engine, "Fill the record.", FIELDS, parallel_fields=True)
    seen: set[threading.Thread] = set()
    runs = set()
    for _ in handle:
        seen |= _threads()
        runs.add(engine.metrics()["policy_runs"])
    result = handle.result()
    assert result.accepted and result.stats.rounds >= 1
    assert seen <= before, f"certified decoding started threads: {[t.name for t in seen - before]}"
    assert 1 in runs, "the certified request was not a policy run of the engine's core"
    assert engine.metrics()["policy_runs"] == 0
    engine.close()


@pytest.mark.parametrize("when", ["at once", "after its first text"])
def test_cancelling_a_certified_request_cancels_its_drafts(tiny_model, when) -> None:
    engine = Engine(tiny_model, max_rows=4)
    handle = submit(engine, "Fill the record.", FIELDS, parallel_fields=True)
    if when == "after its first text":
        next(iter(handle))
    handle.cancel()
    with pytest.raises(Cancelled):
        handle.result(timeout=120)
    assert RUNNER.wait_idle(engine.core, timeout=120), "the policy or its drafts were never freed"
    metrics = engine.metrics()
    assert metrics["policy_runs"] == 0 and metrics["rows_active"] == 0 and metrics["rows_queued"] == 0
    assert engine.submit("Again.", {"type": "integer"}, max_tokens=4).result(timeout=120).text
    engine.close()


def test_a_policy_is_resumed_on_the_runner_once_its_rows_have_ended(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=4)
    resumed_on: list[bool] = []

    def make(handle: RowHandle) -> Generator[Sequence[RowHandle], None, None]:
        rows = [engine.submit(f"Count {i}.", {"type": "integer"}, max_tokens=4) for i in range(3)]
        yield rows
        resumed_on.append(RUNNER.is_current())
        assert all(row.done for row in rows)
        results = [row.result() for row in rows]
        handle._finish(results[0], None)

    handle = engine.submit_policy(make)
    assert handle.result(timeout=120).text.lstrip("-").isdigit()
    assert resumed_on == [True]
    engine.close()


def test_a_policy_that_raises_fails_only_its_own_request(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=4)

    def broken(handle: RowHandle) -> Generator[Sequence[RowHandle], None, None]:
        yield [engine.submit("Count.", {"type": "integer"}, max_tokens=4)]
        raise KeyError("policy failed")

    def silent(handle: RowHandle) -> Generator[Sequence[RowHandle], None, None]:
        yield ()

    failing, ending = engine.submit_policy(broken), engine.submit_policy(silent)
    other = engine.submit("Count again.", {"type": "integer"}, max_tokens=6)
    with pytest.raises(GenerationError, match="policy failed"):
        failing.result(timeout=120)
    with pytest.raises(GenerationError, match="ended without a result"):
        ending.result(timeout=120)
    assert other.result(timeout=120).text.lstrip("-").isdigit()
    assert RUNNER.wait_idle(engine.core, timeout=120)
    engine.close()


def test_closing_the_engine_cancels_a_certified_request(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=4)
    handle = submit(engine, "Fill the record.", FIELDS, parallel_fields=True)
    engine.close()
    with pytest.raises(Cancelled):
        handle.result(timeout=120)
    assert not engine.core.busy
