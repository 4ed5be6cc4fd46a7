"""A slow compile holds up no other request: a big tool list compiles in a worker process while requests whose
grammars are ready keep decoding, and /metrics reports the compile's seconds.

The tool list is slow to compile whatever the per-tool compiler does (each tool's argument is a string of
hundreds of characters at most, a counted repetition); the other client's request (a schema compiled before)
is asked while the compile is on a worker (`grammar_compiles_running`) and must be answered in about its own
time, not after the compile.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import openai
import pytest

from tests.server.server_fixtures import metric, running_server

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "n": {"type": "integer"}},
          "required": ["city", "n"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA}}


def _big_tools(tools: int = 12, length: int = 300) -> list[dict[str, Any]]:
    """`tools` function tools whose argument is a string of at most `length` characters: a counted repetition, so
    the list's reply grammar takes about a second to compile from a few bytes of schema (six tools of 150 took
    0.35 s once a bounded string's DFA was shown minimal without refinement: too close to a 0.1-0.17 s reply)."""
    return [{"type": "function", "function": {"name": f"note_{i}", "parameters": {
        "type": "object", "properties": {"text": {"type": "string", "maxLength": length + i}},
        "required": ["text"], "additionalProperties": False}}} for i in range(tools)]


def _ask(client: openai.OpenAI, max_tokens: int = 16, **extra: Any) -> float:
    """Seconds to a whole reply of one chat request."""
    began = time.monotonic()
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Where?"}],
                                   max_tokens=max_tokens, **extra)
    return time.monotonic() - began


@pytest.mark.timeout(600)
def test_a_request_with_a_ready_grammar_decodes_while_a_big_tool_list_compiles(tiny_model) -> None:
    with running_server(tiny_model, max_rows=4) as url:
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=300)
        alone = min(_ask(client, response_format=FORMAT) for _ in range(3))  # compiled by the first
        compile_before = metric(url, "grammar_compile_seconds_total")
        outcome: list[Any] = []

        def agent() -> None:
            outcome.append(_ask(client, 80, tools=_big_tools(), tool_choice="required"))

        thread = threading.Thread(target=agent)
        thread.start()
        deadline = time.monotonic() + 30
        while metric(url, "grammar_compiles_running") < 1 and time.monotonic() < deadline:
            time.sleep(0.02)  # the tool list's compile is on a worker
        during = [_ask(client, response_format=FORMAT)]
        while metric(url, "grammar_compiles_running") and len(during) < 4:
            during.append(_ask(client, response_format=FORMAT))
        compiling = metric(url, "grammar_compiles_running") == 1 or len(during) > 1
        thread.join()
        assert outcome, "the tool request failed"
        compile_seconds = metric(url, "grammar_compile_seconds_total") - compile_before
    assert compiling, "the tool list compiled before the other request was answered: not a slow compile"
    assert compile_seconds > 2 * max(during), (during, compile_seconds)  # none of them waited for it
    assert max(during) < 1.0 + 4 * alone, (during, alone, compile_seconds)
