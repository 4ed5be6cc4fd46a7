"""`stdsl.compile`'s keyword arguments are checked before any work: a bad one is an OptionError naming it, never a
foreign ValueError, TypeError or AttributeError from deep inside the compiler."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.json_schema.json_tokens import Whitespace
from stdsl.errors import OptionError

SCHEMA = {"type": "integer"}


@pytest.mark.parametrize("keyword,value", [
    ("max_seconds", 0), ("max_seconds", -1.0), ("max_seconds", "10"), ("max_seconds", float("nan")),
    ("max_seconds", True), ("max_states", "10"), ("max_states", 0), ("max_states", 2.5), ("max_states", True),
    ("whitespace", "x"), ("whitespace", 2), ("whitespace", {"max_run": 1}), ("strict", "no"), ("strict", 0),
    ("strict", None),
])
def test_a_bad_keyword_is_an_option_error_naming_it(keyword: str, value: Any) -> None:
    with pytest.raises(OptionError) as caught:
        stdsl.compile(SCHEMA, **{keyword: value})
    assert caught.value.argument == keyword and keyword in str(caught.value)


@given(st.one_of(st.text(max_size=5), st.floats(max_value=0), st.integers(max_value=0), st.booleans(), st.none()))
def test_max_states_takes_only_a_positive_int(value: Any) -> None:
    with pytest.raises(OptionError) as caught:
        stdsl.compile(SCHEMA, max_states=value)
    assert caught.value.argument == "max_states"


@given(st.floats(min_value=5.0, max_value=1e6) | st.integers(5, 10**6) | st.none())
def test_every_good_time_limit_compiles(value: Any) -> None:
    assert stdsl.compile(SCHEMA, max_seconds=value).kind


def test_an_unknown_keyword_is_named_with_the_closest_known_one() -> None:
    with pytest.raises(OptionError) as caught:
        stdsl.compile(SCHEMA, max_state=10)
    assert caught.value.argument == "max_state" and "'max_states'" in str(caught.value)


@pytest.mark.parametrize("pattern", [5, None, b"[0-9]+", ["a"]])
def test_a_regex_that_is_not_text_is_an_option_error(pattern: Any) -> None:
    with pytest.raises(OptionError) as caught:
        stdsl.Regex(pattern)
    assert caught.value.argument == "pattern"


def test_good_keywords_still_compile() -> None:
    assert stdsl.compile(SCHEMA, whitespace=Whitespace(1), max_states=1000, max_seconds=5, strict=False).kind
