"""Programs of several steps in `.stc`: the grammar reads every construct, one-step programs keep their meaning,
and every mistake is a ProgramError at its file:line:col when the program is built, before any model pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import (
    CallStep,
    ForStep,
    IfStep,
    Message,
    OutputStep,
    ProgramError,
    RepeatStep,
    ReturnStep,
    UseStep,
    parse_program,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def add(a: int, b: int) -> int:
    return a + b


def listing(n: int) -> list[str]:
    return ["x"] * n


FUNCTIONS = {"add": add, "listing": listing}


def build(text: str, source: str = "t.stc") -> CompiledProgram:
    return CompiledProgram(text, source, functions=FUNCTIONS)


def error_of(text: str, source: str = "t.stc") -> ProgramError:
    with pytest.raises(ProgramError) as info:
        build(text, source)
    return info.value


def test_every_construct_parses_with_positions() -> None:
    syntax = parse_program('''param goal: str
system """plan"""
output plan """{steps: list[line](1..3)}"""
if plan.steps | length > 2 {
  user """long"""
} elif goal == "x" {
  output """{n: int}"""
} else {
  user """short"""
}
for step in plan.steps {
  output detail """{d: str}"""
}
repeat 2 {
  call total = add(1, 2)
  if total > 2 { break }
}
use sub = "other.stc" with a=goal
return plan
''', "p.stc")
    assert syntax.has_steps and syntax.output == ""
    kinds = [type(step) for step in syntax.steps]
    assert kinds == [Message, OutputStep, IfStep, ForStep, RepeatStep, UseStep, ReturnStep]
    branch = syntax.steps[2]
    assert isinstance(branch, IfStep)
    assert [c.text if c else None for c, _ in branch.branches] == ["plan.steps | length > 2", 'goal == "x"', None]
    loop = syntax.steps[3]
    assert isinstance(loop, ForStep) and loop.var == "step" and loop.iterable.text == "plan.steps"
    assert (loop.iterable.pos.line, loop.iterable.pos.column) == (11, 13)
    repeat = syntax.steps[4]
    assert isinstance(repeat, RepeatStep) and repeat.count == 2 and isinstance(repeat.body[0], CallStep)
    use = syntax.steps[5]
    assert isinstance(use, UseStep) and use.path == "other.stc" and use.arguments is not None
    assert use.arguments.text == "a=goal"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.stc")), ids=lambda p: p.name)
def test_one_step_examples_stay_one_step(path: Path) -> None:
    syntax = parse_program(path.read_text(), str(path))
    assert not syntax.has_steps and syntax.output and not syntax.steps


@given(st.lists(st.sampled_from(["system", "user", "assistant"]), max_size=4), st.integers(0, 4))
@settings(max_examples=40, deadline=None)
def test_messages_and_one_output_are_one_step_in_any_order(roles: list[str], at: int) -> None:
    items = [f'{role} """m{i}"""' for i, role in enumerate(roles)]
    items.insert(min(at, len(items)), 'output """{a: int}"""')
    syntax = parse_program("\n".join(items))
    assert not syntax.has_steps
    assert [m.template for m in syntax.messages] == [f"m{i}" for i in range(len(roles))]


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ('output """{a: int}"""\nuser """{{ b }}"""\noutput """{c: int}"""', 2, 9, "unknown name 'b'"),
        ('user """x"""\noutput """{a: int} {{ later }}"""\noutput """{later: int}"""', 2, 20, "unknown name 'later'"),
        ('output """{a: int}"""\nif a > bee {\n  user """x"""\n}', 2, 8, "unknown name 'bee'"),
        ('output """{a: int}"""\nfor x in a {\n  output """{b: int}"""\n}', 2, 10, "not a list (its type is int)"),
        ('output """{a: "x" | "y"}"""\nfor x in a {\n  output """{b: int}"""\n}', 2, 10,
         "not a list (its type is an enum)"),
        ('output p """{a: str}"""\nfor x in p.a {\n  output """{b: int}"""\n}', 2, 10, "not a list (its type is str)"),
        ('param n: int\noutput """{a: int}"""\nfor x in n {\n  user """x"""\n}', 3, 10, "not a list"),
        ('output """{a: int}"""\ncall r = missing(a)', 2, 10, "call of missing, which is not a function registered"),
        ('output """{a: int}"""\ncall r = add(a, nope)', 2, 17, "unknown name 'nope'"),
        ('output """{a: int}"""\ncall r = add(a)', 2, 10, "call of add: missing a required argument: 'b'"),
        ('output """{a: int}"""\ncall r = add(a, a, a)', 2, 10, "call of add: too many positional arguments"),
        ('output """{a: int}"""\ncall r = a + 1', 2, 10, "call needs function(arguments)"),
        ('output """{a: int}"""\ncall r = listing(a)\nfor x in r {\n  user """{{ x }}"""\n}\nfor y in a {\n}',
         6, 10, "not a list"),
        ('output """{a: int}"""\nbreak', 2, 1, "break outside a repeat loop"),
        ('output """{a: int}"""\nrepeat 2 {\n  for x in [1] {\n    break\n  }\n}', 4, 5, "break outside a repeat"),
        ('output """{a: int}"""\nfor x in [1] {\n  if a {\n    return a\n  }\n}', 4, 5, "return inside a for loop"),
        ('output """{a: int}"""\nrepeat 0 {\n}', 2, 8, "at least 1"),
        ('output """{a: int}"""\nreturn a +', 2, 8, "bad expression"),
        ('output """{a: int}"""\nif a > 1 {\n  output """{b: int}"""\n} else {\n  user """{{ c }}"""\n}', 5, 11,
         "unknown name 'c'"),
        ('output """{a: int}"""\nfor x in [1, 2] {\n  output """{b: int}"""\n}\nuser """{{ x }}"""', 5, 9,
         "unknown name 'x'"),
        ('output """{a: int}"""\noutput """{b: int} x}"""', 2, 21, "unmatched '}'"),
        ('output """{a: int}"""\nif a {\n  user """x"""\n', 3, 15, "unexpected end of input"),
    ],
)
def test_step_errors_are_positioned(text: str, line: int, column: int, fragment: str) -> None:
    error = error_of(text)
    assert fragment in str(error), str(error)
    assert (error.source, error.line, error.column) == ("t.stc", line, column), str(error)


def test_names_from_every_kind_of_step_are_known_later() -> None:
    program = build('''param n: int = 2
output """{a: int(0..9)}"""
output rec """{b: list[int](1..3)}"""
call total = add(a, n)
for item in rec.b {
  output """{c: int}"""
}
user """{{ a }} {{ rec.b }} {{ total }} {{ c }} {{ n }}"""
output """{d: int}"""
for x in c {
  user """{{ x }}"""
}
''')
    assert program.plan is not None
    assert [t.fields.keys() for t in program.plan.templates.values()] == [{"a": 0}.keys(), {"b": 0}.keys(),
                                                                          {"c": 0}.keys(), {"d": 0}.keys()]


@pytest.mark.parametrize(("text", "line"), [
    ('output """{a: int}"""\noutput """{b: int}"""', 2),
    ('user """hi"""\noutput a """{a: int}"""', 2),
    ('user """hi"""\n\nrepeat 2 {\n  output """{a: int}"""\n}', 3),
])
def test_a_steps_program_is_no_single_constraint(text: str, line: int) -> None:
    """Asked for one constraint, a program of several steps is refused at the step that makes it several."""
    program = build(text)
    with pytest.raises(ProgramError, match="several steps") as refused:
        program.constraint({})
    assert (refused.value.line, refused.value.column) == (line, 1)
    with pytest.raises(ProgramError, match="several steps"):
        program.program_constraint()


def test_use_reads_the_other_file_relative_to_this_one(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.stc").write_text('param q: str\nuser """{{ q }}"""\noutput """{x: int}"""\n')
    main = tmp_path / "main.stc"
    main.write_text('output """{a: str}"""\nuse r = "sub/inner.stc" with q=a\nuser """{{ r.x }}"""\n')
    program = CompiledProgram.from_file(main)
    assert program.plan is not None
    (used,) = program.plan.uses.values()
    assert used.syntax.params == {"q": used.syntax.params["q"]} and not used.syntax.has_steps


def test_use_cycle_is_refused_where_it_closes(tmp_path: Path) -> None:
    (tmp_path / "a.stc").write_text('output """{x: int}"""\nuse b = "b.stc"\n')
    (tmp_path / "b.stc").write_text('output """{y: int}"""\n\nuse a = "a.stc"\n')
    with pytest.raises(ProgramError) as info:
        CompiledProgram.from_file(tmp_path / "a.stc")
    error = info.value
    assert "use cycle: a.stc -> b.stc -> a.stc" in str(error)
    assert (Path(error.source).name, error.line, error.column) == ("b.stc", 3, 1)


def test_use_of_itself_is_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "self.stc").write_text('output """{x: int}"""\nuse again = "self.stc"\n')
    with pytest.raises(ProgramError, match=r"self.stc:2:1: use cycle: self.stc -> self.stc"):
        CompiledProgram.from_file(tmp_path / "self.stc")


@pytest.mark.parametrize(
    ("used", "use", "fragment"),
    [
        ('param q: str\noutput """{x: int}"""', 'use r = "u.stc"', "its parameter q has no default"),
        ('output """{x: int}"""', 'use r = "u.stc" with z=1', "it has no parameter z"),
        ('output """{x: int}"""', 'use r = "u.stc" with 1', "passes arguments by name"),
        ('output """{x: int}"""', 'use r = "missing.stc"', "use of missing.stc"),
        ('output """{x: nope}"""', 'use r = "u.stc"', "unknown type nope"),
    ],
)
def test_use_mistakes_are_refused(tmp_path: Path, used: str, use: str, fragment: str) -> None:
    (tmp_path / "u.stc").write_text(used)
    (tmp_path / "m.stc").write_text(f'output """{{a: int}}"""\n{use}\n')
    with pytest.raises(ProgramError, match=fragment):
        CompiledProgram.from_file(tmp_path / "m.stc")
