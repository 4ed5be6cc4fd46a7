"""Decode options and prompts: every good value is accepted as is, every bad one is an OptionError naming its
argument."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stdsl.errors import OptionError, StdslError
from stdsl.model_files.prompt import check_prompt
from stdsl.runtime.options import DecodeOptions, SamplingParams

NAMES = [f.name for f in fields(DecodeOptions)]
FLAGS = ("chat", "healing", "parallel_fields", "reference")
LAST_SEED = 2**64 - 1

stop_string = st.text(min_size=1, max_size=8)
GOOD: dict[str, st.SearchStrategy[Any]] = {
    "max_tokens": st.none() | st.integers(0, 10**9) | st.integers(0, 1000).map(np.int64),
    "temperature": st.floats(0.0, 1e300) | st.integers(0, 100) | st.sampled_from([1e-45, 1e-30, 5e-324, 3e38]),
    "top_p": st.floats(0.0, 1.0, exclude_min=True) | st.just(1),
    "top_k": st.integers(0, 10**6) | st.integers(0, 100).map(np.int32),
    "seed": st.none() | st.integers(0, LAST_SEED),
    "stop": stop_string | st.lists(stop_string, max_size=3) | st.lists(stop_string, max_size=3).map(tuple),
    **{flag: st.booleans() | st.booleans().map(np.bool_) for flag in FLAGS},
    "strict": st.none() | st.booleans() | st.booleans().map(np.bool_),
}
not_a_number = st.text(max_size=4) | st.none() | st.booleans() | st.lists(st.integers(), max_size=2)
BAD: dict[str, st.SearchStrategy[Any]] = {
    "max_tokens": not_a_number.filter(lambda v: v is not None) | st.integers(max_value=-1) | st.floats(),
    "temperature": not_a_number
    | st.floats(max_value=-1e-300)
    | st.sampled_from([math.nan, math.inf, -math.inf]),
    "top_p": not_a_number
    | st.floats(max_value=0.0)
    | st.floats(min_value=1.0, exclude_min=True)
    | st.sampled_from([math.nan, math.inf]),
    "top_k": not_a_number | st.integers(max_value=-1) | st.floats(),
    "seed": (st.text(max_size=4) | st.booleans() | st.floats() | st.integers(max_value=-1)
             | st.integers(min_value=2**64)),
    "stop": st.just("")
    | st.lists(st.just("") | st.integers() | st.none(), min_size=1, max_size=3)
    | st.integers()
    | st.binary(min_size=1)
    | st.dictionaries(stop_string, stop_string, min_size=1),
    **{flag: st.integers() | st.text(max_size=3) | st.none() for flag in FLAGS},
    "strict": st.integers() | st.text(max_size=3) | st.floats(),
}


def expected(name: str, value: Any) -> Any:
    """The normalized value DecodeOptions keeps for a good `value`."""
    if name == "stop":
        return (value,) if isinstance(value, str) else tuple(value)
    if name in ("temperature", "top_p"):
        return float(value)
    if name in FLAGS or (name == "strict" and value is not None):
        return bool(value)
    return None if value is None else int(value)


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional=GOOD))
def test_every_good_value_is_accepted(options: dict[str, Any]) -> None:
    decoded = DecodeOptions.of(**options)
    for name in NAMES:
        want = expected(name, options[name]) if name in options else getattr(DecodeOptions(), name)
        assert getattr(decoded, name) == want
        assert type(getattr(decoded, name)) is type(want)
    assert decoded.sampling == SamplingParams(decoded.temperature, decoded.top_p, decoded.top_k, decoded.seed)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(BAD)), others=st.fixed_dictionaries({}, optional=GOOD))
def test_every_bad_value_names_its_argument(data: st.DataObject, name: str, others: dict[str, Any]) -> None:
    value = data.draw(BAD[name], label=name)
    with pytest.raises(OptionError) as caught:
        DecodeOptions.of(**{**others, name: value})
    assert caught.value.argument == name
    assert name in str(caught.value)
    assert isinstance(caught.value, StdslError) and not isinstance(caught.value, (ValueError, TypeError))


def test_the_defaults_are_the_documented_ones() -> None:
    assert DecodeOptions.of() == DecodeOptions(
        max_tokens=256, temperature=0.0, top_p=1.0, top_k=0, seed=None, chat=True, healing=True,
        parallel_fields=False, stop=(), reference=False,
    )
    assert DecodeOptions().sampling.greedy


@pytest.mark.parametrize(
    "options,argument",
    [
        ({"temperature": -1}, "temperature"),
        ({"temperature": math.nan}, "temperature"),
        ({"temperature": math.inf}, "temperature"),
        ({"top_p": 2}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"max_tokens": "10"}, "max_tokens"),
        ({"max_tokens": 10.0}, "max_tokens"),
        ({"seed": "x"}, "seed"),
        ({"seed": True}, "seed"),
    ],
)
def test_the_issue_cases_are_option_errors(options: dict[str, Any], argument: str) -> None:
    with pytest.raises(OptionError, match=argument) as caught:
        DecodeOptions.of(**options)
    assert caught.value.argument == argument
    assert repr(next(iter(options.values()))) in str(caught.value)


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=20).filter(lambda name: name not in NAMES and name.isidentifier()))
@example("cls")
def test_an_unknown_keyword_is_refused_by_name(name: str) -> None:
    with pytest.raises(OptionError) as caught:
        DecodeOptions.of(**{name: 1})
    assert caught.value.argument == name
    assert repr(name) in str(caught.value)


@pytest.mark.parametrize("typo,meant", [("temprature", "temperature"), ("max_token", "max_tokens"), ("topk", "top_k")])
def test_a_misspelled_keyword_gets_a_suggestion(typo: str, meant: str) -> None:
    with pytest.raises(OptionError, match=f"did you mean {meant!r}"):
        DecodeOptions.of(**{typo: 1})


def test_direct_construction_validates_too() -> None:
    with pytest.raises(OptionError) as caught:
        DecodeOptions(top_k=-3)
    assert caught.value.argument == "top_k"


message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": st.none() | st.text(max_size=10)},
    optional={"name": st.text(max_size=5), "tool_calls": st.lists(st.dictionaries(st.text(max_size=3), st.text()))},
)
GOOD_PROMPTS = (
    st.text(max_size=20)
    | st.lists(message, min_size=1, max_size=4)
    | st.lists(st.integers(0, 200_000), min_size=1, max_size=8)
    | st.lists(st.integers(0, 1000).map(np.int64), min_size=1, max_size=3)
)
bad_message = (
    message.map(lambda m: {k: v for k, v in m.items() if k != "content"})
    | message.map(lambda m: {**m, "role": 3})
    | message.map(lambda m: {**m, "content": ["parts"]})
)
BAD_PROMPTS = (
    st.none()
    | st.integers()
    | st.floats()
    | st.binary()
    | st.just([])
    | st.dictionaries(st.text(max_size=3), st.text(max_size=3))
    | st.tuples(st.integers(0, 9), st.text(max_size=3)).map(list)
    | st.lists(st.booleans(), min_size=1, max_size=3)
    | st.lists(st.integers(max_value=-1), min_size=1, max_size=3)
    | st.lists(st.floats(), min_size=1, max_size=3)
    | st.tuples(message, bad_message).map(list)
    | st.tuples(message, st.integers(0, 9)).map(list)
)


@settings(max_examples=200, deadline=None)
@given(GOOD_PROMPTS)
def test_every_good_prompt_is_accepted(prompt: Any) -> None:
    check_prompt(prompt)


@settings(max_examples=300, deadline=None)
@given(BAD_PROMPTS)
def test_every_bad_prompt_is_an_option_error_naming_prompt(prompt: Any) -> None:
    with pytest.raises(OptionError, match="prompt") as caught:
        check_prompt(prompt)
    assert caught.value.argument == "prompt"


@pytest.mark.parametrize("prompt", [None, 3, [1, "a"], {"role": "user", "content": "hi"}, [True], [],
                                    [{"role": "user"}]])
def test_the_brief_cases_are_refused(prompt: Any) -> None:
    with pytest.raises(OptionError):
        check_prompt(prompt)


def test_an_empty_str_prompt_is_valid() -> None:
    check_prompt("")


def test_token_ids_are_checked_against_the_vocabulary_when_given() -> None:
    check_prompt([0, 49151], vocab_size=49152)
    with pytest.raises(OptionError, match="49152"):
        check_prompt([0, 49152], vocab_size=49152)


@pytest.mark.parametrize(
    "prompt,options,argument",
    [
        ("hi", {"temperature": -1}, "temperature"),
        ("hi", {"temperature": math.nan}, "temperature"),
        ("hi", {"top_p": 2}, "top_p"),
        ("hi", {"top_k": -1}, "top_k"),
        ("hi", {"max_tokens": "10"}, "max_tokens"),
        ("hi", {"seed": "x"}, "seed"),
        ("hi", {"temprature": 0.5}, "temprature"),
        (None, {}, "prompt"),
        ([1, "a"], {}, "prompt"),
    ],
)
def test_generate_refuses_bad_arguments_before_any_model_pass(tiny_model, prompt: Any, options: dict,
                                                              argument: str) -> None:
    import stdsl
    from stdsl.runtime.decode import engine_for

    passes = engine_for(tiny_model).metrics()["passes"]
    with pytest.raises(OptionError) as caught:
        stdsl.generate(tiny_model, prompt, {"type": "integer"}, **options)
    assert caught.value.argument == argument
    assert engine_for(tiny_model).metrics()["passes"] == passes


def test_an_empty_prompt_decodes_without_the_chat_template(tiny_model) -> None:
    import stdsl

    result = stdsl.generate(tiny_model, "", {"type": "integer"}, chat=False, max_tokens=8)
    assert result.text and result.finish_reason in ("stop", "length", "eos")


LONE_SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=8), LONE_SURROGATES, st.text(max_size=8), st.sampled_from(["str", "content", "role", "stop"]))
def test_a_lone_surrogate_anywhere_is_refused_with_its_place_and_offset(before: str, lone: str, after: str,
                                                                         where: str) -> None:
    """Issue 28 item 7: a str that is not Unicode text is an OptionError naming the prompt part and the offset of
    the first lone surrogate (not a TypeError from the tokenizer)."""
    text = before + lone + after
    named = {"str": "prompt", "content": "prompt[1]['content']", "role": "prompt[1]['role']", "stop": "stop[1]"}
    with pytest.raises(OptionError) as caught:
        if where == "str":
            check_prompt(text)
        elif where == "stop":
            DecodeOptions.of(stop=["fine", text])
        else:
            check_prompt([{"role": "system", "content": "ok"}, {"role": "user", "content": "ok", where: text}])
    assert caught.value.argument == ("stop" if where == "stop" else "prompt")
    assert str(caught.value) == (f"{named[where]} holds a lone surrogate (U+{ord(lone):04X}) at offset "
                                 f"{len(before)}; text must be valid Unicode")


def test_every_library_entry_point_refuses_a_lone_surrogate_before_any_pass(tiny_model) -> None:
    import stdsl
    from stdsl.runtime.decode import engine_for

    engine = engine_for(tiny_model)
    passes = engine.metrics()["passes"]
    messages = [{"role": "user", "content": "ok \udfff"}]
    calls = [lambda: stdsl.generate(tiny_model, "\ud800", None), lambda: stdsl.generate(tiny_model, messages, None),
             lambda: stdsl.stream(tiny_model, "a\ud800", None), lambda: engine.submit("x\udc00y"),
             lambda: stdsl.generate(tiny_model, "fine", None, stop=["\ud800"])]
    for call in calls:
        with pytest.raises(OptionError, match="lone surrogate"):
            call()
    batch = stdsl.generate_batch(tiny_model, [{"prompt": "\ud800", "constraint": {"type": "integer"}},
                                              {"prompt": "Count:", "constraint": {"type": "integer"}, "max_tokens": 4}])
    assert isinstance(batch[0], OptionError) and "prompt holds a lone surrogate (U+D800) at offset 0" in str(batch[0])
    assert not isinstance(batch[1], Exception) and batch[1].text
    assert engine.metrics()["passes"] > passes  # only the good request of the batch decoded
