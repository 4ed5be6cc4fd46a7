"""Engine results back to OpenAI replies: one body per request, or server-sent event chunks as rows decode, with
the usage and the tool calls a reply carries (remembered for re-rendering)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from stdsl.compiler.tools.formats import ParsedCall
from stdsl.errors import StdslError
from stdsl.runtime.batch.handle import RowHandle
from stdsl.server.http.events import sse_event
from stdsl.server.http.server_state import ServerState
from stdsl.server.openai_api.errors import from_stdsl_error
from stdsl.server.openai_api.protocol import (
    ChatChoice,
    ChatCompletion,
    ChatCompletionChunk,
    Completion,
    CompletionChoice,
    CustomCall,
    CustomToolCall,
    CustomToolCallDelta,
    Delta,
    FunctionCall,
    ReplyMessage,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from stdsl.server.requests.reply_values import reply_values
from stdsl.server.requests.request_plan import Plan
from stdsl.server.requests.rows import ChoiceResult, read_choice
from stdsl.server.tools.reply_reader import ReplyReader, ReplyUpdate


def reply_reader(plan: Plan) -> ReplyReader:
    """The reader of one choice's reply under the plan's tool format and stops."""
    return ReplyReader(plan.tool_format, plan.parameters, plan.reader_stops)


def _finish_reason(result: ChoiceResult) -> str:
    if result.reader.end is not None:
        return result.reader.end
    reason = result.generation.finish_reason if result.generation is not None else "stop"
    if reason == "length":
        return "length"
    return "tool_calls" if result.calls else "stop"


def _completion_tokens(state: ServerState, result: ChoiceResult) -> int:
    if result.generation is not None and result.reader.end is None:
        return int(result.generation.stats.emitted_tokens)
    return len(state.model.tokenizer.encode(result.reasoning)) + len(state.model.tokenizer.encode(result.reader.text))


def _returned_call(state: ServerState, plan: Plan, call: ParsedCall, taken: set[str]) -> ToolCall | CustomToolCall:
    """A call as the API returns it (a custom tool's raw input read back), remembered for verbatim re-rendering;
    under the id the model wrote for it (Mistral's), as mlx-lm's server returns it, unless the reply's calls before
    it (`taken`, which it joins) had that id."""
    if call.name in plan.custom_tools and plan.tool_format is not None:
        raw = plan.tool_format.custom_input(call.arguments)
        custom = CustomToolCall(custom=CustomCall(name=call.name, input=raw))
        state.memory.remember(custom.id, call.name, plan.tool_format.custom_arguments(raw), call.text)
        return custom
    function = FunctionCall(name=call.name, arguments=call.arguments)
    if call.id is None or call.id in taken:
        tool_call = ToolCall(function=function)
    else:
        tool_call = ToolCall(id=call.id, function=function)
    taken.add(tool_call.id)
    state.memory.remember(tool_call.id, call.name, call.arguments, call.text)
    return tool_call


def _tool_calls(state: ServerState, plan: Plan, result: ChoiceResult) -> list[ToolCall | CustomToolCall] | None:
    taken: set[str] = set()
    return [_returned_call(state, plan, call, taken) for call in result.calls] or None


def _program_content(result: ChoiceResult) -> str:
    """A program's typed result as JSON (Pydantic values dumped)."""
    parsed = result.generation.value if result.generation is not None else {}
    return json.dumps({k: v.model_dump(mode="json") if hasattr(v, "model_dump") else v for k, v in parsed.items()},
                      ensure_ascii=False, default=str)



def _usage(state: ServerState, plan: Plan, results: list[ChoiceResult]) -> Usage:
    prompt = sum(len(p) for p in plan.prompts)
    completion = sum(_completion_tokens(state, r) for r in results)
    forced = sum(r.generation.stats.forced_tokens for r in results if r.generation is not None)
    state.metrics.completed(completion, forced)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def reply_body(state: ServerState, plan: Plan, results: list[ChoiceResult],
               chat: bool) -> ChatCompletion | Completion:
    """The one body of a whole reply (a chat or text completion) with its usage, counted in the metrics."""
    usage = _usage(state, plan, results)
    guarded = sum(1 for r in results if r.reader.end == "repetition")
    state.metrics.guard_cancels += guarded
    if not chat:
        choices = [CompletionChoice(index=i, text=r.reader.content, finish_reason=_finish_reason(r))
                   for i, r in enumerate(results)]
        return Completion(id=f"cmpl-{uuid.uuid4().hex}", model=state.model_name, choices=choices, usage=usage)
    chat_choices = []
    for i, result in enumerate(results):
        content: str | None = _program_content(result) if plan.program else result.reader.content
        calls = _tool_calls(state, plan, result)
        if calls and not content:
            content = None
        message = ReplyMessage(content=content, reasoning_content=result.reasoning or None, tool_calls=calls)
        chat_choices.append(ChatChoice(index=i, message=message, finish_reason=_finish_reason(result)))
    return ChatCompletion(id=f"chatcmpl-{uuid.uuid4().hex}", model=state.model_name, choices=chat_choices,
                          usage=usage)


def stream_chunks(state: ServerState, plan: Plan, handles: list[tuple[int, RowHandle]], include_usage: bool,
                   chat: bool, release: Callable[[], None], compiled: Any = None) -> AsyncIterator[str]:
    """Server-sent events in OpenAI's chunk format, every choice interleaved, then usage and [DONE]; a chat reply
    under a constraint carries its typed values as they complete in `delta.stdsl` (`reply_values`).

    The rows are read by a task started here, which frees the request's slot when they end even if the
    body is never read (a client gone before the first chunk); reading the body and leaving early cancels them.
    """
    ident = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
    created = int(time.time())
    outbox: asyncio.Queue[str | None] = asyncio.Queue()

    def chunk(index: int, delta: Delta | None = None, text: str = "", finish: str | None = None) -> str:
        if chat:
            choice = {"index": index, "delta": (delta or Delta()).model_dump(exclude_none=True),
                      "finish_reason": finish, "logprobs": None}
            body = ChatCompletionChunk(id=ident, created=created, model=state.model_name, choices=[])
            return sse_event(body.model_dump(exclude_none=True) | {"choices": [choice]})
        text_chunk = Completion(id=ident, created=created, model=state.model_name,
                                choices=[CompletionChoice(index=index, text=text, finish_reason=finish)])
        return sse_event(text_chunk.model_dump())

    async def run(index: int, handle: RowHandle) -> ChoiceResult:
        calls_sent = 0
        ids_sent: set[str] = set()
        values = reply_values(plan, compiled) if chat else None

        async def send(update: ReplyUpdate) -> None:
            nonlocal calls_sent
            typed = values.feed(update.content) if values is not None else []
            if update.content and not plan.program:
                await outbox.put(chunk(index, Delta(content=update.content, stdsl=typed or None), update.content))
            elif typed:
                await outbox.put(chunk(index, Delta(stdsl=typed)))
            for call in update.calls:
                returned = _returned_call(state, plan, call, ids_sent)
                delta: ToolCallDelta | CustomToolCallDelta = (
                    CustomToolCallDelta(index=calls_sent, id=returned.id, custom=returned.custom)
                    if isinstance(returned, CustomToolCall)
                    else ToolCallDelta(index=calls_sent, id=returned.id, function=returned.function))
                await outbox.put(chunk(index, Delta(tool_calls=[delta])))
                calls_sent += 1

        async def think(piece: str) -> None:
            await outbox.put(chunk(index, Delta(reasoning_content=piece)))

        if chat:
            await outbox.put(chunk(index, Delta(role="assistant", content="")))
        result = await read_choice(handle, reply_reader(plan), send, think)
        ending = values.finish(result.generation, result.reader.end is not None) if values is not None else []
        if ending:
            await outbox.put(chunk(index, Delta(stdsl=ending)))
        if plan.program:
            await outbox.put(chunk(index, Delta(content=_program_content(result))))
        await outbox.put(chunk(index, finish=_finish_reason(result)))
        return result

    async def run_all() -> list[ChoiceResult]:
        try:
            return list(await asyncio.gather(*(run(i, h) for i, (_, h) in enumerate(handles))))
        finally:
            await outbox.put(None)
            release()

    task = asyncio.ensure_future(run_all())

    async def body() -> AsyncIterator[str]:
        try:
            while True:
                item = await outbox.get()
                if item is None:
                    break
                yield item
            try:
                results = await task
            except StdslError as error:
                yield sse_event(from_stdsl_error(error).body())
                return
            usage = _usage(state, plan, results)
            state.metrics.guard_cancels += sum(1 for r in results if r.reader.end == "repetition")
            if include_usage:
                usage_chunk: Any = (ChatCompletionChunk(id=ident, created=created, model=state.model_name,
                                                        choices=[], usage=usage) if chat else
                                    Completion(id=ident, created=created, model=state.model_name, choices=[],
                                               usage=usage))
                yield sse_event(usage_chunk.model_dump())
            yield "data: [DONE]\n\n"
        finally:
            if not task.done():
                task.cancel()
                for _, handle in handles:
                    handle.cancel()
            release()

    return body()
