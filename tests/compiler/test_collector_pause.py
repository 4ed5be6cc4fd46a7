"""The collector pause of a compile: disabled inside, restored as it was once the last pause ends (nested, across
threads, through an error), never enabled where the caller had disabled it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from stdsl.compiler.collector_pause import collector_paused


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_is_paused_inside_and_enabled_after() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_resumes_the_collector() -> None:
    gc.enable()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("refused")
    assert gc.isenabled()


def test_overlapping_pauses_on_two_threads_resume_when_the_last_ends() -> None:
    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector_paused():
            second_in.set()
            first_out.wait(5)
            seen.append(gc.isenabled())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [False] and gc.isenabled()
