"""Tool calls spelled as each family's chat template renders a past call: the template's text is accepted (so the
text the grammar forces is the template's), read back into the same calls, and so are hand-written replies in the
spellings the family's parser reads alike.

The templates below are the call-rendering part of each family's chat template, written here in the same terms
(Jinja, `tojson` on the arguments) and rendered by stdsl's own renderer, whose `tojson` is Hugging Face's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.tools.formats import FORMATS
from stdsl.model_files.chat_template import render_chat_template

WEATHER = {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7},
    "units": {"type": "object", "properties": {"wind": {"type": "string"}, "rain": {"type": "boolean"}},
              "required": ["wind", "rain"], "additionalProperties": False}},
    "required": ["city"], "additionalProperties": False}}
CALLS = [("get_weather", {"city": "Zürich <3", "days": 3, "units": {"wind": "kmh", "rain": True}}),
         ("get_weather", {"city": "Oslo"})]
CALL_IDS = ["a1B2c3D4e", "Z9y8X7w6V"]
"""The calls' ids (Mistral's templates require nine letters or digits)."""
_CALL_LOOP = "{%- for call in message.tool_calls %}{%- set f = call.function %}"
TEMPLATES = {
    # Qwen2.5 / Qwen3 (Hermes): calls after the content, each on its own line.
    "hermes": _CALL_LOOP + "{%- if not loop.first or message.content %}{{- '\\n' }}{%- endif %}"
              "{{- '<tool_call>\\n{\"name\": \"' + f.name + '\", \"arguments\": ' + (f.arguments | tojson) + "
              "'}\\n</tool_call>' }}{%- endfor %}",
    # Llama 3.1-3.3 with JSON tools: one bare JSON object, `parameters` for the arguments.
    "llama3_json": _CALL_LOOP + "{{- '{\"name\": \"' + f.name + '\", ' }}{{- '\"parameters\": ' }}"
                   "{{- f.arguments | tojson }}{{- '}' }}{%- endfor %}",
    # Mistral Small 3.x / v11 tokenizers: name then [ARGS] then the arguments.
    "mistral_v11": _CALL_LOOP + "{{- '[TOOL_CALLS]' + f.name + '[ARGS]' + (f.arguments | tojson) }}{%- endfor %}",
    # Kimi K2: a section of indexed calls.
    "kimi_k2": "{{- '<|tool_calls_section_begin|>' }}" + _CALL_LOOP +
               "{{- '<|tool_call_begin|>functions.' + f.name + ':' + loop.index0|string + "
               "'<|tool_call_argument_begin|>' + (f.arguments | tojson) + '<|tool_call_end|>' }}{%- endfor %}"
               "{{- '<|tool_calls_section_end|>' }}",
    # DeepSeek V3: the arguments (sent as JSON text) in a json code block, calls on their own lines.
    "deepseek_v3": "{{- '<｜tool▁calls▁begin｜>' }}" + _CALL_LOOP + "{%- if not loop.first %}{{- '\\n' }}{%- endif %}"
                   "{{- '<｜tool▁call▁begin｜>function<｜tool▁sep｜>' + f.name + '\\n```json\\n' + "
                   "(f.arguments | tojson) + '\\n```<｜tool▁call▁end｜>' }}{%- endfor %}{{- '<｜tool▁calls▁end｜>' }}",
    # Mistral 7B v0.3 and other v3-tokenizer templates: one list, each call's function as tojson with its id added.
    "mistral": "{{- '[TOOL_CALLS] [' }}" + _CALL_LOOP + "{%- set out = f | tojson %}{{- out[:-1] }}"
               "{{- ', \"id\": \"' + call.id + '\"}' }}{%- if not loop.last %}{{- ', ' }}{%- else %}"
               "{{- ']' }}{%- endif %}{%- endfor %}",
    # GLM 4.5/4.6: string values raw, others through tojson; calls on their own lines.
    "glm4": _CALL_LOOP + "{%- if not loop.first %}{{- '\\n' }}{%- endif %}"
            "{{- '<tool_call>' + f.name + '\\n' }}{%- for k, v in f.arguments.items() %}"
            "{{- '<arg_key>' + k + '</arg_key>\\n<arg_value>' }}{{- v if v is string else v | tojson }}"
            "{{- '</arg_value>\\n' }}{%- endfor %}{{- '</tool_call>' }}{%- endfor %}",
}
SINGLE_CALL = {"llama3_json"}
"""Families whose template renders one call per turn (Llama 3.1-3.3 refuse several)."""


def _spec(name: str, choice: str = "required") -> dict[str, Any]:
    return {"kind": "tools", "format": name, "tools": [WEATHER], "choice": choice, "parallel": True,
            "content": None}


def _rendered(name: str, content: str = "") -> str:
    calls = CALLS[:1] if name in SINGLE_CALL else CALLS
    message = {"role": "assistant", "content": content,
               "tool_calls": [{"type": "function", "id": call_id, "function": {"name": n, "arguments": a}}
                              for (n, a), call_id in zip(calls, CALL_IDS)]}
    return render_chat_template("{%- set message = messages[0] %}{{- message.content }}" + TEMPLATES[name],
                                [message], add_generation_prompt=False)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_templates_rendering_of_past_calls_is_accepted_and_read_back(name: str) -> None:
    text = _rendered(name)
    assert build_constraint(_spec(name), 60).accepts(text.encode()), text
    content, calls = FORMATS[name].parse(text, {"get_weather": WEATHER["parameters"]})
    expected = CALLS[:1] if name in SINGLE_CALL else CALLS
    assert content == "" and [(c.name, json.loads(c.arguments)) for c in calls] == expected
    if name == "mistral":
        assert [c.id for c in calls] == CALL_IDS


@pytest.mark.parametrize("name", ["hermes", "deepseek_v3", "glm4"])
def test_content_then_the_templates_calls_is_accepted(name: str) -> None:
    text = _rendered(name, "Checking both.")
    assert build_constraint(_spec(name, "auto"), 60).accepts(text.encode()), text


@pytest.mark.parametrize(("name", "reply"), [
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>\n\n'
               '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'),
    ("mistral", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Rome"}}, '
                '{"name": "get_weather", "arguments": {"city": "Oslo"}}]'),
    ("mistral", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}}]'),
    ("llama3_json", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Rome"}}'),
    ("pythonic", '<|tool_call_start|>[get_weather(city="Rome")]<|tool_call_end|>'),
    ("pythonic", '<|tool_call_start|>[get_weather(city="Rome", days=3, units={"wind": "kmh", "rain": True}), '
                 'get_weather(city="Oslo")]<|tool_call_end|>'),
    ("qwen_xml", "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n"
                 "</tool_call>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
                 "</function>\n</tool_call>"),
])
def test_hand_written_replies_in_the_familys_spellings_are_accepted(name: str, reply: str) -> None:
    assert build_constraint(_spec(name), 60).accepts(reply.encode())
    _, calls = FORMATS[name].parse(reply, {"get_weather": WEATHER["parameters"]})
    marker = {"qwen_xml": "<function=get_weather>", "pythonic": "get_weather("}.get(name, '"get_weather"')
    assert [c.name for c in calls] == ["get_weather"] * reply.count(marker)


@pytest.mark.parametrize("name", ["hermes", "mistral", "mistral_v11", "kimi_k2", "deepseek_v3", "json"])
def test_json_arguments_are_forced_in_tojson_spacing(name: str) -> None:
    """Compact arguments (`{"city":"Rome"}`) are not the template's spelling and are refused."""
    spaced = FORMATS[name].render("get_weather", json.dumps({"city": "Rome", "days": 2}))
    compact = FORMATS[name].render("get_weather", json.dumps({"city": "Rome", "days": 2}, separators=(",", ":")))
    constraint = build_constraint(_spec(name), 60)
    assert constraint.accepts(FORMATS[name].join([spaced]).encode())
    assert not constraint.accepts(FORMATS[name].join([compact]).encode())


def test_free_text_is_never_read_as_a_call_by_vllms_readers() -> None:
    """Free text holds no `{` under llama3_json (vLLM decodes one at every brace) and no spelled-out call under
    deepseek_v3 (vLLM's pattern runs over the whole reply)."""
    llama = build_constraint(_spec("llama3_json", "auto"), 60)
    assert llama.accepts(b"The weather is fine.")
    assert not llama.accepts(b"a {set} of words")
    deepseek = build_constraint(_spec("deepseek_v3", "auto"), 60)
    spelled = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{}\n```<｜tool▁call▁end｜>"
    assert not deepseek.accepts(f"Say {spelled}".encode())


def test_tojson_is_hugging_faces() -> None:
    """Keys in their own order, `", "`/`": "`, no HTML escapes: what the families' templates were trained with."""
    rendered = render_chat_template("{{ messages[0].content | tojson }}", [{"role": "user", "content": {
        "z": "<b>", "a": [1, 2]}}], add_generation_prompt=False)
    assert rendered == '{"z": "<b>", "a": [1, 2]}'
