"""The reply reader: however the text arrives in pieces, it sends the same content and calls as reading it whole;
stop strings cut free text only; the guard ends a reply that repeats a call or loops in free text."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.tools.formats import FORMATS as SYNTAXES
from stdsl.server.tools.reply_reader import REPETITION, STOP, ReplyReader, ends_in_loop

HERMES = SYNTAXES["hermes"]
CALL_A = HERMES.render("f", '{"a":1}')
CALL_B = HERMES.render("g", '{"b":"x"}')


def _read(text: str, cuts: list[int], **options) -> tuple[str, list, str | None]:
    reader = ReplyReader(HERMES, {}, **options)
    content, calls, end = "", [], None
    points = sorted({min(c, len(text)) for c in cuts}) + [len(text)]
    start = 0
    for point in points:
        update = reader.push(text[start:point])
        start = point
        content += update.content
        calls += update.calls
        end = end or update.end
        if update.end:
            break
    final = reader.finish()
    return content + final.content, calls + final.calls, end or final.end


@settings(max_examples=200, deadline=None)
@given(free=st.text(alphabet="ab <tl_c>", max_size=30).filter(lambda t: "<tool_call>" not in t),
       calls=st.lists(st.sampled_from([CALL_A, CALL_B]), max_size=2, unique=True),
       cuts=st.lists(st.integers(0, 200), max_size=8))
def test_pieces_read_like_the_whole(free: str, calls: list[str], cuts: list[int]) -> None:
    text = free + "\n".join(calls)
    content, read_calls, end = _read(text, cuts)
    whole_content, whole_calls = HERMES.parse(text, {})
    assert content == whole_content == free
    assert [c.text for c in read_calls] == [c.text for c in whole_calls] == calls
    assert end is None


@settings(max_examples=100, deadline=None)
@given(before=st.text(alphabet="abc ", max_size=20), after=st.text(alphabet="abcXY ", max_size=20),
       cuts=st.lists(st.integers(0, 60), max_size=6))
def test_a_stop_string_ends_free_text_before_it(before: str, after: str, cuts: list[int]) -> None:
    content, calls, end = _read(before + "XY" + after + CALL_A, cuts, stops=("XY",))
    assert (content, calls, end) == (before, [], STOP)


def test_a_stop_string_inside_a_call_is_ignored() -> None:
    text = "hi " + HERMES.render("f", '{"a":"XY"}')
    content, calls, end = _read(text, [5, 30], stops=("XY",))
    assert content == "hi " and len(calls) == 1 and end is None


def test_the_guard_ends_a_reply_that_repeats_a_call_and_keeps_the_calls_before() -> None:
    content, calls, end = _read(CALL_A + "\n" + CALL_B + "\n" + CALL_A, [10, 90, 150])
    assert [c.name for c in calls] == ["f", "g"] and end == REPETITION
    content, calls, end = _read(CALL_A + "\n" + CALL_A, [], guard=False)
    assert len(calls) == 2 and end is None


def test_the_guard_ends_free_text_that_loops() -> None:
    block = "I will call the tool. "
    content, calls, end = _read("Sure. " + block * 3 + block, [8, 30, 60, 80])
    assert end == REPETITION and calls == []
    assert ends_in_loop("x" + "0123456789abcdef" * 3) and not ends_in_loop("0123456789abcdef" * 2)
    assert not ends_in_loop("short short short ")


def test_every_prefix_of_a_reply_with_calls_reads_without_error() -> None:
    """The reader reads each piece as it arrives, so a format's `read_calls` meets every prefix of a call: a value
    still being written is no call yet, never an error (FunctionGemma's unclosed string raised a 500)."""
    arguments = '{"city": "Oslo, the capital", "days": -12, "ok": true, "rate": 2.5e3}'
    for name, syntax in sorted(SYNTAXES.items()):
        text = syntax.join([syntax.render("get_weather", arguments), syntax.render("f", '{"a": "x"}', 1)])
        whole = syntax.read_calls(text, syntax.call_start(text), {})
        assert [c.name for c in whole][:1] == ["get_weather"], name  # Harmony: one call a message
        for end in range(len(text)):
            start = syntax.call_start(text[:end])
            if start >= 0:
                read = syntax.read_calls(text[:end], start, {})
                assert [c.text for c in read] == [c.text for c in whole[: len(read)]], (name, end)
