"""An output and the `for` over its own bounded list compiled as one automaton accept exactly the bounded repetition
compiled separately: for each length n the list allows, the one-step program whose template is the output with the
list fixed to n items (`list[T](n..n)`) followed by n copies of the body (hypothesis: generated programs; strings
drawn by accepting walks of both sides and mutated). Which loops are compiled, and the positioned errors of those
that cannot be."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from stdsl.compiler.stc.loop_fusion import MAX_UNROLLED
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import ProgramError
from tests.compiler.accepting_walks import random_accepted
from tests.compiler.stc.test_stc_branch_fusion import mutated, overlap

ITEMS = ["int(0..9)", '"x" | "yy"', "str(/[a-c]{1,3}/)", "bool", "line"]
TYPES = ["int(0..99)", "str(..6)", '"x" | "y"', "bool", "line", "str(/[a-c]{1,3}/)"]
LITERALS = ["", " ", ", ", ": ", "; ", "x", " then "]
SEPS = [", ", ";", " ", "|"]


@st.composite
def looped_programs(draw: st.DrawFn) -> tuple[str, list[tuple[int, str, dict[str, tuple[str, int]]]]]:
    """(program text, for each length n: the one-step template it selects and, for each of its body fields, the
    loop field and iteration it stands for)."""
    low = draw(st.integers(0, 2))
    high = draw(st.integers(max(low, 1), 3))
    item, sep = draw(st.sampled_from(ITEMS)), draw(st.sampled_from(SEPS))
    before, after = draw(st.sampled_from(LITERALS)), draw(st.sampled_from(LITERALS))
    lead = draw(st.sampled_from(["", "{h: int(0..9)}: "]))
    listing = f'xs: list[{item}]'
    body = [(draw(st.sampled_from(LITERALS)), f"b{i}", draw(st.sampled_from(TYPES)), draw(st.sampled_from(LITERALS)))
            for i in range(draw(st.integers(1, 2)))]
    bounds = f'({low}..{high}, sep="{sep}")'
    text = f'output """{lead}{before}{{{listing}{bounds}}}{after}"""\nfor x in xs {{\n'
    text += "".join(f'  output """{pre}{{{name}: {kind}}}{post}"""\n' for pre, name, kind, post in body) + "}\n"
    selected = []
    for count in range(low, high + 1):
        fixed = f'{{{listing}({count}..{count}, sep="{sep}")}}' if count else ""
        head = f"{lead}{before}{fixed}{after}"
        names: dict[str, tuple[str, int]] = {}
        tail = ""
        for index in range(count):
            for pre, name, kind, post in body:
                names[f"{name}x{index}"] = (name, index)
                tail += f"{pre}{{{name}x{index}: {kind}}}{post}"
        selected.append((count, head + tail, names))
    return text, selected


def oracle_of(template: str):
    """The one-step program of `template` compiled on its own (None when it has no field at all: its one text)."""
    return CompiledProgram(f'output """{template}"""', "one.stc").constraint({})


@given(looped_programs(), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_compiled_loop_accepts_exactly_the_bounded_repetition(program, seed: int) -> None:
    text, selected = program
    compiled = CompiledProgram(text, "loop.stc")
    assert compiled.plan is not None
    (fused,) = compiled.plan.fused_loops.values()
    oracles = []
    for count, template, _ in selected:
        if count == 0 and "{h:" not in template:
            oracles.append(None)  # no field left: the language is the one literal text
            continue
        try:
            oracles.append(oracle_of(template))
        except ProgramError:
            with pytest.raises(ProgramError, match="loop.stc:"):
                compiled.looped_constraint(fused, {})
            event("refused: a length is ambiguous on its own")
            return
    empty_text = selected[0][1].encode() if oracles[0] is None else None
    try:
        constraint = compiled.looped_constraint(fused, {})
    except ProgramError as error:
        assert "can be the same text" in str(error) and str(error).startswith("loop.stc:2:10:")
        automata = [o.automaton for o in oracles if o is not None]
        assert any(overlap(a, b) for i, a in enumerate(automata) for b in automata[i + 1:]) or (
            empty_text is not None and any(a.accepts(empty_text) for a in automata))
        event("refused: two lengths share a text")
        return
    event("compiled")
    rng = np.random.default_rng(seed)
    samples = [random_accepted(constraint.automaton, rng) for _ in range(20)]
    samples += [random_accepted(o.automaton, rng) for o in oracles if o is not None for _ in range(6)]
    samples += [empty_text] if empty_text is not None else []
    samples += [mutated(s, rng) for s in list(samples)]
    for data in samples:
        owners = [i for i, o in enumerate(oracles)
                  if (o.automaton.accepts(data) if o is not None else data == empty_text)]
        assert constraint.automaton.accepts(data) == bool(owners), data
        if not owners:
            continue
        assert len(owners) == 1, data
        count, _, names = selected[owners[0]]
        value = constraint.parse(data.decode("utf-8"))
        assert len(value["xs"]) == count
        oracle = oracles[owners[0]]
        if oracle is None:
            continue
        expected = oracle.parse(data.decode("utf-8"))
        for name, (field, index) in names.items():
            assert len(value[field]) == count and value[field][index] == expected[name]
        if count:
            assert value["xs"] == expected["xs"]


HEAD = 'output """Plan: {xs: list[int(0..9)](1..3, sep=", ")}"""\n'
BODY = 'for x in xs {\n  output """ - {d: "a" | "b"}"""\n}\n'


@pytest.mark.parametrize(("text", "accepted"), [
    (HEAD + BODY, "Plan: 1, 2 - a - b"),
    (HEAD.replace('output """', 'output plan """') + BODY.replace("in xs", "in plan.xs"), "Plan: 1, 2 - a - b"),
    (HEAD + 'for x in xs {\n  output """ - {d: "a" | "b"}"""\n  output """;{e: int(0..9)}"""\n}\n',
     "Plan: 1, 2 - a;3 - b;4"),
    ('param p: str = "q"\n' + HEAD + 'for x in xs {\n  output """ {{ p }} {d: "a" | "b"}"""\n}\n',
     "Plan: 1, 2 q a q b"),
])
def test_a_for_over_the_step_own_bounded_list_is_compiled(text: str, accepted: str) -> None:
    program = CompiledProgram(text, "t.stc")
    assert program.plan is not None and len(program.plan.fused_loops) == 1
    (loop,) = program.plan.fused_loops.values()
    constraint = program.looped_constraint(loop, {"p": "q"})
    assert constraint.automaton.accepts(accepted.encode())
    assert not constraint.automaton.accepts(accepted.rsplit(" ", 2)[0].encode())  # one iteration too few


@pytest.mark.parametrize("text", [
    'output """{xs: list[int(0..9)](1..)}"""\n' + BODY,                                   # unbounded
    f'output """{{xs: list[int(0..9)](1..{MAX_UNROLLED + 1})}}"""\n' + BODY,               # too long to unroll
    HEAD + 'user """more"""\n' + BODY,                                                    # not right after the output
    HEAD + 'for x in xs {\n  output """ {{ x }} {d: "a" | "b"}"""\n}\n',                  # the body reads the item
    HEAD + 'for x in xs {\n  user """{{ x }}"""\n  output """{d: "a" | "b"}"""\n}\n',     # a message in the body
    HEAD + 'for x in xs {\n  output named """ - {d: "a" | "b"}"""\n}\n',                  # a named body output
    HEAD + 'output """ ok {ys: list[int(0..9)](1..2)}"""\nfor y in xs {\n  output """ {d: bool}"""\n}\n',  # earlier
])
def test_other_loops_stay_forks(text: str) -> None:
    program = CompiledProgram(text, "t.stc")
    assert program.plan is not None and not program.plan.fused_loops, text


DIGITS = '{xs: list[int(0..9)](1..2, sep=";")}:'
SPACED = '{h: str(/[a-z0-9 .]{1,9}/)} {xs: list[int(0..9)](0..1)}.'


@pytest.mark.parametrize(("head", "body", "line", "column", "fragment"), [
    (DIGITS, '{d: str(/[a-z]{1,4}/)}', 3, 14, "is followed directly by field d[1]"),
    (SPACED, ' {d: int(0..9)} .', 2, 10, "a list of 0 and one of 1 items"),  # "ab 5. 7 ." both
    (DIGITS, ' {d: grammar("g.lark")}.', 2, 10, "a grammar field inside a loop"),
])
def test_a_loop_that_cannot_be_compiled_is_refused_at_its_position(tmp_path, head: str, body: str, line: int,
                                                                   column: int, fragment: str) -> None:
    (tmp_path / "g.lark").write_text('start: "(" start ")" | "x"\n')
    source = tmp_path / "t.stc"
    source.write_text(f'output """{head}"""\nfor x in xs {{\n  output """{body}"""\n}}\n')
    program = CompiledProgram.from_file(source)
    assert program.plan is not None
    (loop,) = program.plan.fused_loops.values()
    with pytest.raises(ProgramError) as info:
        program.looped_constraint(loop, {})
    assert fragment in str(info.value), str(info.value)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)
    assert str(info.value).startswith(f"{source}:{line}:{column}:")
