"""A compile time limit refuses a constraint that takes too long, promptly, and leaves no limit behind."""

from __future__ import annotations

import time

import pytest

from stdsl.compiler.constraint import Regex, compile
from stdsl.compiler.deadline import check_deadline, compile_deadline
from stdsl.errors import CompileError, CompileTimeError
from tests.compiler.fuzz.time_limit import collector_seconds

SLOW = "(a|b)*a(a|b){16}"


def test_a_slow_compile_is_refused_soon_after_the_limit() -> None:
    start = time.perf_counter()
    with pytest.raises(CompileTimeError, match="0.2 s limit"):
        compile(Regex(SLOW), max_seconds=0.2)
    assert time.perf_counter() - start < 1.5


def test_the_limit_is_a_compile_error_and_does_not_outlive_its_block() -> None:
    assert issubclass(CompileTimeError, CompileError)
    with compile_deadline(1e-9):
        time.sleep(0.001)
        with pytest.raises(CompileTimeError):
            check_deadline("a test")
    check_deadline("after the block")
    assert compile(Regex("[ab]{3}"), max_seconds=5.0).accepts(b"aba")


def test_a_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        with compile_deadline(0):
            pass


OVERSHOOT_CASES = [
    ("x(?:(?:(?:ab){0,40}c){0,40}d){0,300}", "counted repetition|NFA construction", 0.3),
    ("(a|b)*a(a|b){21}", "determinization", 1.0),
    ("(?:[a-z]{0,80}x){0,200}y", "determinization", 1.0),
]


@pytest.mark.parametrize(("pattern", "stage", "limit"), OVERSHOOT_CASES)
def test_the_limit_is_honoured_within_ten_percent(pattern: str, stage: str, limit: float) -> None:
    """Every long loop checks the limit: the refusal comes at most 10% after it (plus 50 ms of scheduling on a
    shared machine), in the stage that was running, half-built NFA freed included.  Each case needs several times
    its limit in its stage on any machine (the state budget is lifted so that only the clock stops the build).
    Time the process's garbage collector ran is not counted (see `time_limit`)."""
    start = time.perf_counter()
    with collector_seconds() as collecting, pytest.raises(CompileTimeError, match=stage):
        compile(Regex(pattern), max_seconds=limit, max_states=10**8)
    assert time.perf_counter() - start - collecting[0] < 1.1 * limit + 0.05
