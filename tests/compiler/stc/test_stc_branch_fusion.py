"""An output and the `if` on its own enum field compiled as one automaton accept exactly the union of the branches
compiled separately: for each enum value, the one-step program whose template is the output with the field fixed
to that value followed by the outputs of the branch it selects (hypothesis: generated programs; strings drawn by
accepting walks of both sides and mutated)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.ops import intersect
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import ProgramError
from stdsl.errors import CompileError, EmptyLanguageError
from tests.compiler.accepting_walks import random_accepted

VALUES = ["yes", "no", "maybe", "ok", "bad", "n/a", "re", "red"]
TYPES = ["int(0..99)", "str(..6)", '"x" | "y"', "list[int(0..9)](1..2)", "bool", "line", "str(/[a-c]{1,3}/)"]
LITERALS = ["", " ", ", ", ": ", "; ", "x", " then "]


@st.composite
def fused_programs(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """(program text, the enum's values, for each value the template of the one-step program it selects)."""
    values = draw(st.lists(st.sampled_from(VALUES), min_size=2, max_size=3, unique=True))
    enum = " | ".join(f'"{v}"' for v in values)
    before, after = draw(st.sampled_from(LITERALS)), draw(st.sampled_from(LITERALS))
    count = iter(range(100))

    def body() -> list[str]:
        templates = []
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(TYPES))
            templates.append(draw(st.sampled_from(LITERALS)) + f"{{g{next(count)}: {kind}}}" +
                             draw(st.sampled_from(LITERALS)))
        return templates

    branches: list[tuple[str | None, list[str]]] = []
    for _ in range(draw(st.integers(1, 2))):
        chosen = draw(st.lists(st.sampled_from(values), min_size=1, max_size=2, unique=True))
        condition = draw(st.sampled_from([f'f == "{chosen[0]}"', f"f in {chosen!r}".replace("'", '"'),
                                          f'f != "{chosen[0]}"']))
        branches.append((condition, body()))
    if draw(st.booleans()):
        branches.append((None, body()))
    text = f'output """{before}{{f: {enum}}}{after}"""\n'
    for index, (condition, templates) in enumerate(branches):
        opener = "if" if index == 0 else "elif" if condition is not None else "else"
        text += f"{opener} {condition or ''} {{\n".replace("  ", " ")
        text += "".join(f'  output """{t}"""\n' for t in templates) + "}\n"
    selected = []
    for value in values:
        tail: list[str] = []
        for condition, templates in branches:
            if condition is None or eval(condition, {"f": value}):  # noqa: S307 (conditions written above)
                tail = templates
                break
        selected.append(f'{before}{{f: "{value}"}}{after}' + "".join(tail))
    return text, values, selected


def overlap(first: Automaton, second: Automaton) -> bool:
    """Whether two separately compiled branches accept a common text."""
    try:
        intersect(first, second)
    except EmptyLanguageError:
        return False
    return True


def mutated(data: bytes, rng: np.random.Generator) -> bytes:
    """`data` with one byte replaced, inserted or removed."""
    at = int(rng.integers(0, len(data) + 1))
    choice = int(rng.integers(0, 3))
    byte = bytes([int(rng.choice(list(b"xyn0123456789 ,:;[]aeotrs/")))])
    if choice == 0 and at < len(data):
        return data[:at] + byte + data[at + 1:]
    if choice == 1:
        return data[:at] + byte + data[at:]
    return data[:at] + data[at + 1:]


@given(fused_programs(), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fused_branches_accept_exactly_the_union_of_the_branches(program: tuple[str, list[str], list[str]],
                                                                 seed: int) -> None:
    text, values, selected = program
    compiled = CompiledProgram(text, "fused.stc")
    assert compiled.plan is not None
    (fused,) = compiled.plan.fused.values()
    oracles = []
    for template in selected:
        try:
            oracles.append(CompiledProgram(f'output """{template}"""', "one.stc").constraint({}))
        except ProgramError:
            with pytest.raises(CompileError):
                compiled.branched_constraint(fused, {})
            event("refused: a branch is ambiguous on its own")
            return
    try:
        constraint = compiled.branched_constraint(fused, {})
    except CompileError as error:
        assert "accept the same text" in str(error)
        assert any(overlap(a.automaton, b.automaton) for i, a in enumerate(oracles) for b in oracles[i + 1:])
        event("refused: two branches share a text")
        return
    event("compiled")
    rng = np.random.default_rng(seed)
    samples = [random_accepted(constraint.automaton, rng) for _ in range(20)]
    samples += [random_accepted(o.automaton, rng) for o in oracles for _ in range(6)]
    samples += [mutated(s, rng) for s in list(samples)]
    for data in samples:
        owners = [i for i, o in enumerate(oracles) if o.automaton.accepts(data)]
        assert constraint.automaton.accepts(data) == bool(owners), data
        if owners:
            assert len(owners) == 1, data
            text_value = data.decode("utf-8")
            assert constraint.parse(text_value) == oracles[owners[0]].parse(text_value)
            assert constraint.parse(text_value)["f"] == values[owners[0]]


def test_only_an_if_on_the_output_own_enum_field_is_fused() -> None:
    head = 'param p: str = "a"\noutput """{f: "a" | "b"} {n: int(0..9)}"""\n'
    fused = CompiledProgram(head + 'if f == "a" and p == "a" {\n  output """ {g: bool}"""\n}', "t.stc")
    assert fused.plan is not None and len(fused.plan.fused) == 1
    for rest in ['if n > 3 {\n  output """ {g: bool}"""\n}',                     # not an enum field
                 'if f == "a" {\n  user """more"""\n  output """{g: bool}"""\n}',  # a message in a branch
                 'if f == "a" {\n  output """ {n: int}"""\n}',                    # a field name taken
                 'user """x"""\nif f == "a" {\n  output """ {g: bool}"""\n}']:    # not right after the output
        assert not CompiledProgram(head + rest, "t.stc").plan.fused, rest  # type: ignore[union-attr]
