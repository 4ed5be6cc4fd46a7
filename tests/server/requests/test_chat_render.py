"""Chat rendering with tools: the assistant turn re-rendered verbatim, tools through the template or a system
prompt, tool results in the role the template knows; the round-trip prompt extends the first one."""
from __future__ import annotations

from stdsl.compiler.tools.formats import FORMATS as SYNTAXES
from stdsl.model_files.chat_template import render_chat_template
from stdsl.model_files.tokenizer import CHATML_TEMPLATE
from stdsl.server.openai_api.protocol import ChatCompletionRequest
from stdsl.server.requests.chat_render import CallMemory, chat_messages

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
PARIS, ROME = '{"city": "Paris "}', '{"city": "Rome"}'
TOOLS_TEMPLATE = "{% for t in tools %}{{ t.function.name }};{% endfor %}" + CHATML_TEMPLATE.replace(
    "message['role']", "('user' if message['role'] == 'tool' else message['role'])")


def _request(messages: list[dict]) -> ChatCompletionRequest:
    return ChatCompletionRequest(messages=messages, tools=[TOOL])


def test_an_assistant_turn_with_calls_is_the_exact_text_the_model_wrote() -> None:
    memory = CallMemory()
    syntax = SYNTAXES["qwen_xml"]
    written = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis \n</parameter>\n</function>\n</tool_call>"
    memory.remember("call_1", "get_weather", PARIS, written)
    request = _request([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me look. ", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": PARIS}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": ROME}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])
    plain, _ = chat_messages(request.messages, request.tools, syntax, CHATML_TEMPLATE, memory)
    assert plain[2] == {"role": "assistant", "content": "Let me look. " + written + "\n" +
                        syntax.render("get_weather", ROME)}
    assert plain[3] == {"role": "user", "content": "<tool_response>\nsunny\n</tool_response>"}
    assert plain[0]["role"] == "system" and "get_weather" in plain[0]["content"]


def test_templates_that_take_tools_get_them_and_keep_the_tool_role() -> None:
    request = _request([{"role": "user", "content": "Weather?"},
                        {"role": "tool", "tool_call_id": "c", "content": "sunny"}])
    plain, variables = chat_messages(request.messages, request.tools, SYNTAXES["hermes"], TOOLS_TEMPLATE,
                                     CallMemory())
    assert variables["tools"][0]["function"]["name"] == "get_weather"
    assert plain[0] == {"role": "user", "content": "Weather?"}
    assert plain[1]["role"] == "tool"
    assert render_chat_template(TOOLS_TEMPLATE, plain, **variables).startswith("get_weather;")


def test_the_round_trip_prompt_extends_the_first_prompt() -> None:
    syntax = SYNTAXES["hermes"]
    first = _request([{"role": "user", "content": "Weather in Paris?"}])
    plain, _ = chat_messages(first.messages, first.tools, syntax, CHATML_TEMPLATE, CallMemory())
    prompt = render_chat_template(CHATML_TEMPLATE, plain)
    reply = syntax.render("get_weather", '{"city":"Paris"}')
    second = _request([{"role": "user", "content": "Weather in Paris?"},
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": "x", "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
                       {"role": "tool", "tool_call_id": "x", "content": "sunny"}])
    plain, _ = chat_messages(second.messages, second.tools, syntax, CHATML_TEMPLATE, CallMemory())
    assert render_chat_template(CHATML_TEMPLATE, plain).startswith(prompt + reply)


def test_a_mistral_call_sent_back_is_rendered_with_its_id_as_the_v3_templates_write_it() -> None:
    """A call this server did not write is rendered afresh; in Mistral's format with its id where the id is one
    the v3 templates write (nine letters or digits), so the prompt shows past calls as the model was trained on."""
    syntax = SYNTAXES["mistral"]
    request = _request([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a1B2c3D4e", "type": "function", "function": {"name": "get_weather", "arguments": ROME}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": ROME}}]}])
    plain, _ = chat_messages(request.messages, request.tools, syntax, CHATML_TEMPLATE, CallMemory())
    assert plain[2]["content"] == ('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Rome"}, '
                                   '"id": "a1B2c3D4e"}, {"name": "get_weather", "arguments": {"city": "Rome"}}]')
