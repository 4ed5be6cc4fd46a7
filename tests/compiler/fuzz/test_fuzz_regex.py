"""Fuzzing the regex compiler: any pattern compiles, or is refused with a RegexError at a position, within the
time limit; an accepted pattern matches exactly the strings Python's `re.fullmatch` matches."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint import Constraint, Regex, compile
from stdsl.errors import CompileTimeError, EmptyLanguageError, RegexError, StateBudgetError
from tests.compiler.accepting_walks import random_accepted
from tests.compiler.fuzz.fuzz_inputs import regex_inputs
from tests.compiler.fuzz.memory_cap import memory_cap
from tests.compiler.fuzz.time_limit import LARGE_RUN_SECONDS, LIMIT_SECONDS, within_limit

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LARGE = settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WHOLE_INPUT_ERRORS = (CompileTimeError, StateBudgetError, EmptyLanguageError)
SAMPLE_LENGTH = 8


def _python_regex(pattern: str) -> re.Pattern[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return re.compile(pattern)


def _samples(pattern: str, constraint: Constraint, seed: int) -> list[str]:
    """Strings to ask both matchers about: accepting walks of the automaton, each with one character dropped
    or added, and short strings over the pattern's own characters."""
    rng = np.random.default_rng(seed)
    out = []
    alphabet = sorted(set(pattern)) + ["a", "0", " ", "\n", "é", "😀", "_", "-"]
    for _ in range(2):
        walk = random_accepted(constraint.automaton, rng, wander=16)
        text = walk.decode("utf-8")
        out.append(text)
        if text:
            cut = int(rng.integers(len(text)))
            out += [text[:cut] + text[cut + 1:], text[:cut] + str(rng.choice(alphabet)) + text[cut:]]
    for _ in range(3):
        out.append("".join(rng.choice(alphabet, size=int(rng.integers(SAMPLE_LENGTH + 1)))))
    return [text for text in out if not re.search("[\ud800-\udfff]", text)]


def check_regex(pattern: str, seed: int) -> None:
    """The fuzz property for one pattern (see the module docstring)."""
    try:
        with within_limit(pattern):
            constraint = compile(Regex(pattern), max_seconds=LIMIT_SECONDS)
    except RegexError as error:
        assert error.pattern == pattern and 0 <= error.position <= len(pattern), str(error)
        return
    except WHOLE_INPUT_ERRORS:
        return
    assert isinstance(constraint, Constraint)
    python = _python_regex(pattern)
    for text in _samples(pattern, constraint, seed):
        assert constraint.accepts(text) == bool(python.fullmatch(text)), (pattern, text)


@FAST
@given(regex_inputs(), st.integers(0, 2**32 - 1))
def test_regex_fuzz(pattern: str, seed: int) -> None:
    check_regex(pattern, seed)


@pytest.mark.slow
@pytest.mark.timeout(LARGE_RUN_SECONDS)
@LARGE
@given(regex_inputs(real_world=True), st.integers(0, 2**32 - 1))
def test_regex_fuzz_large(pattern: str, seed: int) -> None:
    with memory_cap():
        check_regex(pattern, seed)


def test_a_huge_pattern_is_stopped_while_parsing() -> None:
    """An alternation of 3,000 literals (4.5 million characters) ran 31 s under max_seconds=0.5: the parser
    never checked the deadline."""
    pattern = "|".join("a" * length for length in range(3000))
    with within_limit("an alternation of 3,000 literals"):
        with pytest.raises(CompileTimeError):
            compile(Regex(pattern), max_seconds=LIMIT_SECONDS)
