"""OpenAI custom tools (raw input in a Lark grammar or a regex) through a real server and the `openai` client, and
in every tool-call format against that family's own parser: the returned input is in the grammar's language."""
from __future__ import annotations

import json
import random

import openai
import pytest

import stdsl
from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.grammar import Grammar
from stdsl.compiler.tools.formats import FORMATS
from stdsl.compiler.tools.formats.base import CUSTOM_PARAMETERS
from stdsl.server.openai_api.protocol import CustomCall, CustomToolCall
from stdsl.server.requests.chat_render import CallMemory, call_text
from tests.server.server_fixtures import running_server
from tests.server.test_reply_grammar import _random_accepted
from tests.server.test_tool_formats import FAMILY_READERS

SQL = '''start: "SELECT " COLS " FROM " NAME (" WHERE " NAME "=" VALUE)?
COLS: "*" | NAME (", " NAME)*
NAME: /[a-z_]{1,8}/
VALUE: /"[a-z ]{0,6}"/ | /[0-9]{1,4}/'''
CODE = r"[A-Z]{3}-[0-9]{2,4}(\n[a-z<>/\\]{1,5})?"
LANGUAGES = {"sql": stdsl.compile(Grammar(SQL, syntax="lark")), "code": stdsl.compile(stdsl.Regex(CODE))}
SQL_TOOL = {"type": "custom", "custom": {"name": "sql", "description": "Run a query",
                                         "format": {"type": "grammar", "grammar": {"syntax": "lark",
                                                                                   "definition": SQL}}}}
CODE_TOOL = {"type": "custom", "custom": {"name": "code", "format": {"type": "grammar", "syntax": "regex",
                                                                     "definition": CODE}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
    "additionalProperties": False}}}
ASK = [{"role": "user", "content": "List every user, then look up code ABC-123."}]


def _entries(*tools: dict) -> list[dict]:
    entries = []
    for i, tool in enumerate(tools):
        fmt = tool["custom"]["format"]
        grammar = fmt.get("grammar", fmt)
        entries.append({"name": tool["custom"]["name"], "custom": {
            "syntax": grammar["syntax"], "definition": grammar["definition"],
            "field": f"tools[{i}].custom.format.definition"}})
    return entries


AS_FUNCTIONS = {"longcat"}
"""Families whose parser reads every offered tool as a function (a custom tool reaches it as the function whose
one string parameter carries the input, as the server offers it to the template)."""


@pytest.mark.parametrize("name", sorted(FAMILY_READERS))
def test_custom_calls_in_every_format_read_back_by_the_familys_parser(name: str) -> None:
    tool_format = FORMATS[name]
    spec = {"kind": "tools", "format": name, "tools": _entries(SQL_TOOL, CODE_TOOL), "choice": "required",
            "parallel": True, "content": None}
    constraint = build_constraint(spec, 60)
    rng = random.Random(name)
    for _ in range(8):
        reply = _random_accepted(constraint.automaton, rng, soft_limit=90).decode("utf-8")
        _, calls = tool_format.parse(reply, {"sql": CUSTOM_PARAMETERS, "code": CUSTOM_PARAMETERS})
        inputs = [(call.name, tool_format.custom_input(call.arguments)) for call in calls]
        assert inputs and all(LANGUAGES[n].accepts(raw.encode()) for n, raw in inputs), (reply, inputs)
        offered = [SQL_TOOL, CODE_TOOL] if name not in AS_FUNCTIONS else [
            {"type": "function", "function": {"name": t["custom"]["name"], "parameters": CUSTOM_PARAMETERS}}
            for t in (SQL_TOOL, CODE_TOOL)]
        theirs = FAMILY_READERS[name](reply, offered)
        assert [(n, a if isinstance(a, str) else a["input"]) for n, a in theirs] == inputs, reply
        for call_name, raw in inputs:
            rendered = tool_format.render(call_name, tool_format.custom_arguments(raw))
            assert constraint.accepts(tool_format.join([rendered]).encode()), rendered


def test_an_input_outside_the_language_is_never_a_call() -> None:
    spec = {"kind": "tools", "format": "hermes", "tools": _entries(CODE_TOOL), "choice": "auto", "parallel": True,
            "content": None}
    constraint = build_constraint(spec, 60)
    call = FORMATS["hermes"].render("code", json.dumps("ABC-12\n<a>"))
    assert constraint.accepts(call.encode())
    for raw in ("AB-12", "ABC-12\n", "ABC-12\nA", "ABC-12 "):
        assert not constraint.accepts(FORMATS["hermes"].render("code", json.dumps(raw)).encode()), raw


@pytest.fixture(scope="module")
def client(tiny_model):
    with running_server(tiny_model, max_rows=4) as url:
        yield openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=120)


def _create(client, **options):
    options = {"model": "m", "messages": ASK, "max_tokens": 80, "temperature": 1.0, "seed": 5, **options}
    return client.chat.completions.create(**options)


def _custom_calls(message) -> list[tuple[str, str]]:
    calls = []
    for call in message.tool_calls or ():
        assert call.type == "custom", call
        assert LANGUAGES[call.custom.name].accepts(call.custom.input.encode()), call.custom.input
        calls.append((call.custom.name, call.custom.input))
    return calls


def test_required_calls_return_input_in_the_grammars_language(client) -> None:
    reply = _create(client, tools=[SQL_TOOL, CODE_TOOL, WEATHER], tool_choice="required", n=2, max_tokens=60)
    custom = 0
    for choice in reply.choices:
        assert choice.message.tool_calls and choice.finish_reason in ("tool_calls", "length")
        for call in choice.message.tool_calls:
            if call.type == "function":
                assert len(json.loads(call.function.arguments)["city"]) <= 12
            else:
                assert call.type == "custom" and LANGUAGES[call.custom.name].accepts(call.custom.input.encode())
                custom += 1
    assert custom


@pytest.mark.parametrize("tool_format", ["hermes", "qwen_xml", "glm47", "mistral"])
def test_a_named_custom_tool_is_the_one_call(client, tool_format: str) -> None:
    reply = _create(client, tools=[SQL_TOOL, CODE_TOOL], tool_choice={"type": "custom", "custom": {"name": "code"}},
                    extra_body={"tool_format": tool_format})
    assert [name for name, _ in _custom_calls(reply.choices[0].message)] == ["code"]


def test_parallel_tool_calls_false_gives_at_most_one_call(client) -> None:
    for seed in range(3):
        reply = _create(client, tools=[SQL_TOOL, CODE_TOOL], tool_choice="required", parallel_tool_calls=False,
                        seed=seed)
        assert len(_custom_calls(reply.choices[0].message)) == 1


def test_streamed_custom_calls(client) -> None:
    chunks = list(_create(client, tools=[CODE_TOOL], tool_choice="required", stream=True))
    deltas = [d.to_dict() for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or ())]
    assert deltas and [d["index"] for d in deltas] == list(range(len(deltas)))
    for delta in deltas:
        assert delta["type"] == "custom" and delta["custom"]["name"] == "code"
        assert LANGUAGES["code"].accepts(delta["custom"]["input"].encode())


def test_a_custom_call_in_the_history_is_rendered_verbatim(client) -> None:
    first = _create(client, tools=[CODE_TOOL], tool_choice="required", parallel_tool_calls=False)
    call = first.choices[0].message.tool_calls[0]
    history = ASK + [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "found"}]
    second = _create(client, messages=history, tools=[CODE_TOOL], max_tokens=10)
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens - 2


@pytest.mark.parametrize("name", ["hermes", "glm4", "qwen_xml", "mistral", "gemma4"])
def test_call_text_repeats_what_the_model_wrote(name: str) -> None:
    tool_format, memory = FORMATS[name], CallMemory()
    written = tool_format.render("code", tool_format.custom_arguments('ABC-12\n<"a\\>'))
    memory.remember("call_1", "code", tool_format.custom_arguments('ABC-12\n<"a\\>'), written + "")
    sent_back = CustomToolCall(id="call_1", custom=CustomCall(name="code", input='ABC-12\n<"a\\>'))
    assert call_text(sent_back, tool_format, memory, 0) == written
    fresh = CustomToolCall(id="call_2", custom=CustomCall(name="code", input="XYZ-99"))
    reply = tool_format.join([call_text(fresh, tool_format, memory, 0)])
    assert tool_format.custom_input(tool_format.parse(reply, {"code": CUSTOM_PARAMETERS})[1][0].arguments) == "XYZ-99"


@pytest.mark.parametrize(("tool", "param", "words"), [
    ({"type": "custom", "custom": {"name": "q", "format": {"type": "grammar", "grammar": {
        "syntax": "lark", "definition": 'start: "a" ('}}}}, "tools[0].custom.format.grammar.definition", ":1:12:"),
    ({"type": "custom", "custom": {"name": "q", "format": {"type": "grammar", "syntax": "regex",
                                                           "definition": "ab\n[c-"}}},
     "tools[0].custom.format.definition", ":2:1:"),
    ({"type": "custom", "custom": {"name": "q", "format": {"type": "grammar"}}}, "tools[0].custom.format",
     "needs 'grammar'"),
])
def test_malformed_grammars_are_400s_naming_the_field(client, tool: dict, param: str, words: str) -> None:
    with pytest.raises(openai.BadRequestError) as error:
        _create(client, tools=[tool], tool_choice="required")
    body = error.value.body
    assert body["param"] == param and words in body["message"], body


def test_a_named_tool_that_is_not_offered_is_a_400(client) -> None:
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        _create(client, tools=[CODE_TOOL], tool_choice={"type": "custom", "custom": {"name": "sql"}})


def test_a_text_custom_tool_takes_any_input(client) -> None:
    tool = {"type": "custom", "custom": {"name": "note", "format": {"type": "text"}}}
    reply = _create(client, tools=[tool, {"type": "custom", "custom": {"name": "memo"}}], tool_choice="required",
                    max_tokens=30)
    calls = reply.choices[0].message.tool_calls or []
    assert all(call.type == "custom" and isinstance(call.custom.input, str) for call in calls)
    assert calls or reply.choices[0].finish_reason == "length"
