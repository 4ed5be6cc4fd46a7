"""A gpt-oss (Harmony) model behind the real server and the `openai` client: the analysis channel's text in
`reasoning_content`, the final channel's text in `content` (or a commentary-channel tool call), streamed and not,
never a marker or the constrained answer in `reasoning_content`, and a prompt that cannot think first is a 400."""
from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from stdsl.compiler.reasoning import HARMONY, HARMONY_MARKERS
from stdsl.compiler.tools.formats import FORMATS
from tests.runtime.special_tokenizers import family_model
from tests.runtime.thinking_templates import HARMONY_TEMPLATE
from tests.server.server_fixtures import running_server

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
    "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Ann Lee is 34. Who is it?"}]
THINK = {"chat_template_kwargs": {"enable_thinking": True}}
MARKS = (*HARMONY_MARKERS, "<|call|>", "<|constrain|>")


@pytest.fixture(scope="module")
def client(smollm2_tokenizer):
    model = family_model(smollm2_tokenizer, "special", HARMONY_TEMPLATE)[1]
    with running_server(model, max_rows=4) as url:
        yield openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)


def clean(text: str | None) -> bool:
    """Whether a reply field holds no Harmony marker (the channels are split off, never shown)."""
    return text is None or not any(mark in text for mark in MARKS)


def test_analysis_is_reasoning_content_and_the_final_channel_is_content(client) -> None:
    for seed, budget_field in ((4, "reasoning_budget"), (5, "thinking_token_budget")):
        reply = client.chat.completions.create(model="m", messages=ASK, response_format=FORMAT, max_tokens=60,
                                               temperature=1.0, seed=seed, extra_body={budget_field: 5, **THINK})
        message = reply.choices[0].message
        jsonschema.validate(json.loads(message.content), PERSON)
        assert isinstance(message.reasoning_content, str) and clean(message.reasoning_content)
        assert clean(message.content) and "{" not in message.reasoning_content[-1:]
        assert reply.usage.completion_tokens <= 60 and reply.choices[0].finish_reason == "stop"


def test_streamed_deltas_keep_analysis_and_final_apart(client) -> None:
    thinking, content, usage = "", "", None
    stream = client.chat.completions.create(model="m", messages=ASK, response_format=FORMAT, max_tokens=50,
                                            temperature=1.0, seed=7, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"reasoning_budget": 6, **THINK})
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            thinking += getattr(choice.delta, "reasoning_content", None) or ""
            content += choice.delta.content or ""
    jsonschema.validate(json.loads(content), PERSON)
    assert clean(thinking) and clean(content)
    assert usage is not None and usage.completion_tokens <= 50


def test_the_default_lets_the_model_choose_and_the_answer_is_always_final(client) -> None:
    for seed in range(3):
        reply = client.chat.completions.create(model="m", messages=ASK, response_format=FORMAT, max_tokens=50,
                                               temperature=1.0, seed=seed, extra_body={"reasoning_budget": 4})
        message = reply.choices[0].message
        jsonschema.validate(json.loads(message.content), PERSON)
        assert clean(message.reasoning_content) and clean(message.content)
    off = client.chat.completions.create(model="m", messages=ASK, response_format=FORMAT, max_tokens=40,
                                         extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert off.choices[0].message.reasoning_content is None
    jsonschema.validate(json.loads(off.choices[0].message.content), PERSON)


def test_tool_calls_follow_the_analysis_in_the_commentary_channel(client) -> None:
    parameters = WEATHER["function"]["parameters"]
    reply = client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], tool_choice="required",
                                           max_tokens=60, temperature=1.0, seed=1,
                                           extra_body={"reasoning_budget": 4, **THINK})
    message = reply.choices[0].message
    assert message.tool_calls and message.reasoning_content is not None and clean(message.reasoning_content)
    call = message.tool_calls[0].function
    assert call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), parameters)
    for seed in range(3):
        auto = client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], max_tokens=60,
                                              temperature=1.0, seed=seed, extra_body={"reasoning_budget": 3})
        message = auto.choices[0].message
        assert clean(message.reasoning_content) and clean(message.content)
        for tool_call in message.tool_calls or ():
            jsonschema.validate(json.loads(tool_call.function.arguments), parameters)


def test_a_harmony_tool_reply_reads_back_after_an_analysis_message() -> None:
    """The reader skips an analysis message at the start of a reply, up to its first `<|end|>`."""
    harmony = FORMATS["harmony"]
    call = harmony.render("get_weather", '{"city":"Rome"}')
    analysis = HARMONY.open + "think <|start|> twice" + HARMONY.close_text
    content, calls = harmony.parse(analysis + call, {"get_weather": WEATHER["function"]["parameters"]})
    assert content == "" and [(c.name, c.arguments, c.text) for c in calls] == [("get_weather", '{"city":"Rome"}',
                                                                                   call)]
    assert harmony.parse(analysis + HARMONY.answer_head + "hi", {}) == ("hi", [])


def test_a_prompt_that_cannot_think_first_and_too_few_tokens_are_400(client) -> None:
    opened = {"chat_template_kwargs": {"enable_thinking": True, "final_opened": True}}
    with pytest.raises(openai.BadRequestError, match="already opens the answer") as caught:
        client.chat.completions.create(model="m", messages=ASK, response_format=FORMAT, max_tokens=30,
                                       extra_body=opened)
    assert caught.value.body["param"] == "chat_template_kwargs.enable_thinking"
    with pytest.raises(openai.BadRequestError, match="no valid output fits"):
        client.chat.completions.create(model="m", messages=ASK, response_format=FORMAT, max_tokens=8, extra_body=THINK)
    answering = client.chat.completions.create(model="m", messages=ASK, response_format=FORMAT, max_tokens=30,
                                               extra_body={"chat_template_kwargs": {"final_opened": True}})
    assert answering.choices[0].message.reasoning_content is None
    jsonschema.validate(json.loads(answering.choices[0].message.content), PERSON)


def test_the_plan_puts_the_analysis_before_the_final_channel_or_the_call(smollm2_tokenizer) -> None:
    """The chat plan of a Harmony template wraps the request's constraint after the analysis block, the markers as
    tokens; a Harmony tool reply writes its own channel header, and thinking off leaves the tool reply alone."""
    from stdsl.compiler.constraint_spec import build_constraint
    from stdsl.compiler.special_tokens import spelled
    from stdsl.server.openai_api.protocol import ChatCompletionRequest
    from stdsl.server.requests.chat_render import CallMemory
    from stdsl.server.requests.request_plan import chat_plan

    model = family_model(smollm2_tokenizer, "special", HARMONY_TEMPLATE)[1]
    call = FORMATS["harmony"].render("get_weather", '{"city":"Rome"}')
    analysis = HARMONY.open + "hm" + HARMONY.close_text
    final = HARMONY.answer_head + '{"name":"A","age":3}'
    cases = [({"response_format": FORMAT}, "harmony", "optional", final),
             ({"response_format": FORMAT, **THINK}, "harmony", "required", final),
             ({"tools": [WEATHER], **THINK}, "harmony_calls", "required", call)]
    for body, name, mode, answer in cases:
        request = ChatCompletionRequest.model_validate({"messages": ASK, **body})
        spec = json.loads(json.dumps(chat_plan(request, model, CallMemory()).spec))
        assert (spec["kind"], spec["format"], spec["mode"]) == ("reasoning", name, mode)
        assert set(spec["tokens"]) == set(HARMONY_MARKERS)
        compiled = build_constraint(spec, 60)
        assert compiled.accepts(spelled(analysis + answer, MARKS))
        assert not compiled.accepts(spelled(analysis + answer, MARKS).replace(b"\xff<|end|>\xff", b"<|end|>"))
    off = ChatCompletionRequest.model_validate({"messages": ASK, "tools": [WEATHER],
                                                "chat_template_kwargs": {"enable_thinking": False}})
    spec = chat_plan(off, model, CallMemory()).spec
    assert spec["kind"] == "tools" and spec["format"] == "harmony"
    assert build_constraint(spec, 60).accepts(spelled(call, MARKS))
