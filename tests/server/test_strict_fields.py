"""OpenAI's `strict` fields on the server: absent or true closes objects to their declared members, false is the
schema's exact open language, for `response_format.json_schema.strict` and for each tool's `function.strict`."""
from __future__ import annotations

import json

import numpy as np
import pytest

from stdsl.compiler.constraint_spec import build_constraint
from stdsl.compiler.tools.formats import FORMATS
from stdsl.server.openai_api.protocol import ChatCompletionRequest
from stdsl.server.requests.chat_render import CallMemory
from stdsl.server.requests.request_plan import chat_plan
from tests.compiler.accepting_walks import random_accepted

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
OPEN_TEXT = '{"name":"Ada","age":36,"nickname":"Countess"}'
OPEN_ARGUMENTS = '{"name": "Ada", "age": 36, "nickname": "Countess"}'
"""The same member in the spelling Hermes calls are forced in (its template's `tojson` spacing)."""
MESSAGES = [{"role": "user", "content": "hi"}]


def _plan(tiny_model, **fields) -> dict:
    request = ChatCompletionRequest.model_validate({"messages": MESSAGES, **fields})
    return json.loads(json.dumps(chat_plan(request, tiny_model, CallMemory(), tool_format="hermes").spec))


@pytest.mark.parametrize("strict, accepts_undeclared", [(None, False), (True, False), (False, True)])
def test_response_format_strict_says_whether_objects_are_closed(tiny_model, strict: bool | None,
                                                                 accepts_undeclared: bool) -> None:
    json_schema: dict = {"name": "person", "schema": PERSON}
    if strict is not None:
        json_schema["strict"] = strict
    spec = _plan(tiny_model, response_format={"type": "json_schema", "json_schema": json_schema})
    assert spec["strict"] is (strict is not False)
    compiled = build_constraint(spec, 60)
    assert compiled.accepts('{"name":"Ada","age":36}')
    assert compiled.accepts(OPEN_TEXT) is accepts_undeclared


def _tool(name: str, strict: bool | None) -> dict:
    function: dict = {"name": name, "parameters": PERSON}
    if strict is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}


def test_each_tool_strict_field_closes_or_opens_its_own_arguments(tiny_model) -> None:
    spec = _plan(tiny_model, tools=[_tool("closed", None), _tool("open", False), _tool("said", True)],
                 tool_choice="required")
    assert [t.get("strict") for t in spec["tools"]] == [None, False, None]
    compiled = build_constraint(spec, 60)
    hermes = FORMATS["hermes"]
    parameters = {name: PERSON for name in ("closed", "open", "said")}
    for name in ("closed", "open", "said"):
        assert compiled.accepts(hermes.render(name, '{"name": "Ada", "age": 36}')), name
        assert compiled.accepts(hermes.render(name, OPEN_ARGUMENTS)) is (name == "open"), name
    rng = np.random.default_rng(0)
    for _ in range(40):
        reply = random_accepted(compiled.automaton, rng, wander=120).decode("utf-8")
        calls = hermes.parse(reply, parameters)[1]
        assert calls, reply
        for call in calls:
            if call.name != "open":
                assert set(json.loads(call.arguments)) <= set(PERSON["properties"]), reply
