"""The build pauses Python's cyclic collector only for its own duration, whatever way it ends."""

from __future__ import annotations

import gc

import pytest

from stdsl.compiler.automata.build import compile_regex
from stdsl.errors import StateBudgetError


def test_collector_state_is_restored_after_a_build_and_after_a_refusal() -> None:
    assert gc.isenabled()
    assert compile_regex("[ab]{2,4}").accepts(b"aba")
    assert gc.isenabled()
    with pytest.raises(StateBudgetError):
        compile_regex("(a|b)*a(a|b){12}", max_states=100)
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        compile_regex("x+y")
        assert not gc.isenabled()
    finally:
        gc.enable()
