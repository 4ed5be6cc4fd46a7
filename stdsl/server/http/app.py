"""The OpenAI-compatible HTTP server (FastAPI): every request is one or more rows of the running batch.

Endpoints: GET /v1/models, POST /v1/chat/completions, POST /v1/completions, GET /health and
GET /metrics.  The handlers only translate HTTP to engine work (`request_plan`) and engine
events back to OpenAI bodies or server-sent event chunks (`replies.py`); errors are OpenAI error bodies with a
4xx status, and 429 with Retry-After once `max_rows + max_queue` requests are in flight.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stdsl.errors import StdslError
from stdsl.runtime.batch.handle import RowHandle
from stdsl.runtime.engine import Engine
from stdsl.server.constraints.compile_pool import MAX_COMPILE_BYTES
from stdsl.server.constraints.constraint_cache import ConstraintCache
from stdsl.server.http.limits import Limits, check_request, check_tokens, client_key
from stdsl.server.http.replies import reply_body, reply_reader, stream_chunks
from stdsl.server.http.request_body import read_request, validation_error
from stdsl.server.http.server_state import ServerState
from stdsl.server.http.steps_programs import serve_steps_program
from stdsl.server.openai_api.errors import RequestError, from_stdsl_error, overloaded
from stdsl.server.openai_api.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    ModelCard,
    ModelList,
)
from stdsl.server.requests.request_plan import Plan, chat_plan, completion_plan, program_spec
from stdsl.server.requests.rows import ChoiceResult, read_choice
from stdsl.server.tools.custom_tools import error_field

OPEN_PATHS = ("/health",)
access_log = logging.getLogger("stdsl.server.access")
"""One INFO line per request: client, method, path, status and seconds (`stcon serve` shows them unless --quiet)."""
HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}
"""The error code of a routing refusal by its status (any other status reads `invalid_request`)."""
RENDER_SECONDS = 2.0
"""The most a program's messages may take to parse and render in a compile worker (a template that loops for longer
is a 400 naming `program`, and the worker is replaced)."""


def _error_response(error: RequestError) -> JSONResponse:
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


class GuardMiddleware:
    """ASGI middleware: the bearer token check (when an API key is set) and request counts by path and status."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        began = time.perf_counter()
        key = self.state.api_key
        if key is not None and path not in OPEN_PATHS:
            given = dict(scope.get("headers", ())).get(b"authorization", b"")
            if not hmac.compare_digest(given, f"Bearer {key}".encode()):
                error = RequestError("a valid API key is required: Authorization: Bearer <key>", status=401,
                                     kind="authentication_error", code="invalid_api_key")
                self.state.metrics.request(path, 401)
                await _error_response(error)(scope, receive, send)
                _log_access(scope, 401, began)
                return
        status = [500]

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
                self.state.metrics.request(path, status[0])
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            _log_access(scope, status[0], began)


def _log_access(scope: Scope, status: int, began: float) -> None:
    """The access log line of a request answered (or left) `began` seconds ago by `time.perf_counter`."""
    if access_log.isEnabledFor(logging.INFO):
        client = scope.get("client") or ("-", 0)
        access_log.info("%s:%s %s %s %d %.3f s", client[0], client[1], scope.get("method", "-"),
                        scope.get("path", ""), status, time.perf_counter() - began)


def create_app(model: Any, *, engine: Any = None, max_rows: int = 8, api_key: str | None = None,
               max_queue: int = 64, cache_bytes: int = 64 << 20, compile_seconds: float = 30.0,
               model_name: str | None = None, limits: Limits | None = None, aliases: tuple[str, ...] = (),
               tool_format: str | None = None, max_compile_bytes: int = MAX_COMPILE_BYTES,
               program_dir: str | None = None, steps_programs: Mapping[str, Any] | None = None) -> FastAPI:
    """The FastAPI app serving `model` (through `engine`, or a new `Engine(model, max_rows=...)` it closes at
    shutdown); requests name it `model_name` (default: the model's) or one of `aliases`.  `tool_format` names the
    tool-call format (None: recognised from the chat template); `max_compile_bytes` caps each compile's memory;
    `program_dir` is the one directory clients' programs may read files from (None: they read none);
    `steps_programs` are the Python steps programs requests may run by name."""
    cache = ConstraintCache(cache_bytes, compile_seconds, max_compile_bytes=max_compile_bytes)
    state = ServerState(model=model, engine=engine or Engine(model, max_rows=max_rows),
                        cache=cache, model_name=model_name or model.name,
                        api_key=api_key, max_queue=max_queue, limits=limits or Limits(), aliases=tuple(aliases),
                        tool_format=tool_format,
                        program_dir=None if program_dir is None else str(Path(program_dir).resolve()),
                        steps_programs=dict(steps_programs or {}))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        state.cache.close()
        if engine is None:
            state.engine.close()

    app = FastAPI(title="stdsl", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.server = state
    app.add_middleware(GuardMiddleware, state=state)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return _error_response(validation_error(error.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        code = HTTP_CODES.get(error.status_code, "invalid_request")
        return _error_response(RequestError(str(error.detail), status=error.status_code, kind=kind, code=code))

    @app.exception_handler(StdslError)
    async def _library(request: Request, error: StdslError) -> JSONResponse:
        return _error_response(from_stdsl_error(error))

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> ModelList:
        return ModelList(data=[ModelCard(id=state.model_name)])

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        text = state.metrics.render(state.engine.metrics(), state.cache.stats, state.cache.max_bytes)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> Response:
        body = await _typed(state, request, ChatCompletionRequest)
        if body.program is not None and body.program.name is not None:
            return await serve_steps_program(state, body, request)
        rendered = None
        program = program_spec(body, state.program_dir, state.limits.max_prompt_bytes)
        if program is not None:
            rendering = asyncio.ensure_future(state.cache.render(
                program, min(state.cache.compile_seconds, RENDER_SECONDS), client_key(request, state.api_key)))
            if not await _unless_gone(request, rendering):  # the client left: its render is cancelled
                return Response(status_code=499)
            try:
                rendered = rendering.result()
            except StdslError as error:  # the request's program, rendered in a compile worker
                raise from_stdsl_error(error, "program") from None
        plan = await asyncio.to_thread(chat_plan, body, state.model, state.memory, state.tool_format,
                                       state.program_dir, rendered)
        return await _serve(state, plan, body.stream, _include_usage(body), chat=True, request=request)

    @app.post("/v1/completions", response_model=None)
    async def completions(request: Request) -> Response:
        body = await _typed(state, request, CompletionRequest)
        plan = await asyncio.to_thread(completion_plan, body, state.model)
        return await _serve(state, plan, body.stream, _include_usage(body), chat=False, request=request)

    return app


async def _typed(state: ServerState, request: Request, model: Any) -> Any:
    """The request's typed body, checked against the model name and the per-request limits read off it."""
    body = await read_request(request, model, state.limits.max_body_bytes)
    state.check_model(body.model)
    check_request(body, state.limits)
    return body


def _include_usage(body: Any) -> bool:
    return bool(body.stream_options and body.stream_options.include_usage)


def _param_of(spec: dict[str, Any] | None, message: str = "") -> str:
    kind = (spec or {}).get("kind")
    if kind == "grammar":
        return str((spec or {}).get("source", "guided_grammar"))
    if kind == "tools" and error_field(message):
        return str(error_field(message))
    return {"tools": "tools", "program": "program"}.get(str(kind), "response_format")


_GONE = object()
"""What `_compiled_unless_gone` returns when the client left before its constraint compiled."""


async def _compiled_unless_gone(state: ServerState, plan: Plan, request: Request, client: str) -> Any:
    """The plan's constraint compiled in `client`'s turn (cached, off the loop), or `_GONE` when the client left
    first: its compile is then cancelled unless another request waits for it."""
    if plan.spec is None:
        return None
    compiling = asyncio.ensure_future(state.cache.get(plan.spec, client))
    if not await _unless_gone(request, compiling):
        return _GONE
    try:
        return compiling.result()
    except StdslError as error:
        raise from_stdsl_error(error, _param_of(plan.spec, str(error))) from None


async def _submit(state: ServerState, plan: Plan, request: Request,
                  client: str) -> tuple[list[tuple[int, RowHandle]], Any] | None:
    """Compile the plan's constraint and submit every choice; (prompt index, handle) pairs and the compiled
    constraint, or None when the client left during the compile."""
    compiled = await _compiled_unless_gone(state, plan, request, client)
    if compiled is _GONE:
        return None
    handles: list[tuple[int, RowHandle]] = []
    try:
        for index, prompt in enumerate(plan.prompts):
            for k in range(plan.n):
                options = dict(plan.options)
                if options.get("seed") is not None:
                    options["seed"] = options["seed"] + k
                handle = await asyncio.to_thread(state.engine.submit, prompt, compiled, **options)
                handles.append((index, handle))
    except StdslError as error:
        for _, handle in handles:
            handle.cancel()
        raise from_stdsl_error(error, _param_of(plan.spec)) from None
    return handles, compiled


async def _serve(state: ServerState, plan: Plan, stream: bool, include_usage: bool, chat: bool,
                 request: Request) -> Response:
    """Admit the request (or 400 / 429 past a limit), run its rows, and answer with one body or a stream of chunks."""
    rows = len(plan.prompts) * plan.n
    tokens = check_tokens(rows, int(plan.options["max_tokens"]), state.limits)
    if state.in_flight >= state.capacity:
        raise overloaded(state.in_flight)
    client = client_key(request, state.api_key)
    state.clients.admit(client, rows, tokens)
    state.in_flight += 1
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            state.in_flight -= 1
            state.clients.release(client, rows, tokens)

    streaming = False
    try:
        submitted = await _submit(state, plan, request, client)
        if submitted is None:
            return Response(status_code=499)
        handles, compiled = submitted
        if stream:
            chunks = stream_chunks(state, plan, handles, include_usage, chat, release, compiled)
            streaming = True
            return StreamingResponse(chunks, media_type="text/event-stream")
        results = await _results_unless_gone(request, plan, handles)
        if results is None:
            return Response(status_code=499)
    finally:
        if not streaming:
            release()
    return JSONResponse(reply_body(state, plan, results, chat).model_dump(exclude_none=False))


async def _client_gone(request: Request) -> None:
    """Return once the client has disconnected (the body is read, so the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        continue


async def _results_unless_gone(request: Request, plan: Plan,
                               handles: list[tuple[int, RowHandle]]) -> list[ChoiceResult] | None:
    """Every choice's result, or None when the client left first: its rows are cancelled at the next step."""
    reading = asyncio.ensure_future(asyncio.gather(*(read_choice(h, reply_reader(plan)) for _, h in handles)))
    def cancel_rows() -> None:
        for _, handle in handles:
            handle.cancel()

    if not await _unless_gone(request, reading, cancel_rows):
        return None
    return list(reading.result())


async def _unless_gone(request: Request, work: asyncio.Future[Any], on_gone: Callable[[], None] = lambda: None
                       ) -> bool:
    """Whether `work` finished before the client left; if it left first, `work` is cancelled (its outcome retrieved,
    never logged as lost) and `on_gone` runs."""
    gone = asyncio.ensure_future(_client_gone(request))
    done: set[Any] = set()
    try:
        done, _ = await asyncio.wait((work, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not work.done():
            work.cancel()
            work.add_done_callback(_retrieved)
            on_gone()
    return work in done


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a cancelled read's outcome as seen (asyncio logs an outcome nobody read)."""
    if not future.cancelled():
        future.exception()
