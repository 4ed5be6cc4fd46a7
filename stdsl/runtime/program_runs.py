"""Running a compiled program on a model: one input (`Program.run`), many together (`Program.map`),
a dataset (`stcon run --input data.jsonl --output results.jsonl`).

Every input of `map` or a dataset becomes a row of the batch engine. A dataset run writes one JSON
line per input as soon as it is done (`{"line": n, "result": {...}}` or `{"line": n, "error": "..."}`),
and a rerun skips the lines already in the output, so an interrupted run loses nothing and repeats nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from stdsl.compiler.stc.program import CompiledProgram
from stdsl.errors import OptionError, StdslError
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.decode import engine_for, generate, generate_batch, submit
from stdsl.runtime.generation import Generation
from stdsl.runtime.program_result import ProgramResult

POLL_SECONDS = 0.01


def _request(program: CompiledProgram, arguments: Any) -> dict[str, Any]:
    """One engine request for a program's arguments (ProgramError for missing or bad arguments)."""
    if not isinstance(arguments, Mapping):
        raise OptionError("inputs", f"each input must be a dict of program arguments, got {type(arguments).__name__}")
    args = program.arguments(dict(arguments))
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


def finished_lines(output: Path) -> set[int]:
    """Line numbers already recorded in `output`; a torn last record (a killed run) is cut off the file."""
    if not output.exists():
        return set()
    data = output.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep < len(data):
        with open(output, "r+b") as handle:
            handle.truncate(keep)
    done: set[int] = set()
    for raw in data[:keep].splitlines():
        try:
            record = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("line"), int):
            done.add(record["line"])
    return done


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

    Returns (lines written now, lines skipped because the output already had them). A line that is
    not a JSON object, or whose arguments the program refuses, gets an error record.
    """
    source, output = Path(input_path), Path(output_path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise OptionError("input", f"{source}: cannot read the input ({error})") from error
    done = finished_lines(output)
    todo = iter([(n, text) for n, text in enumerate(lines, start=1) if text.strip() and n not in done])
    engine = engine_for(model)
    flight: list[tuple[int, dict[str, Any], RowHandle]] = []
    written = 0
    with open(output, "a", encoding="utf-8") as sink:

        def record(line: int, payload: dict[str, Any]) -> None:
            nonlocal written
            sink.write(json.dumps({"line": line, **payload}, ensure_ascii=False, default=str) + "\n")
            sink.flush()
            written += 1
            if progress is not None:
                progress("error" in payload)

        def refill() -> bool:
            """Submit lines until the window is full; False once the input is exhausted."""
            while len(flight) < 2 * engine.max_rows:
                item = next(todo, None)
                if item is None:
                    return False
                line, text = item
                try:
                    request = _request(program, json.loads(text))
                    handle = submit(engine, request["prompt"], request["constraint"], chat=request["chat"], **options)
                    flight.append((line, request, handle))
                except json.JSONDecodeError as error:
                    record(line, {"error": f"{source}:{line}: not a JSON object: {error}"})
                except StdslError as error:
                    record(line, {"error": f"{source}:{line}: {error}"})
            return True

        try:
            more = refill()
            while flight or more:
                finished = [entry for entry in flight if entry[2].done]
                if not finished:
                    time.sleep(POLL_SECONDS)
                for entry in finished:
                    flight.remove(entry)
                    line, request, handle = entry
                    try:
                        record(line, {"result": _typed(request, handle.result()).to_dict()})
                    except StdslError as error:
                        record(line, {"error": f"{source}:{line}: {error}"})
                more = refill() if more else False
        except BaseException:
            for _, _, handle in flight:
                handle.cancel()
            raise
    return written, len(done)
