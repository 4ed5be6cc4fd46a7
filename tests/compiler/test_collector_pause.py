"""The collector's thresholds are raised while compiles run, restored after the last, and it still collects."""

from __future__ import annotations

import gc
import threading
import uuid
from collections.abc import Iterator

import pytest

import stdsl
from stdsl.compiler import constraint, constraint_spec
from stdsl.compiler.collector_pause import COMPILE_THRESHOLDS, collector_paused


@pytest.fixture
def thresholds() -> Iterator[None]:
    """Python's default thresholds for the test, the process's own restored after it."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def _raised() -> bool:
    return all(now >= during for now, during in zip(gc.get_threshold(), COMPILE_THRESHOLDS))


def test_raised_within_and_restored_after(thresholds: None) -> None:
    gc.set_threshold(500, 5, 200)
    with collector_paused():
        assert gc.get_threshold() == (COMPILE_THRESHOLDS[0], COMPILE_THRESHOLDS[1], 200)
        with collector_paused():
            assert _raised()
        assert _raised()
    assert gc.get_threshold() == (500, 5, 200)


def test_restored_after_a_refusal(thresholds: None) -> None:
    with pytest.raises(stdsl.SchemaError):
        with collector_paused():
            stdsl.compile({"type": "object", "properties": {"a": {"$ref": "#/definitions/missing"}}})
    assert gc.get_threshold() == (700, 10, 10)


def test_restored_only_when_the_last_thread_leaves(thresholds: None) -> None:
    entered, leave = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other() -> None:
        with collector_paused():
            entered.set()
            leave.wait(10)
        seen.append(_raised())

    thread = threading.Thread(target=other)
    thread.start()
    assert entered.wait(10)
    with collector_paused():
        assert _raised()
    assert _raised(), "one compile left while another still ran: the thresholds must stay raised"
    leave.set()
    thread.join(10)
    assert seen == [False]
    assert gc.get_threshold() == (700, 10, 10)


def test_the_collector_still_collects_cycles_within(thresholds: None) -> None:
    collections = gc.get_stats()[0]["collections"]
    with collector_paused():
        for _ in range(3 * COMPILE_THRESHOLDS[0]):
            cycle: list[object] = []
            cycle.append(cycle)
        assert gc.get_stats()[0]["collections"] > collections


def test_every_compile_entry_runs_under_it(thresholds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, bool]] = []
    fresh = uuid.uuid4().hex  # no compile of this test is a cache hit
    compile_schema = constraint._compile

    def recording_compile(*args: object, **kwargs: object) -> object:
        seen.append(("compile", _raised()))
        return compile_schema(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(constraint, "_compile", recording_compile)
    stdsl.compile({"type": "object", "properties": {fresh: {"type": "integer"}}})

    class Program:
        def program_constraint(self) -> object:
            seen.append(("program", _raised()))
            return stdsl.compile({"enum": ["collector", fresh]})

    stdsl.compile(Program())
    build = constraint_spec.build

    def recording_build(*args: object, **kwargs: object) -> object:
        seen.append(("spec", _raised()))
        return build(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(constraint_spec, "build", recording_build)
    compiled, error, _ = constraint_spec.build_outcome({"kind": "regex", "pattern": f"[ab]{{3}}{fresh}"}, 10.0)
    assert error is None and compiled is not None
    assert seen == [("compile", True), ("program", True), ("compile", True), ("spec", True), ("compile", True)]
    assert gc.get_threshold() == (700, 10, 10)
