"""gpt-oss's Harmony analysis channel as a thinking block: ANALYSIS · FINAL-HEAD · ANSWER compiled as one constraint
equals the oracle "no `<|end|>` in the analysis text, then `<|end|><|start|>assistant`, then the final-channel
header and an answer", in every mode, with the markers as text or as special tokens, for a DFA and a pushdown."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdsl
from stdsl.compiler.reasoning import HARMONY, HARMONY_CALLS, HARMONY_MARKERS, MODES, THINK, think_then
from stdsl.compiler.special_tokens import spelled
from stdsl.errors import CompileError

REGEX = stdsl.Regex(r"(yes|no)-[0-9]{1,2}")
TREE = {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "$ref": "#/$defs/node"}
PIECES = st.lists(st.sampled_from(["a", " ", "<|", "|>", "<|end|>", "<|end", "<|start|>assistant", "<|channel|>",
                                   "analysis", "final", "<|message|>", "é"]), max_size=8)
ANSWERS = st.sampled_from(["yes-1", "no-42", "yes-", "", "[]", "[[],[[]]]", "[[]", "<|end|>no-1"])


@pytest.fixture(scope="module")
def answers() -> list:
    return [stdsl.compile(REGEX), stdsl.compile(TREE)]


def oracle(answer, fmt, mode: str, data: bytes, tokens: tuple[str, ...]) -> bool:
    """Whether `data` is the Harmony output of `mode`: the markers in `tokens` are their tokens' spelling wherever
    the format writes them, and the analysis text holds neither the closing tag's text nor any token."""
    opening, close, close_text, head = fmt.spelled(tokens)

    def answered(rest: bytes) -> bool:
        return rest.startswith(head) and answer.accepts(rest[len(head):])

    if mode == "off" or (mode == "optional" and answered(data)):
        return answered(data)
    if mode != "opened":
        if not data.startswith(opening):
            return False
        data = data[len(opening):]
    end = data.find(close)
    thought = data[:end]
    return (end >= 0 and fmt.close.encode() not in thought and b"\xff" not in thought
            and data[end:].startswith(close_text) and answered(data[end + len(close_text):]))


@pytest.mark.parametrize("fmt", [HARMONY, HARMONY_CALLS], ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tokens", [(), HARMONY_MARKERS], ids=["text", "tokens"])
@settings(max_examples=60, deadline=None)
@given(thought=PIECES, answer_text=ANSWERS, opened=st.booleans(), headed=st.booleans(), which=st.integers(0, 1))
def test_the_composed_constraint_equals_the_oracle(answers, fmt, mode, tokens, thought, answer_text, opened, headed,
                                                   which) -> None:
    if fmt is HARMONY_CALLS and mode == "off":
        return
    answer = answers[which]
    composed = think_then(answer, fmt, mode, tokens)
    opening, _, close_text, head = fmt.spelled(tokens)
    text = "".join(thought).encode()
    start = opening if opened else b""
    tail = (head if headed else b"") + answer_text.encode()
    candidates = [start + text + close_text + tail, start + text + tail, tail, spelled("".join(thought), tokens)]
    for data in candidates:
        assert composed.accepts(data) == oracle(answer, fmt, mode, data, tokens), data


@pytest.mark.parametrize("mode", ["opened", "required", "optional"])
def test_a_written_harmony_reply_is_accepted_and_text_markers_are_not_where_tokens_stand(answers, mode) -> None:
    """The literal gpt-oss output shape is accepted; with the markers as tokens, the same text spelled with ordinary
    characters is refused (the model must write the tokens it was trained on)."""
    reply = "We need yes. <|end" + HARMONY.close_text + HARMONY.answer_head + "yes-7"
    reply = (HARMONY.open if mode != "opened" else "") + reply
    assert think_then(answers[0], HARMONY, mode).accepts(reply)
    with_tokens = think_then(answers[0], HARMONY, mode, HARMONY_MARKERS)
    assert with_tokens.accepts(spelled(reply, HARMONY_MARKERS)) and not with_tokens.accepts(reply.encode())
    assert set(with_tokens.constraint.special_tokens) == set(HARMONY_MARKERS)


def test_the_answers_own_special_tokens_are_kept_beside_the_markers() -> None:
    answer = stdsl.compile(stdsl.Grammar('start: "n" <|im_start|> /[0-9]/'))
    composed = think_then(answer, HARMONY, "required", HARMONY_MARKERS)
    assert set(composed.constraint.special_tokens) == {*HARMONY_MARKERS, "<|im_start|>"}
    assert composed.accepts(spelled(HARMONY.open + "hm" + HARMONY.close_text + HARMONY.answer_head + "n<|im_start|>7",
                                    (*HARMONY_MARKERS, "<|im_start|>")))


def test_an_answer_that_may_begin_like_the_analysis_is_ambiguous_only_without_a_head() -> None:
    """Before a Harmony tool reply (no head) an optional block is ambiguous if the reply may open the analysis
    channel itself; with the final-channel head in front of the answer it never is."""
    tagged = stdsl.compile(stdsl.Regex(r"<\|channel\|>analysis<\|message\|>[a-z]*"))
    with pytest.raises(CompileError, match="ambiguous"):
        think_then(tagged, HARMONY_CALLS, "optional")
    composed = think_then(tagged, HARMONY, "optional")
    assert composed.accepts(HARMONY.answer_head + HARMONY.open + "a")


def test_unsupported_combinations_are_refused_with_what_and_where(answers) -> None:
    with pytest.raises(CompileError, match="no 'off' mode"):
        think_then(answers[0], THINK, "off")
    with pytest.raises(CompileError, match="no 'off' mode"):
        think_then(answers[0], HARMONY_CALLS, "off")
    with pytest.raises(CompileError, match=r"<\|constrain\|>.*harmony"):
        think_then(answers[0], HARMONY, "required", ("<|constrain|>",))
    with pytest.raises(CompileError, match="thinking mode must be one of"):
        think_then(answers[0], HARMONY, "analysis")
