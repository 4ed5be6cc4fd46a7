"""Python programs of steps served by name: `stcon serve --steps-program FILE.py:NAME`, and a chat request with
`program: {"name": NAME, "arguments": {...}}` runs it (docs/serving.md).

A client cannot send Python: it names a program the server was started with. The program writes its own
messages (the request's are not read); the reply content is its result as JSON (`values` by step name and what the
function `returned`), and the message carries the trace of its steps in `stdsl.steps`. A stream sends each main-line
value as a `delta.stdsl` value (as typed values of a constrained reply are), then the content; the trace comes with
the whole reply only. The run goes through the model's library engine; its mistakes (arguments that do not fit, a
failed step) are a 400 naming `program` before any chunk, an unknown name a 404.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import JSONResponse, Response, StreamingResponse

from stdsl.errors import StdslError
from stdsl.runtime.program_steps.dataset import plain, run_record
from stdsl.runtime.program_steps.record import ProgramRun
from stdsl.server.openai_api.errors import RequestError, from_stdsl_error, overloaded
from stdsl.server.openai_api.protocol import ChatChoice, ChatCompletion, ReplyMessage, Usage


async def serve_steps_program(state: Any, body: Any) -> Response:
    """Run the steps program the request names with its arguments and answer as a chat completion (or its stream)."""
    call = body.program
    program = state.steps_programs.get(call.name)
    if program is None:
        served = ", ".join(sorted(state.steps_programs)) or "none: start the server with --steps-program FILE.py:NAME"
        raise RequestError(f"no steps program named {call.name!r} is served (served: {served})", param="program",
                           code="program_not_found", status=404)
    if state.in_flight >= state.capacity:
        raise overloaded(state.in_flight)
    options = _options(body)
    state.in_flight += 1
    try:
        call_args, call_kwargs = program.bind(call.arguments)
        run: ProgramRun = await asyncio.to_thread(program.run, state.model, *call_args, **call_kwargs, **options)
    except StdslError as error:
        raise from_stdsl_error(error, "program") from None
    finally:
        state.in_flight -= 1
    content = json.dumps(run_record(run), ensure_ascii=False, default=str)
    usage = Usage(prompt_tokens=run.stats.prompt_tokens, completion_tokens=run.stats.emitted_tokens,
                  total_tokens=run.stats.prompt_tokens + run.stats.emitted_tokens)
    steps = [step.to_dict() for step in run.steps]
    ident = f"chatcmpl-{uuid.uuid4().hex}"
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(_chunks(state, ident, run, content, usage if include_usage else None),
                                 media_type="text/event-stream")
    reply = ChatCompletion(id=ident, model=state.model_name, usage=usage, choices=[
        ChatChoice(index=0, message=ReplyMessage(content=content), finish_reason="stop")]).model_dump()
    reply["choices"][0]["message"]["stdsl"] = {"steps": steps}
    return JSONResponse(json.loads(json.dumps(reply, default=str)))


def _options(body: Any) -> dict[str, Any]:
    """The decoding options a request sets for every step (those it leaves out: the program's own)."""
    options: dict[str, Any] = {}
    for name, value in (("temperature", body.temperature), ("seed", body.seed), ("top_p", body.top_p),
                        ("max_tokens", body.max_completion_tokens or body.max_tokens)):
        if value is not None:
            options[name] = value
    return options


async def _chunks(state: Any, ident: str, run: ProgramRun, content: str, usage: Usage | None) -> AsyncIterator[str]:
    """The reply as server-sent chunks: the role, each main-line value, the content, the finish, usage, [DONE]."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        payload = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": state.model_name,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
        return f"data: {json.dumps(payload, ensure_ascii=False, default=str)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for name, value in run.items():
        yield chunk({"stdsl": [{"path": [name], "value": plain(value), "complete": True}]})
    yield chunk({"content": content})
    yield chunk({}, "stop")
    if usage is not None:
        payload = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": state.model_name,
                   "choices": [], "usage": usage.model_dump()}
        yield f"data: {json.dumps(payload)}\n\n"
    yield "data: [DONE]\n\n"
