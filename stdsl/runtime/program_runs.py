"""Running a compiled program on a model: one input (`Program.run`), many together (`Program.map`),
a dataset (`stcon run --input data.jsonl --output results.jsonl`).

Every input of `map` or a dataset becomes a row of the batch engine. A dataset run writes one JSON
line per input as soon as it is done (`{"line": n, "result": {...}}` or `{"line": n, "error": "..."}`),
and a rerun skips the lines already in the output, so an interrupted run loses nothing and repeats nothing.
"""

from __future__ import annotations

import os
import queue
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from stdsl.compiler.stc.program import CompiledProgram
from stdsl.errors import OptionError, StdslError
from stdsl.generation import Generation
from stdsl.runtime.batch.handle import RowHandle
from stdsl.runtime.dataset_files import check_output, finished_lines, input_lines, read_arguments, record_text
from stdsl.runtime.decode import engine_for, generate, generate_batch, submit
from stdsl.runtime.program_result import ProgramResult


def _request(program: CompiledProgram, arguments: Any, caller: str = "library") -> dict[str, Any]:
    """One engine request for a program's arguments (ProgramError for missing or bad arguments, saying how
    `caller` passes them)."""
    if not isinstance(arguments, Mapping):
        raise OptionError("inputs", f"each input must be a dict of program arguments, got {type(arguments).__name__}")
    args = program.arguments(dict(arguments), caller)
    constraint = program.constraint(args)
    messages = program.messages(args)
    return {"prompt": messages or "", "constraint": constraint, "chat": bool(messages)}


def _typed(request: Mapping[str, Any], generation: Generation) -> ProgramResult:
    """The typed result of one finished request."""
    return ProgramResult(request["constraint"].parse(generation.text), generation.text, generation.stats)


def run_program(program: CompiledProgram, model: Any, arguments: Mapping[str, Any] | None = None,
                **options: Any) -> ProgramResult:
    """Decode `program`'s output for `arguments` with `model` and read its typed fields back."""
    request = _request(program, arguments or {})
    generation = generate(model, request["prompt"], request["constraint"], chat=request["chat"], **options)
    return _typed(request, generation)


def map_program(program: CompiledProgram, inputs: Iterable[Any], model: Any,
                **options: Any) -> list[ProgramResult | StdslError]:
    """One `ProgramResult` per input, in order, decoded together; an input that fails gets its StdslError instead."""
    requests: list[dict[str, Any] | StdslError] = []
    for arguments in inputs:
        try:
            requests.append(_request(program, arguments))
        except StdslError as error:
            requests.append(error)
    ready = [r for r in requests if not isinstance(r, StdslError)]
    outcomes = iter(generate_batch(model, [{**r, **options} for r in ready]))
    results: list[ProgramResult | StdslError] = []
    for request in requests:
        if isinstance(request, StdslError):
            results.append(request)
            continue
        outcome = next(outcomes)
        if isinstance(outcome, StdslError):
            results.append(outcome)
            continue
        try:
            results.append(_typed(request, outcome))
        except StdslError as error:
            results.append(error)
    return results


class Progress:
    """A one-line progress report on stderr: done / total, errors, rate."""

    def __init__(self, total: int, stream: IO[str] = sys.stderr) -> None:
        self.total, self.done, self.errors = total, 0, 0
        self.stream = stream
        self.began = time.perf_counter()

    def update(self, error: bool) -> None:
        self.done += 1
        self.errors += int(error)
        rate = self.done / max(time.perf_counter() - self.began, 1e-9)
        self.stream.write(f"\r{self.done}/{self.total} done, {self.errors} errors, {rate:.2f} lines/s")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def run_dataset(program: CompiledProgram, model: Any, input_path: str | os.PathLike[str],
                output_path: str | os.PathLike[str], *, progress: Callable[[bool], None] | None = None,
                **options: Any) -> tuple[int, int]:
    """Run `program` on every JSON line of `input_path`, appending records to `output_path` as they finish.

    Returns (lines written now, lines skipped because the output already had them). A line that cannot be
    read as a JSON object of arguments, or whose arguments the program refuses, gets an error record and
    the run goes on. An output that is the input, a directory or cannot be written is refused (OptionError)
    before any work.
    """
    source, output = Path(input_path), Path(output_path)
    check_output(source, output)
    lines = input_lines(source)
    done = finished_lines(output)
    todo = iter([(n, raw) for n, raw in lines if n not in done])
    engine = engine_for(model)
    flight: dict[RowHandle, tuple[int, dict[str, Any]]] = {}
    finished: queue.SimpleQueue[RowHandle] = queue.SimpleQueue()
    written = 0
    with open(output, "a", encoding="utf-8") as sink:

        def record(line: int, payload: dict[str, Any]) -> None:
            nonlocal written
            sink.write(record_text(line, payload))
            sink.flush()
            written += 1
            if progress is not None:
                progress("error" in payload)

        def refill() -> None:
            """Submit lines until the window is full or the input is exhausted; each row says when it ends."""
            while len(flight) < 2 * engine.max_rows:
                item = next(todo, None)
                if item is None:
                    return
                line, raw = item
                try:
                    request = _request(program, read_arguments(raw, line), "dataset")
                    handle = submit(engine, request["prompt"], request["constraint"], chat=request["chat"], **options)
                except Exception as error:  # any line's failure is its own record; the run goes on
                    record(line, {"error": _line_error(source, line, error)})
                    continue
                flight[handle] = (line, request)
                handle.add_done_callback(finished.put)

        try:
            refill()
            while flight:
                handle = finished.get()
                line, request = flight.pop(handle)
                payload: dict[str, Any]
                try:
                    payload = {"result": _typed(request, handle.result()).to_dict()}
                except Exception as error:  # as above: one record, not the end of the run
                    payload = {"error": _line_error(source, line, error)}
                record(line, payload)
                refill()
        except BaseException:
            for handle in flight:
                handle.cancel()
            raise
    return written, len(done)


def _line_error(source: Path, line: int, error: Exception) -> str:
    """The error record's text for one input line (a foreign exception is named by its type: a bug to report)."""
    if isinstance(error, StdslError):
        return f"{source}:{line}: {error}"
    return f"{source}:{line}: internal error: {type(error).__name__}: {error}"
