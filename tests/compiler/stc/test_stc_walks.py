"""Issue 15: every string a program's automaton accepts reads back as a value of the declared type.

Programs are generated; strings are drawn by random accepting walks over the compiled automaton
(or pushdown).  Reading one back gives a value that renders to text the automaton accepts and that
reads back as the same value; for types written one way only (enums, integers, text, lists of them)
the rendering is the very text that was read.  A program may instead be refused at compile time.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.pushdown.constraint import PushdownConstraint
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import ProgramError
from tests.compiler.accepting_walks import distances, random_accepted


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


CANONICAL = ['"red" | "green" | "re"', "int(-20..300)", "int", "str(..6)", "line", "text(..8)", "bool",
             "list[int(0..99)](0..3)", 'list[str(1..4)](1..3, sep="; ")', "Level", '"yes" | "no" | "n"']
OTHER = ["float", "number(0..10)", "date", "time", "datetime", "{a: str(..4), b?: int(0..9)}", "json(str(..5))",
         'int | "none"', "{k: Level, v: list[bool](..2)}", "{model_config: int(0..9), _x: str(..3)}", "Tree"]
LITERALS = ["", "", " ", ", ", "\n", "; ", ": ", "]", "x"]
DECLS = "type Tree = {n: int(0..9), kids: list[Tree](0..2)}\n"


def value_of(value: Any) -> Any:
    """A comparable form of a read-back value (records as dicts by JSON key)."""
    if hasattr(value, "model_dump"):
        return value_of(value.model_dump(by_alias=True))
    if isinstance(value, dict):
        return {k: value_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return [value_of(v) for v in value]
    return value


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, bool]:
    count = draw(st.integers(1, 3))
    canonical = True
    template = draw(st.sampled_from(LITERALS))
    for i in range(count):
        kind = draw(st.sampled_from(CANONICAL + OTHER))
        canonical = canonical and kind in CANONICAL
        template += f"{{f{i}: {kind}}}" + draw(st.sampled_from(LITERALS))
    return f'{DECLS}output """{template}"""', canonical


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**32 - 1))
def test_accepted_strings_read_back_and_render_again(program: tuple[str, bool], seed: int) -> None:
    text, canonical = program
    try:
        constraint = CompiledProgram(text, "gen.stc", {"Level": Level}).constraint({})
    except ProgramError:
        return  # refused at compile time, with a position
    rng = np.random.default_rng(seed)
    if isinstance(constraint, PushdownConstraint):
        machine: Any = constraint.machine
        dist = None
    else:
        machine = constraint.automaton
        dist = distances(machine)
    for _ in range(15):
        output = random_accepted(machine, rng, dist=dist, wander=40).decode("utf-8")
        values = constraint.parse(output)
        rendered = constraint.render(values)
        assert constraint.accepts(rendered), (text, output, rendered)
        assert value_of(constraint.parse(rendered)) == value_of(values), (text, output, rendered)
        if canonical:
            assert rendered == output, (text, output, rendered)
