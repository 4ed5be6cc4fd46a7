"""Issue 15 item 1: what a program's automaton accepts reads back as a value of the declared type."""

from __future__ import annotations

import enum
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import ProgramError
from stdsl.compiler.stc.types import number_spellings


def constraint_of(output: str, scope: dict | None = None, args: dict | None = None, decls: str = ""):
    return CompiledProgram(f'{decls}output """{output}"""', "t.stc", scope).constraint(args or {})


def test_empty_text_is_one_empty_item_when_an_item_is_required() -> None:
    required = constraint_of("{a: list[str](1..3)}")
    assert required.accepts("") and required.parse("") == {"a": [""]}
    assert required.render({"a": [""]}) == ""
    optional = constraint_of("{a: list[str](0..3)}")
    assert optional.parse("") == {"a": []}
    assert optional.render({"a": []}) == ""


def test_jinja_text_that_renders_empty_between_fields_gets_the_adjacency_check() -> None:
    prog = CompiledProgram('param sep = ""\noutput """{a: "x" | "xy"}{{ sep }}{b: "y" | "z"}"""', "t.stc")
    with pytest.raises(ProgramError, match="followed directly by field b"):
        prog.constraint({"sep": ""})
    spaced = prog.constraint({"sep": "-"})
    assert spaced.parse("xy-z") == {"a": "xy", "b": "z"}


def test_recursive_list_reads_back_its_own_nesting() -> None:
    c = constraint_of("{a: L}", decls="type L = list[L](0..3)\n")
    for text, value in [("[]", []), ("[[]]", [[]]), ("[[],[[]]]", [[], [[]]])]:
        assert c.accepts(text), text
        assert c.parse(text) == {"a": value}
        assert c.render({"a": value}) == text


def test_list_of_recursive_records_is_a_json_array() -> None:
    c = constraint_of("{x: list[Node](1..2)}\nend", decls="type Node = {name: str, kids: list[Node](0..2)}\n")
    text = '[{"name":"a, b","kids":[{"name":"c","kids":[]}]},{"name":"d","kids":[]}]\nend'
    assert c.accepts(text)
    nodes = c.parse(text)["x"]
    assert [n.name for n in nodes] == ["a, b", "d"] and nodes[0].kids[0].name == "c"
    assert c.render({"x": nodes}) == text


@pytest.mark.parametrize("key", ["model_config", "_x", "model_dump", "copy", "__x", "schema"])
def test_record_keys_pydantic_reserves_read_back(key: str) -> None:
    c = constraint_of(f"{{a: {{ {key}: int, x: int }}}}")
    text = f'{{"{key}":3,"x":4}}'
    assert c.accepts(text)
    value = c.parse(text)["a"]
    assert value.model_dump(by_alias=True) == {key: 3, "x": 4}
    assert c.render({"a": value}) == text


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    ONE = 1
    NAME = "name"
    OFF = False
    HALF = 0.5


def test_enums_with_non_string_values_read_back() -> None:
    alone = constraint_of("{a: Level}", {"Level": Level})
    assert alone.accepts("2") and alone.parse("2") == {"a": Level.HIGH}
    assert alone.render({"a": Level.HIGH}) == "2"
    nested = constraint_of("{a: {l: Level, m: Mixed}}", {"Level": Level, "Mixed": Mixed})
    text = '{"l":1,"m":false}'
    assert nested.accepts(text) and not nested.accepts('{"l":"1","m":false}')
    value = nested.parse(text)["a"]
    assert (value.l, value.m) == (Level.LOW, Mixed.OFF)
    assert nested.render({"a": value}) == text
    mixed = constraint_of("{a: Mixed}", {"Mixed": Mixed})
    texts = ("1", "name", "false", "0.5")
    assert [mixed.parse(t)["a"] for t in texts] == [Mixed.ONE, Mixed.NAME, Mixed.OFF, Mixed.HALF]


def test_enum_members_written_alike_are_refused() -> None:
    class Clash(enum.Enum):
        A = 1
        B = "1"

    with pytest.raises(ProgramError, match="both written '1'"):
        constraint_of("{a: Clash}", {"Clash": Clash})


@pytest.mark.parametrize("text", ["1.1e999", "1e400", "-1" + "0" * 400, "9" * 201])
def test_floats_stay_finite(text: str) -> None:
    alone = constraint_of("{a: float}")
    assert not alone.accepts(text)
    assert alone.accepts("1.5e99") and alone.accepts("-" + "9" * 20 + ".5e-99")


def test_floats_inside_json_stay_finite() -> None:
    record = constraint_of("{a: {x: float, y: list[number](..3)}}")
    assert not record.accepts('{"x":1.1e999,"y":[]}') and not record.accepts('{"x":1,"y":[1e400]}')
    assert record.accepts('{"x":1e99,"y":[2.5e-10]}')
    assert not constraint_of("{a: json(float)}").accepts("1" + "0" * 300)
    tree = constraint_of("{a: T}", decls="type T = {v: float, k: list[T](..2)}\n")
    assert not tree.accepts('{"v":1,"k":[{"v":1e999,"k":[]}]}')
    assert tree.parse('{"v":1e99,"k":[{"v":2,"k":[]}]}')["a"].k[0].v == 2.0


@pytest.mark.parametrize("output, decls", [
    ("{n: int(1..10)}", ""),
    ("{r: {n: int}}", ""),
    ("{t: T}", "type T = {n: int, kids: list[T](0..2)}\n"),
])
def test_an_int_is_written_without_a_zero_fraction(output: str, decls: str) -> None:
    """A program's int reads back as an int, so `5.0` (an integer to JSON Schema from draft 6 on) is refused."""
    c = constraint_of(output, decls=decls)
    whole = {"{n: int(1..10)}": "5", "{r: {n: int}}": '{"n":5}', "{a: list[int](1..3)}": "[5]",
             "{t: T}": '{"n":5,"kids":[]}'}[output]
    assert c.accepts(whole)
    assert not c.accepts(whole.replace("5", "5.0"))
    assert not c.accepts(whole.replace("5", "5.00"))


def test_a_float_past_the_exponent_room_renders_in_a_spelling_the_field_accepts() -> None:
    """`8532348E+94` is accepted (two exponent digits) but JSON spells its value `8.532348e+100` and the plain
    decimal has 101 integer digits, both refused: the exponent moves into the mantissa (`85.32348e+99`)."""
    constraint = CompiledProgram('output """{f0: float} """', "float.stc").constraint({})
    values = constraint.parse("8532348E+94 ")
    rendered = constraint.render(values)
    assert constraint.accepts(rendered) and constraint.parse(rendered) == values, rendered


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_number_spelling_reads_back_as_the_float(value: float) -> None:
    assert all(float(text) == value and math.copysign(1, float(text)) == math.copysign(1, value)
               for text in number_spellings(value))
