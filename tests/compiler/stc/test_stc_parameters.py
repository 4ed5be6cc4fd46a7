"""Program parameters are typed: a `.stc` `param n: int` or a `@program` function's `n: int` refuses "five" when
the program is called, with an OptionError naming the parameter and the type (issue 28 item 7)."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import stdsl
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import ProgramError
from stdsl.errors import OptionError

TYPED = '''param text: str
param n: int = 2
param ratio: float = 0.5
param loud: bool = false
param tags: list
param extra: dict
param anything = "x"
output """{a: int}"""
'''

ACCEPTS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "text": ("str", str), "n": ("int", int), "ratio": ("float", (int, float)), "loud": ("bool", bool),
    "tags": ("list", list), "extra": ("dict", dict)}
values = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3) \
    | st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)


def _accepted(name: str, value: Any) -> bool:
    """The oracle: the declared Python type, with bool never an int or a float."""
    if isinstance(value, bool) and name != "loud":
        return False
    return isinstance(value, ACCEPTS[name][1])


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(ACCEPTS)), values)
def test_each_declared_type_accepts_exactly_its_values(name: str, value: Any) -> None:
    program = CompiledProgram(TYPED, "t.stc")
    args = {"text": "hi", "tags": [], "extra": {}, name: value}
    if _accepted(name, value):
        assert program.arguments(args)[name] is value
        return
    with pytest.raises(OptionError) as caught:
        program.arguments(args)
    line = 1 + list(ACCEPTS).index(name)
    assert caught.value.argument == name
    assert str(caught.value).startswith(f"t.stc:{line}:1: parameter {name} expects {ACCEPTS[name][0]}, got ")


def test_an_untyped_parameter_takes_anything_and_the_brief_case_is_refused() -> None:
    program = CompiledProgram('param n: int\nparam free\noutput """{a: int}"""', "t.stc")
    assert program.arguments({"n": 3, "free": object})["free"] is object
    with pytest.raises(OptionError, match=r"t.stc:1:1: parameter n expects int, got 'five' of type str"):
        program.arguments({"n": "five", "free": 1})


@pytest.mark.parametrize(("text", "fragment"), [
    ('param n: integer\noutput """{a: int}"""',
     "parameter n: unknown type integer; a parameter is one of str, int, float, bool, list, dict"),
    ('param n: int = "two"\noutput """{a: int}"""', "the default of parameter n must be int, got 'two'"),
    ('param s: str = 2\noutput """{a: int}"""', "the default of parameter s must be str, got 2"),
])
def test_declarations_that_cannot_hold_are_refused_where_written(text: str, fragment: str) -> None:
    with pytest.raises(ProgramError) as caught:
        CompiledProgram(text, "t.stc")
    assert str(caught.value) == f"t.stc:1:1: {fragment}"


class Colour(enum.Enum):
    RED = "red"


class Pet(BaseModel):
    name: str


def test_program_functions_check_their_annotations() -> None:
    @stdsl.program
    def describe(n: int, tags: list[str], colour: Colour, pet: Pet, note: str = None, free=1):  # type: ignore[assignment]
        '''
        output """{a: int}"""
        '''

    program = describe.program
    good = {"n": 1, "tags": ["a"], "colour": Colour.RED, "pet": Pet(name="x")}
    assert program.arguments(good) == good
    assert program.arguments({**good, "note": None, "free": "anything"})["free"] == "anything"
    refused = {"n": "five", "tags": ["a", 2], "colour": "red", "pet": 3, "note": 5}
    for name, value in refused.items():
        with pytest.raises(OptionError) as caught:
            program.arguments({**good, name: value})
        assert caught.value.argument == name and f"parameter {name} expects" in str(caught.value)
    with pytest.raises(OptionError, match="parameter tags expects list"):
        describe(1, ("a",), Colour.RED, Pet(name="x"), model=None)
