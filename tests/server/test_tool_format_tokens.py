"""Tool-call markers that the serving tokenizer has as one special (or added) token are written as that token: every
accepted reply's visible text is read by the family's parser into valid calls, every marker of the calls is its
token (none is spelled as text there), and the free text before them never spells a trigger."""
from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

import stdsl
from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.special_tokens import special_spelling, token_markers, visible_bytes
from stdsl.compiler.tools.formats import FORMATS
from stdsl.errors import CompileError
from tests.runtime.special_tokenizers import family_model
from tests.runtime.thinking_templates import OPENING
from tests.server.test_reply_grammar import _random_accepted
from tests.server.test_tool_formats import FAMILY_READERS, _check_reply, _openai_tools

PLAIN = [{"type": "string", "enum": ["celsius", "fahrenheit", "a b"]}, {"type": "integer", "minimum": -50,
         "maximum": 5000}, {"type": "boolean"}, {"type": "number", "minimum": 0, "maximum": 10}]
"""Values that cannot hold a marker's characters, so any marker text in a call is the format's own."""
TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"unit": PLAIN[0], "days": PLAIN[1]},
                                                "required": ["unit"], "additionalProperties": False}},
         {"name": "set_alarm", "parameters": {"type": "object", "properties": {"on": PLAIN[2], "level": PLAIN[3]},
                                              "required": ["on", "level"], "additionalProperties": False}}]
TOKEN_FORMATS = sorted(name for name in FAMILY_READERS if FORMATS[name].markers)


def tools_spec(name: str, tokens: tuple[str, ...], choice: str = "auto", parallel: bool = True) -> dict:
    return {"kind": "tools", "format": name, "tools": TOOLS, "choice": choice, "parallel": parallel,
            "content": None, "tokens": list(tokens)}


def check_markers(name: str, data: bytes) -> None:
    """Before the first token the reply is free text without a trigger; from it on, each marker's text occurs
    exactly where its token does."""
    tool_format = FORMATS[name]
    first = data.find(b"\xff")
    free = visible_bytes(data if first < 0 else data[:first]).decode()
    assert not any(trigger in free for trigger in tool_format.triggers if trigger in tool_format.markers), (name, data)
    if first < 0:
        return
    calls = data[first:]
    shown = visible_bytes(calls).decode()
    for marker in tool_format.markers:
        assert shown.count(marker) == calls.count(special_spelling(marker)), (name, marker, data)


@pytest.mark.parametrize("name", TOKEN_FORMATS)
def test_accepted_replies_write_every_marker_as_its_token_and_parse(name: str) -> None:
    tokens = FORMATS[name].markers
    rng = random.Random(7)
    calls_seen = 0
    for choice, parallel in [("auto", True), ("required", True), ("get_weather", False)]:
        constraint = build_constraint(tools_spec(name, tokens, choice, parallel), 60)
        assert set(constraint.special_tokens) == set(tokens)
        for _ in range(8):
            data = _random_accepted(constraint.automaton, rng, soft_limit=160)
            check_markers(name, data)
            calls = _check_reply(name, visible_bytes(data).decode(), TOOLS)
            calls_seen += len(calls)
            if choice != "auto":
                assert calls and ("" in FORMATS[name].open_spellings
                                  or data.count(special_spelling(FORMATS[name].markers[0])) >= 1)
    assert calls_seen >= 16


@pytest.mark.parametrize("name", TOKEN_FORMATS)
def test_text_markers_are_refused_where_tokens_stand(name: str) -> None:
    """A call rendered as text is no reply of the token grammar; its tokens' spelling of the same text is."""
    tool_format = FORMATS[name].with_tokens(FORMATS[name].markers)
    constraint = build_constraint(tools_spec(name, tool_format.tokens, "required"), 60)
    arguments = '{"unit": "celsius"}' if tool_format.spacing else '{"unit":"celsius"}'
    text = tool_format.join([tool_format.render("get_weather", arguments)])
    assert not constraint.accepts(text.encode()) and constraint.accepts(text)
    with pytest.raises(CompileError, match="not a marker"):
        FORMATS[name].with_tokens(["<|not_a_marker|>"])


DECODED = ["llama3_json", "mistral", "hermes", "kimi_k2", "deepseek_v3", "harmony", "glm47"]


@pytest.mark.parametrize("name", DECODED)
def test_decoding_emits_each_marker_as_its_one_id(smollm2_tokenizer, name: str) -> None:
    """The tiny model over a tokenizer with the family's markers as special tokens: each marker of a reply is one
    emitted id, the ids decode to the visible reply, and the family's parser reads valid calls from it."""
    tokenizer, model = family_model(smollm2_tokenizer, "special", OPENING)
    tokens = token_markers(FORMATS[name].markers, tokenizer.special_tokens)
    assert tokens == FORMATS[name].markers
    prompt = tokenizer.encode("<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n")
    for seed, choice in [(0, "required"), (1, "auto")]:
        constraint = build_constraint(tools_spec(name, tokens, choice, parallel=False), 60)
        out = stdsl.generate(model, prompt, constraint=constraint, max_tokens=60, temperature=1.0, seed=seed,
                             reasoning=False)
        assert tokenizer.decode(out.tokens) == out.text and constraint.accepts(out.data)
        check_markers(name, out.data)
        for marker in tokens:
            assert out.tokens.count(tokenizer.special_tokens[marker]) == out.data.count(special_spelling(marker))
        calls = FAMILY_READERS[name](out.text, _openai_tools(TOOLS))
        if choice == "required":
            assert len(calls) == 1 and ("" in FORMATS[name].open_spellings
                                        or out.tokens.count(tokenizer.special_tokens[tokens[0]]) >= 1)
        for call_name, arguments in calls:
            jsonschema.validate(arguments, {t["name"]: t["parameters"] for t in TOOLS}[call_name])


def test_the_server_plan_asks_for_the_tokens_its_tokenizer_has(smollm2_tokenizer) -> None:
    """The tool format's markers and the thinking tags the tokenizer has are asked for as tokens in the spec."""
    from stdsl.server.openai_api.protocol import ChatCompletionRequest
    from stdsl.server.requests.chat_render import CallMemory
    from stdsl.server.requests.request_plan import chat_plan

    _, model = family_model(smollm2_tokenizer, "special", OPENING)
    tools: list[dict[str, Any]] = _openai_tools(TOOLS)
    request = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], "tools": tools})
    for name in ("llama3_json", "mistral", "hermes", "json"):
        plan = chat_plan(request, model, CallMemory(), tool_format=name)
        spec = json.loads(json.dumps(plan.spec))
        assert spec["kind"] == "reasoning" and spec["mode"] == "opened" and spec["tokens"] == ["<think>", "</think>"]
        assert spec["answer"].get("tokens", []) == list(FORMATS[name].markers), name
        compiled = build_constraint(spec, 60)
        assert set(compiled.constraint.special_tokens) == {"</think>", *FORMATS[name].markers}
