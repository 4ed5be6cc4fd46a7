"""Fuzzing the `.stc` front end: any program text parses and compiles, or is refused with a ProgramError at
FILE:LINE:COL inside the text, never another exception, and never past the compile time limit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.constraint import compile
from stdsl.compiler.deadline import compile_deadline
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.program_constraint import ProgramConstraint
from stdsl.compiler.stc.syntax import ProgramError
from stdsl.errors import CompileTimeError
from tests.compiler.accepting_walks import random_accepted
from tests.compiler.fuzz.fuzz_inputs import stc_inputs
from tests.compiler.fuzz.memory_cap import memory_cap
from tests.compiler.fuzz.time_limit import LARGE_RUN_SECONDS, LIMIT_SECONDS, within_limit

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LARGE = settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOURCE = "fuzz.stc"


def _assert_located(error: ProgramError, text: str) -> None:
    """The error names the source and a line and column that exist in `text` (a column may point just past
    the end of its line, where something is missing)."""
    lines = text.split("\n")
    assert error.source == SOURCE and 1 <= error.line <= len(lines), str(error)
    assert 1 <= error.column <= len(lines[error.line - 1]) + 1, str(error)
    assert str(error).startswith(f"{SOURCE}:{error.line}:{error.column}: "), str(error)


def check_program(text: str, seed: int) -> None:
    """The fuzz property for one program text (see the module docstring); parameters without a default
    get a short string.  Parsing is outside the time limit, as it is for `stdsl.compile(program)`.
    An output the compiled automaton accepts (one random walk) reads back into its fields."""
    try:
        program = CompiledProgram(text, SOURCE)
        missing = {name: "fuzz" for name, (_, default, _) in program.syntax.params.items() if default is None}
        with within_limit(text), compile_deadline(LIMIT_SECONDS):
            constraint = program.constraint(program.arguments(missing))
    except ProgramError as error:
        _assert_located(error, text)
        return
    except CompileTimeError:
        return
    if isinstance(constraint, ProgramConstraint):
        output = random_accepted(constraint.automaton, np.random.default_rng(seed), wander=30).decode("utf-8")
        assert set(constraint.parse(output)) == set(program.fields), output


@FAST
@given(stc_inputs(), st.integers(0, 2**32 - 1))
def test_stc_fuzz(text: str, seed: int) -> None:
    check_program(text, seed)


@pytest.mark.slow
@pytest.mark.timeout(LARGE_RUN_SECONDS)
@LARGE
@given(stc_inputs(), st.integers(0, 2**32 - 1))
def test_stc_fuzz_large(text: str, seed: int) -> None:
    with memory_cap():
        check_program(text, seed)


def test_compile_honours_the_time_limit_for_programs() -> None:
    """`stdsl.compile(program, max_seconds=...)` stops a program whose output needs a huge automaton."""
    program = CompiledProgram('output """{a: str(/[ab]*a[ab]{18}/)}"""', SOURCE)
    with within_limit("a program with a regex field of 2**19 DFA states"):
        with pytest.raises(ProgramError, match="longer than the 0.05 s limit"):
            compile(program, max_seconds=0.05)


def test_compile_stops_a_long_jinja_loop() -> None:
    """A Jinja loop in the output template (10^8 iterations, 27 s) is stopped by the time limit."""
    loop = "{% for i in range(100000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"
    program = CompiledProgram(f'output """{loop}x{{a: int}}"""', SOURCE)
    with within_limit("a program whose output template loops 10^8 times"):
        with pytest.raises(CompileTimeError, match="stopped in a Jinja template"):
            compile(program, max_seconds=0.05)


@pytest.mark.parametrize(("text", "args", "line", "column"), [
    ('output """ab\ud833c{a: int}"""', {}, 1, 13),
    ('type X = int\n  \udfff', {}, 2, 3),
    ('param x: str\noutput """v {{ x }}: {a: int}"""', {"x": "\ud800"}, 2, 13),
    ('output """{a: "\\ud800" | "b"}"""', {}, 1, 15),
    ('output """{a: list[str](1..2, sep="\\udc00")}"""', {}, 1, 35),
])
def test_lone_surrogates_are_refused_where_they_stand(text: str, args: dict, line: int, column: int) -> None:
    """A lone surrogate (no UTF-8 encoding) in the program or in an argument filled into the output template
    is a ProgramError at its line and column (was a UnicodeEncodeError from the IR's literal)."""
    with pytest.raises(ProgramError, match="lone surrogate") as info:
        CompiledProgram(text, SOURCE).constraint(args)
    assert (info.value.line, info.value.column) == (line, column)


@pytest.mark.parametrize(("text", "column", "fragment"), [
    ('output """{a: "x\0y" | "b"}"""', 15, "raw NUL"),
    ('output """{a: "x\\x4" | "b"}"""', 15, "truncated \\xXX escape"),
    ('output """{a: "\\N{nope}" | "b"}"""', 15, "unknown Unicode character name"),
])
def test_bad_strings_are_refused_where_they_stand(text: str, column: int, fragment: str) -> None:
    """A string token that Python cannot read (a raw NUL, a bad escape) is a ProgramError at the string
    (was a SyntaxError from ast.literal_eval; found by the large .stc fuzz run)."""
    with pytest.raises(ProgramError) as info:
        CompiledProgram(text, SOURCE).constraint({})
    assert fragment in str(info.value) and (info.value.line, info.value.column) == (1, column), str(info.value)
