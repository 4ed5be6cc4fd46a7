"""The split of a growing output into thinking text and answer: decided as it grows, equal to the split of the
whole, and the thinking text never holds the closing tag."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stdsl.compiler.reasoning import HARMONY, HARMONY_MARKERS, THINK
from stdsl.control.thinking_region import ThinkingRegion, partial_suffix

PIECES = st.lists(st.sampled_from(["<", "/", "think", ">", "</", "</think", "x", "\n", "é", "<think>"]), max_size=10)


def whole_split(mode: str, output: bytes) -> tuple[bytes | None, bytes]:
    """(thinking, answer) of a finished output read in one go (None: the output has no block)."""
    opening, close = THINK.open.encode(), THINK.close.encode()
    if mode != "opened":
        if not output.startswith(opening):
            return None, output
        output = output[len(opening):]
    end = output.index(close)
    return output[:end], output[end + len(THINK.close_text):]


@settings(max_examples=300, deadline=None)
@given(mode=st.sampled_from(["opened", "optional"]), opened=st.booleans(), thought=PIECES,
       answer=st.text(alphabet="ab<{}", max_size=6), cuts=st.lists(st.integers(0, 80), max_size=6))
def test_a_growing_output_splits_as_the_whole_does(mode, opened, thought, answer, cuts) -> None:
    text = "".join(thought)
    if THINK.close in text:
        text = text[: text.index(THINK.close)]
    block = text + THINK.close_text + answer
    if mode == "opened":
        output = block
    elif opened:
        output = THINK.open + block
    else:
        output = answer.lstrip("<")
    data = output.encode()
    thinking, final_answer = whole_split(mode, data)
    region = ThinkingRegion(THINK, mode)
    for cut in sorted({*cuts, len(data)}):
        prefix = data[: min(cut, len(data))]
        shown = region.thinking(prefix)
        assert THINK.close.encode() not in shown
        assert (thinking or b"").startswith(shown)
        assert final_answer.startswith(region.answer(prefix))
    assert region.thinking(data, final=True) == (thinking or b"")
    assert region.answer(data) == final_answer
    assert region.thinking_open(data) is False


def test_partial_suffix_is_the_longest_proper_prefix_of_the_tag_at_the_end() -> None:
    assert partial_suffix(b"a</thi", b"</think>") == 5
    assert partial_suffix(b"a<", b"</think>") == 1
    assert partial_suffix(b"a</think>", b"</think>") == 0
    assert partial_suffix(b"", b"</think>") == 0


HARMONY_PIECES = st.lists(st.sampled_from(["a", "<|", "end", "|>", "<|end", "<|start|>", "é", "final"]),
                          max_size=8)


@settings(max_examples=300, deadline=None)
@given(mode=st.sampled_from(["opened", "required", "optional", "off"]), opened=st.booleans(), thought=HARMONY_PIECES,
       answer=st.text(alphabet="ab<|{}", max_size=6), tokens=st.sampled_from([(), HARMONY_MARKERS]),
       cuts=st.lists(st.integers(0, 120), max_size=6))
def test_a_growing_harmony_output_splits_as_the_whole_does(mode, opened, thought, answer, tokens, cuts) -> None:
    """Harmony's block ends at the first `<|end|>` (text or token), the closing text and the final-channel header are
    neither thinking nor answer, and in "off" (or an optional block not taken) the header alone precedes the answer."""
    opening, close, close_text, head = HARMONY.spelled(tokens)
    text = "".join(thought).encode()
    text = text.split(HARMONY.close.encode())[0]
    takes_block = mode in ("opened", "required") or (mode == "optional" and opened)
    if takes_block:
        data = (b"" if mode == "opened" else opening) + text + close_text + head + answer.encode()
    else:
        data = head + answer.encode()
    region = ThinkingRegion(HARMONY, mode, tokens)
    for cut in sorted({*cuts, len(data)}):
        prefix = data[: min(cut, len(data))]
        shown = region.thinking(prefix)
        assert close not in shown and (text if takes_block else b"").startswith(shown)
        assert answer.encode().startswith(region.answer(prefix))
    assert region.thinking(data, final=True) == (text if takes_block else b"")
    assert region.answer(data) == answer.encode() and region.has_block == takes_block
