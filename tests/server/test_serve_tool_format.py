"""`stcon serve --tool-format NAME`: a real server process writes and reads tool calls in the named format, and an
unknown name is refused by the command line with the registry's names."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import openai
import pytest

from stdsl.compiler.tools.formats import FORMATS
from tests.server.server_fixtures import free_port, live_group


def test_an_unknown_tool_format_is_refused_with_the_known_ones() -> None:
    done = subprocess.run([sys.executable, "-m", "stdsl.cli", "serve", "--tool-format", "nope"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "--tool-format" in done.stderr
    assert all(name in done.stderr for name in FORMATS)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_named_format_is_the_servers() -> None:
    """Loads SmolLM2 in a real `stcon serve` (about 15 s alone, 45 s on a loaded machine), hence slow."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "stdsl.cli", "serve", "--port", str(port), "--max-rows", "2",
                                "--tool-format", "qwen_xml"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"stcon serve did not start: {process.stderr.read() if process.stderr else ''}")
            time.sleep(0.3)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=120)
        ask = [{"role": "user", "content": "Say hi to Ann."}]
        patterned = {"type": "function", "function": {"name": "greet", "parameters": {
            "type": "object", "properties": {"who": {"type": "string", "pattern": "^[A-Z]"}}, "required": ["who"]}}}
        with pytest.raises(openai.BadRequestError, match="qwen_xml call syntax writes strings raw"):
            client.chat.completions.create(model="smollm2", messages=ask, tools=[patterned], max_tokens=8)
        named = client.chat.completions.create(model="smollm2", messages=ask, tools=[patterned], max_tokens=8,
                                               extra_body={"tool_format": "hermes"}, tool_choice="none")
        assert named.choices[0].message.tool_calls is None
        plain = {"type": "function", "function": {"name": "greet", "parameters": {
            "type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}}}
        reply = client.chat.completions.create(model="smollm2", messages=ask, tools=[plain], tool_choice="required",
                                               max_tokens=40, temperature=0)
        call = reply.choices[0].message.tool_calls[0]
        assert call.function.name == "greet" and isinstance(json.loads(call.function.arguments)["who"], str)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        for left in live_group(process.pid):
            left.kill()
