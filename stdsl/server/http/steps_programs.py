"""Python programs of steps served by name: `stcon serve --steps-program FILE.py:NAME`, and a chat request with
`program: {"name": NAME, "arguments": {...}}` runs it (docs/serving.md).

A client cannot send Python: it names a program the server was started with. The program writes its own messages
(the request's are not read); the reply content is its result as JSON (`values` by step name and what the function
`returned`), and the message carries the trace of its steps in `stdsl.steps`. A stream sends each main-line step's
value as a `delta.stdsl` value the moment that step ends (the event shape of `Stream.events()`; a `.stc` program's
values once its run ends), then the content; the trace comes with the whole reply only. The steps decode on the
server's engine, beside its other requests (their rows count in /metrics). Arguments that do not fit are a 400
naming `program` before any chunk, an unknown name a 404; a failed step is a 400 too, or, once a stream has begun,
an error event that ends it. A client that leaves stops the run: its rows in flight are cancelled and no later step
decodes.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from stdsl.errors import StdslError
from stdsl.runtime.program_steps.dataset import plain, run_record
from stdsl.runtime.program_steps.record import ProgramRun, StepRecord
from stdsl.runtime.program_steps.state import ProgramRunState
from stdsl.server.http.events import sse_event
from stdsl.server.openai_api.errors import RequestError, from_stdsl_error, overloaded
from stdsl.server.openai_api.protocol import ChatChoice, ChatCompletion, ReplyMessage, Usage


async def serve_steps_program(state: Any, body: Any, request: Request) -> Response:
    """Run the steps program the request names with its arguments and answer as a chat completion (or its stream)."""
    call = body.program
    program = state.steps_programs.get(call.name)
    if program is None:
        served = ", ".join(sorted(state.steps_programs)) or "none: start the server with --steps-program FILE.py:NAME"
        raise RequestError(f"no steps program named {call.name!r} is served (served: {served})", param="program",
                           code="program_not_found", status=404)
    if state.in_flight >= state.capacity:
        raise overloaded(state.in_flight)
    try:
        call_args, call_kwargs = program.bind(call.arguments)
    except StdslError as error:
        raise from_stdsl_error(error, "program") from None
    loop = asyncio.get_running_loop()
    ended: asyncio.Queue[StepRecord] = asyncio.Queue()

    def on_step(record: StepRecord) -> None:
        if body.stream and program.values_by_step and not record.branch and record.error is None:
            loop.call_soon_threadsafe(ended.put_nowait, record)

    run_state = ProgramRunState(state.model, {**program.defaults, **_options(body)}, on_step, state.engine)
    state.in_flight += 1
    running = asyncio.ensure_future(asyncio.to_thread(program.run_on, run_state, call_args, call_kwargs))

    def finished(_: asyncio.Future[ProgramRun]) -> None:
        state.in_flight -= 1

    running.add_done_callback(finished)
    ident = f"chatcmpl-{uuid.uuid4().hex}"
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(_chunks(state, ident, run_state, running, ended, include_usage,
                                         program.values_by_step),
                                 media_type="text/event-stream")
    gone = asyncio.ensure_future(_client_gone(request))
    try:
        await asyncio.wait((running, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not running.done():  # the client left: the run stops at its next step
        run_state.abort()
        running.add_done_callback(_retrieved)
        return Response(status_code=499)
    try:
        run = running.result()
    except StdslError as error:
        raise from_stdsl_error(error, "program") from None
    reply = ChatCompletion(id=ident, model=state.model_name, usage=_usage(run), choices=[
        ChatChoice(index=0, message=ReplyMessage(content=_content(run_record(run))),
                   finish_reason="stop")]).model_dump()
    reply["choices"][0]["message"]["stdsl"] = {"steps": [step.to_dict() for step in run.steps]}
    return JSONResponse(json.loads(json.dumps(reply, default=str)))


def _options(body: Any) -> dict[str, Any]:
    """The decoding options a request sets for every step (those it leaves out: the program's own)."""
    options: dict[str, Any] = {}
    for name, value in (("temperature", body.temperature), ("seed", body.seed), ("top_p", body.top_p),
                        ("max_tokens", body.max_completion_tokens or body.max_tokens)):
        if value is not None:
            options[name] = value
    return options


def _content(record: dict[str, Any]) -> str:
    """The reply content: a run's record (`run_record`) as JSON."""
    return json.dumps(record, ensure_ascii=False, default=str)


def _usage(run: ProgramRun) -> Usage:
    return Usage(prompt_tokens=run.stats.prompt_tokens, completion_tokens=run.stats.emitted_tokens,
                 total_tokens=run.stats.prompt_tokens + run.stats.emitted_tokens)


async def _client_gone(request: Request) -> None:
    """Return once the client has disconnected (the body is read, so the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        continue


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark an abandoned run's outcome as seen (asyncio logs an outcome nobody read)."""
    if not future.cancelled():
        future.exception()


async def _chunks(state: Any, ident: str, run_state: ProgramRunState, running: asyncio.Future[ProgramRun],
                  ended: asyncio.Queue[StepRecord], include_usage: bool, values_by_step: bool) -> AsyncIterator[str]:
    """The reply as server-sent chunks: the role, each main-line value as its step ends (or every value once the run
    ends, for a program whose step records are not its values), the content, the finish, usage, [DONE]. Closed early
    (the client left), it aborts the run."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        payload = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": state.model_name,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        return sse_event(payload)

    def value(record: StepRecord) -> str:
        return chunk({"stdsl": [{"path": [record.name], "value": plain(record.value), "complete": True}]})

    try:
        yield chunk({"role": "assistant", "content": ""})
        while not running.done():
            next_step = asyncio.ensure_future(ended.get())
            await asyncio.wait((next_step, running), return_when=asyncio.FIRST_COMPLETED)
            if next_step.done():
                yield value(next_step.result())
            else:
                next_step.cancel()
        while not ended.empty():
            yield value(ended.get_nowait())
        try:
            run = running.result()
        except StdslError as error:
            yield sse_event(from_stdsl_error(error, 'program').body())
            return
        record = run_record(run)
        if not values_by_step:
            yield chunk({"stdsl": [{"path": [name], "value": item, "complete": True}
                                   for name, item in record["values"].items()]})
        yield chunk({"content": _content(record)})
        yield chunk({}, "stop")
        if include_usage:
            payload = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": state.model_name,
                       "choices": [], "usage": _usage(run).model_dump()}
            yield sse_event(payload)
        yield "data: [DONE]\n\n"
    finally:
        if not running.done():
            run_state.abort()
            running.add_done_callback(_retrieved)
