"""A build leaves Python's cyclic collector alone, and a refusal drops the half-built automaton it unwound."""

from __future__ import annotations

import gc
import threading

import pytest

from stdsl.compiler.automata.build import compile_regex
from stdsl.errors import StateBudgetError


def test_the_collector_stays_on_during_a_build_seen_from_another_thread() -> None:
    seen: set[bool] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.add(gc.isenabled())

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert compile_regex("(a|b)*a(a|b){10}").num_states > 1000
        with pytest.raises(StateBudgetError):
            compile_regex("(a|b)*a(a|b){12}", max_states=100)
    finally:
        done.set()
        watcher.join()
    assert seen == {True}


def test_a_collector_turned_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        compile_regex("x+y")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_refusal_keeps_no_locals_of_the_frames_it_unwound() -> None:
    with pytest.raises(StateBudgetError) as refused:
        compile_regex("(a|b)*a(a|b){12}", max_states=100)
    traceback = refused.value.__traceback__
    frames = []
    while traceback is not None:
        frames.append(traceback.tb_frame)
        traceback = traceback.tb_next
    unwound = [f for f in frames if f.f_code.co_filename.endswith("stdsl/compiler/automata/determinize.py")]
    assert unwound and all(not f.f_locals for f in unwound)
