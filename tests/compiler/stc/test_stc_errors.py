"""Every program mistake gets its own message at the right line and column."""

from __future__ import annotations

import enum
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import ProgramError, parse_program

EXAMPLE_PROGRAMS = [path.read_text() for path in sorted((Path(__file__).parents[3] / "examples").glob("*.stc"))]


def error_of(text: str, scope: dict | None = None) -> ProgramError:
    with pytest.raises(ProgramError) as info:
        CompiledProgram(text, "t.stc", scope).constraint({})
    return info.value


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ('type A = str(1..\noutput """{a: A}"""', 2, 1, "expected"),
        ('type = 3\noutput """{a: str}"""', 1, 6, "expected a name"),
        ('output """x: {a: Persn}"""\ntype Person = {name: str}', 1, 18, "did you mean Person"),
        ('output """x: {a: str}\ny: {a: int}"""', 2, 5, "field a appears twice"),
        ('output """x: {a: str(5..2)}"""', 1, 18, "unsatisfiable"),
        ('output """x: {a: int(9..1)}"""', 1, 18, "unsatisfiable"),
        ('output """x: {a: list[int](3..1)}"""', 1, 18, "unsatisfiable"),
        ('output """x: {a: int(1.5..3)}"""', 1, 18, "must be integers"),
        ('output """x: {a: str(-1..3)}"""', 1, 18, "cannot be negative"),
        ('output """x: {a: "b" | "b"}"""', 1, 18, 'appears twice in this enum'),
        ('type R = {a: int, a: str}\noutput """{r: R}"""', 1, 19, "field a appears twice in record R"),
        ('type T = T | int\noutput """{t: T}"""', 1, 10, "refers to itself"),
        ('output """x: {a: bool(1..2)}"""', 1, 18, "bool takes no range"),
        ('output """x: {a: int}{b: int}"""', 1, 15, "put literal text between them"),
        ('output """x: {a: int}1"""', 1, 15, "could itself contain the text that follows it"),
        ('output """x: {a: str}\n"""\noutput """y"""', 3, 11, "has no {field: type}"),
        ('user """hi"""', 1, 1, "no output"),
        ('output """just text"""', 1, 11, "has no {field: type}"),
        ('output """x: {a: str"""', 1, 14, "unclosed '{'"),
        ('output """x: }"""', 1, 14, "unmatched '}'"),
        ('output """{a: E}"""', 1, 15, "has no members"),
    ],
)
def test_error_positions(text: str, line: int, column: int, fragment: str) -> None:
    class E(enum.Enum):
        pass

    err = error_of(text, {"E": E})
    assert fragment in str(err), str(err)
    assert (err.line, err.column) == (line, column), str(err)
    assert str(err).startswith(f"t.stc:{line}:{column}:")


def test_missing_argument_is_named() -> None:
    prog = CompiledProgram('param name: str\nuser """hello {{ name }}"""\noutput """{x: int}"""', "t.stc")
    with pytest.raises(ProgramError, match=r"parameter name has no value; pass name=\.\.\. \(a keyword argument"):
        prog.arguments({})
    with pytest.raises(ProgramError, match="parameter name has no value; pass --set name=...$"):
        prog.arguments({}, "cli")
    with pytest.raises(ProgramError, match="parameter name has no value; give \"name\" in the request's program"):
        prog.arguments({}, "server")
    with pytest.raises(ProgramError, match="'name' is undefined"):
        prog.messages({})


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ('output """{{ 1/0 }} {x: int}"""', 1, 11, "ZeroDivisionError"),
        ('output """\nab\n  {{ x.y }}: {x: int}"""', 3, 3, "'x' is undefined"),
        ('output """a {% if %}{x: int}"""', 1, 13, "Jinja syntax error"),
        ('user """\nhello\n {{ name }}"""\noutput """{x: int}"""', 3, 2, "'name' is undefined"),
        ('output """{x: int}\n {{ "".__class__ }}"""', 2, 2, "SecurityError"),
        ('output """x: {a: int} {b: text(..100000000)}"""', 1, 24, "NFA states"),
        ('type A = {b: B}\ntype B = {a: A}\noutput """{x: A}"""', 1, 1, "type A: definition 'A' has no finite"),
        ('type V = "a" | "b"\nuser """hi"""\noutput """{v: V}"""\ntype', 4, 5, "expected a name"),
    ],
)
def test_jinja_and_compile_errors_are_located(text: str, line: int, column: int, fragment: str) -> None:
    """Issue 15 item 6: Jinja errors, state budgets and recursive definitions point at FILE:LINE:COL."""
    with pytest.raises(ProgramError) as info:
        prog = CompiledProgram(text, "t.stc")
        prog.messages({})
        prog.constraint({})
    err = info.value
    assert fragment in str(err), str(err)
    assert (err.line, err.column) == (line, column), str(err)


def test_a_message_may_follow_a_type_declaration() -> None:
    prog = CompiledProgram('type V = "a" | "b"\nuser """hi"""\ntype W = {user: V, system: int}\nsystem """s"""\n'
                   'output """{user: W}"""', "t.stc")
    assert [m.role for m in prog.syntax.messages] == ["user", "system"]
    assert prog.constraint({}).accepts('{"user":"a","system":3}')


def _chain(depth: int) -> str:
    """`depth` declared records, each holding the next."""
    declarations = "".join(f"type T{i} = {{a: T{i + 1}}}\n" for i in range(depth))
    return declarations + f'type T{depth} = int\noutput """{{x: T0}}"""'


def _ring(depth: int, item: str) -> str:
    """`depth` declared types referring to one another in a cycle."""
    return "".join(f"type T{i} = {item.format(f'T{(i + 1) % depth}')}\n" for i in range(depth)) + 'output """{x: T0}"""'


@pytest.mark.parametrize(("text", "line", "column", "fragment"), [
    (_chain(64), 66, 12, "field x: its type nests deeper than 64 levels"),
    (_chain(2000), 2002, 12, "field x: its type nests deeper than 64 levels"),
    (_ring(64, "{{a?: {}, b: int}}"), 65, 12, "field x: its type nests deeper than 64 levels"),
    (_ring(500, "{{a?: {}, b: int}}"), 1, 1, "type T0 is one of 500 types that refer to one another"),
    (_ring(500, "list[{}]"), 1, 1, "type T0 is one of 500 types that refer to one another"),
])
def test_long_chains_and_cycles_of_declared_types_are_located(text: str, line: int, column: int,
                                                               fragment: str) -> None:
    """Issue 37 item 4: a chain of declared types (the advice for deep inline types) was a RecursionError in the
    resolver, is_recursive and the schema past about 250 types; now chains resolve callees first and a type past the
    JSON Schema depth is refused at its field before anything recurses over it."""
    error = error_of(text)
    assert (error.line, error.column) == (line, column) and fragment in str(error), error


@pytest.mark.parametrize("text", [_chain(63), _ring(63, "{{a?: {}, b: int}}")])
def test_chains_and_cycles_within_the_depth_compile(text: str) -> None:
    CompiledProgram(text, "t.stc").constraint({})


_SHOWN_TERMINAL = (r"(?:'[^']+'|a name|a quoted string|a \"\"\"block\"\"\"|a /regex/|a number"
                   r"|system, user or assistant|end of input)")
_SHOWN_LIST = re.compile(rf"{_SHOWN_TERMINAL}(?:, {_SHOWN_TERMINAL})*(?: \.\.\.)?")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_syntax_errors_name_what_terminals_match(data: st.DataObject) -> None:
    """A cut or spliced program's syntax error lists what each expected token matches (`'..'`, `a name`),
    never a Lark terminal name (`__ANON_0`, `LPAR`), and reads "unexpected end of input" at the end."""
    text = data.draw(st.sampled_from(EXAMPLE_PROGRAMS))
    cut = data.draw(st.integers(0, len(text)))
    spliced = text[:cut] + data.draw(st.sampled_from(["", "..", "(", ")", ":", "=", "|", "?", "4", "]", "{"]))
    try:
        parse_program(spliced, "t.stc")
    except ProgramError as err:
        message = err.message
    else:
        return
    assert "the end of the input" not in message and "anon" not in message.lower(), message
    if "; expected " in message:
        got, _, expected = message.partition("; expected ")
        assert got.startswith("unexpected ")
        assert _SHOWN_LIST.fullmatch(expected), message


def test_dots_and_end_of_input_are_spelled_out() -> None:
    with pytest.raises(ProgramError) as info:
        parse_program("type T = str(", "t.stc")
    assert str(info.value).startswith("t.stc:1:14: unexpected end of input; expected ")
    assert "'..'" in str(info.value) and "__" not in str(info.value)
