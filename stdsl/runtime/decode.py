"""Single requests as clients of the batch engine: `generate`, `stream` and `generate_batch` for one model.

Each model gets one shared engine (`engine_for`), so calls from several threads decode in the
same batch; the engine hangs on the model object itself, so a model that is dropped frees its
engine and KV state with it. Every engine is stepped by the process's one runner thread.
`reference=True` feeds one token per pass (the oracle the forced-span decoder is tested
against, Theorem 19).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from stdsl.errors import OptionError, StdslError
from stdsl.generation import Generation
from stdsl.model_files.prompt import check_prompt
from stdsl.runtime.batch.requests import Prompt, check_stop, compiled_constraint, prepare_request, prompt_tokens
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.batch.thinking import template_variables, thinking_for
from stdsl.runtime.engine import Engine
from stdsl.runtime.options import DecodeOptions
from stdsl.runtime.stream_values.json_reader import StreamValue
from stdsl.runtime.stream_values.readers import TextValue, ValueReader, reader_for

__all__ = ["Stream", "engine_for", "generate", "generate_batch", "prompt_tokens", "stream", "submit"]

_ENGINE_ATTRIBUTE = "_stdsl_engine"
_ENGINE_LOCK = threading.Lock()
DEFAULT_MAX_ROWS = 8


def engine_for(model: Any) -> Engine:
    """The model's shared engine (created on first use with `DEFAULT_MAX_ROWS` rows), kept on the model object so
    that it lives exactly as long as the model; a model object that takes no attributes is refused."""
    with _ENGINE_LOCK:
        engine = getattr(model, _ENGINE_ATTRIBUTE, None)
        if not isinstance(engine, Engine):
            engine = Engine(model, max_rows=DEFAULT_MAX_ROWS)
            try:
                setattr(model, _ENGINE_ATTRIBUTE, engine)
            except AttributeError as error:
                raise OptionError("model", f"a {type(model).__name__} cannot hold its engine (it takes no "
                                           "attributes); pass a model from stdsl.load()") from error
        return engine


def submit(engine: Engine, prompt: Prompt, constraint: Any, **options: Any) -> RowHandle:
    """Queue one request on `engine` (certified parallel fields when asked for, unless a thinking block comes
    first) and return its handle."""
    settings = DecodeOptions.of(**options)
    check_prompt(prompt)
    check_stop(constraint, settings)
    if settings.parallel_fields and not _thinks(engine.model, prompt, settings):
        from stdsl.runtime.certified.drafts import submit_certified

        return submit_certified(engine, prompt, constraint, settings)
    return engine.submit_request(prepare_request(engine.model, prompt, constraint, settings))


def _thinks(model: Any, prompt: Prompt, settings: DecodeOptions) -> bool:
    """Whether the output of `prompt` starts with a thinking block (certified drafts then do not apply)."""
    ids = prompt_tokens(model, prompt, settings.chat, template_variables(settings))
    return thinking_for(model, ids, settings) is not None


def generate(model: Any, prompt: Prompt, constraint: Any, **options: Any) -> Generation:
    """Decode one output under `constraint` and return it (options: see `DecodeOptions`).

    A caller interrupted while it waits (KeyboardInterrupt) cancels the row, so the engine frees it."""
    handle = submit(engine_for(model), prompt, constraint, **options)
    try:
        return handle.result()
    except BaseException:
        handle.cancel()
        raise


class Stream:
    """Text pieces of one output as they are decided; after the last piece, `generation` holds the result.

    `events()` yields the same pieces with the typed values they complete (`StreamValue`s) between them. A reasoning
    model's thinking text is not among the pieces: it gathers in `reasoning` as it is decided.
    """

    def __init__(self, handle: RowHandle, values: Callable[[], ValueReader] | None = None) -> None:
        self.handle = handle
        self.generation: Generation | None = None
        self.reasoning = ""
        self._values = values or (lambda: TextValue(lambda text: text))

    def __iter__(self) -> Iterator[str]:
        """The pieces from the first: every loop replays the handle's events, so `reasoning` is gathered anew."""
        for item in self.events():
            if isinstance(item, str):
                yield item

    def events(self) -> Iterator[str | StreamValue]:
        """Every text piece (a str) and, after the piece that completes it, every typed value (a `StreamValue`: its
        path, its value read exactly as the final result reads it, whether it is complete or a string's text so
        far); the values of the whole output (a top-level number, a Pydantic instance) once the constraint accepted it.
        A stream cut short (cancelled, out of tokens) yields no value the finished output would not have."""
        self.reasoning = ""
        reader = self._values()
        for event in self.handle:
            self.reasoning += event.reasoning
            if event.text:
                yield event.text
                yield from reader.feed(event.text)
            if event.result is not None:
                self.generation = event.result
                if event.result.accepted:
                    yield from reader.finish()

    def values(self) -> Iterator[StreamValue]:
        """The typed values of `events()` alone."""
        for item in self.events():
            if isinstance(item, StreamValue):
                yield item

    def result(self) -> Generation:
        """The finished `Generation` (drains the stream if it is not finished)."""
        for _ in self:
            pass
        return self.handle.result()

    def cancel(self) -> None:
        """Stop decoding this output (its row is freed at the next engine step)."""
        self.handle.cancel()


def stream(model: Any, prompt: Prompt, constraint: Any, **options: Any) -> Stream:
    """Yield the output text piece by piece as it is decided (forced text included); options as `generate`.
    `stream(...).events()` also yields the typed values as they complete (README.md, docs/serving.md)."""
    handle = submit(engine_for(model), prompt, constraint, **options)
    compiled = None if constraint is None else compiled_constraint(constraint, model.tokenizer,
                                                                   DecodeOptions.of(**options).strict)
    return Stream(handle, lambda: reader_for(compiled))


def generate_batch(model: Any, requests: Sequence[Mapping[str, Any]], *, max_rows: int | None = None,
                   **defaults: Any) -> list[Generation | StdslError]:
    """Decode many requests together; one `Generation` per request, in order, or the StdslError that request met.

    Each request is a dict `{"prompt": ..., "constraint": ..., **options}`; `defaults` apply to every
    request (a request's own options win). `max_rows` rows decode at once (default: the shared engine's); with
    `max_rows` the requests get an engine of their own, stepped by the same runner thread (none is started).
    """
    if isinstance(requests, (str, bytes, Mapping)) or not isinstance(requests, Sequence):
        raise OptionError("requests", f"requests must be a list of dicts, got {type(requests).__name__}")
    engine = engine_for(model) if max_rows is None else Engine(model, max_rows=max_rows)
    try:
        return _decode_all(engine, requests, defaults)
    finally:
        if max_rows is not None:
            engine.close()


def _decode_all(engine: Engine, requests: Sequence[Mapping[str, Any]], defaults: Mapping[str, Any]
                ) -> list[Generation | StdslError]:
    """`generate_batch` on `engine`; a caller interrupted while it waits cancels every row it submitted."""
    outcomes: list[Generation | StdslError | RowHandle] = []
    for index, request in enumerate(requests):
        try:
            if not isinstance(request, Mapping):
                raise OptionError("requests", f"requests[{index}] must be a dict, got {type(request).__name__}")
            if "prompt" not in request:
                raise OptionError("prompt", f"requests[{index}] has no 'prompt'")
            merged = {**defaults, **request}
            options = {k: v for k, v in merged.items() if k not in ("prompt", "constraint")}
            outcomes.append(submit(engine, merged["prompt"], merged.get("constraint"), **options))
        except StdslError as error:
            outcomes.append(error)
    results: list[Generation | StdslError] = []
    try:
        for outcome in outcomes:
            if isinstance(outcome, RowHandle):
                try:
                    results.append(outcome.result())
                except StdslError as error:
                    results.append(error)
            else:
                results.append(outcome)
    except BaseException:
        for outcome in outcomes:
            if isinstance(outcome, RowHandle):
                outcome.cancel()
        raise
    return results
