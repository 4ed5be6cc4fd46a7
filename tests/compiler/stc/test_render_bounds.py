"""Rendering a program's messages under a byte limit: output counted as it comes, and `*`, `+`, `**`, `%`, widths,
joins and replacements that would pass the limit refused before they are built, all as located ProgramErrors."""

from __future__ import annotations

import time

import pytest

from stdsl.compiler.deadline import compile_deadline
from stdsl.compiler.stc.jinja_text import render_text
from stdsl.compiler.stc.program import CompiledProgram
from stdsl.compiler.stc.syntax import Pos, ProgramError
from stdsl.errors import CompileTimeError

AT = Pos("<p>", 3, 7)
LIMIT = 1 << 20


@pytest.mark.parametrize("template", [
    '{{ "a" * 20000000 }}', '{{ 20000000 * "a" }}', '{{ ["a"] * 20000000 }}', '{{ "a" * 600000 + "b" * 600000 }}',
    "{{ 2 ** 100000000 }}", '{{ "%020000000d" % 1 }}', '{{ "%*d" % (20000000, 1) }}', '{{ "a"|center(20000000) }}',
    '{{ "a".ljust(20000000) }}', '{{ "{:>20000000}".format(1) }}', '{{ "x"|indent(20000000, true) }}',
    '{{ range(100000)|join("a" * 1000) }}', '{{ ("a" * 1000).join(["b"] * 100000) }}',
    '{{ ("a" * 1000)|replace("", "b" * 2000) }}', '{{ ("%s" * 1000) % (("a" * 1000000,) * 1000) }}',
    '{{ ("{0}" * 1000).format("a" * 1000000) }}', '{{ ("a b " * 1000)|wordwrap(1, wrapstring="x" * 2000) }}',
    '{{ "a\\tb".expandtabs(20000000) }}', '{{ ["a" * 1000000] * 1000 }}',
    '{% set a = "a" * 1000000 %}{% set b = [a, a, a, a] %}{% set c = [b, b, b, b] %}{{ [c, c, c, c] }}',
    '{{ ("%s" * 1000)|format(*(("a" * 1000000,) * 1000)) }}',
    '{% for i in range(100000) %}{{ "a" * 100 }}{% endfor %}',
])
def test_text_past_the_limit_is_refused_quickly_and_located(template: str) -> None:
    start = time.monotonic()
    with pytest.raises(ProgramError) as info:
        render_text(template, {}, AT, LIMIT)
    assert time.monotonic() - start < 2
    assert str(info.value).startswith("<p>:3:7: ") and f"{LIMIT} bytes" in str(info.value)


def test_text_within_the_limit_renders_as_without_one() -> None:
    template = '{{ "ab" * 3 }} {{ 2 ** 10 }} {{ "%5d" % 7 }} {{ "x"|center(5) }} {{ [1, 2]|join(", ") }} {{ n + 1 }}'
    assert render_text(template, {"n": 1}, AT, 100) == render_text(template, {"n": 1}, AT) == "ababab 1024     7 " \
        "  x   1, 2 2"
    assert render_text('{{ "a" * 20 }}', {}, AT) == "a" * 20
    assert render_text('{{ "abc"|truncate(20000000) }} {{ "a b c d"|wordwrap(3) }}', {}, AT, 100) == "abc a b\nc d"


def test_a_long_loop_stops_at_the_compile_deadline() -> None:
    template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}hi"
    start = time.monotonic()
    with pytest.raises(CompileTimeError), compile_deadline(0.5):
        render_text(template, {}, AT, LIMIT)
    assert time.monotonic() - start < 3


def test_program_messages_share_one_byte_budget() -> None:
    program = CompiledProgram('system """{{ "a" * 60 }}"""\nuser """{{ "b" * 60 }}"""\noutput """{x: int}"""')
    assert [len(m["content"]) for m in program.messages({}, 120)] == [60, 60]
    with pytest.raises(ProgramError, match="limit of 40 bytes") as info:
        program.messages({}, 100)
    assert ":2:" in str(info.value)

