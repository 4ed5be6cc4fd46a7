"""A program of steps on a dataset (`stcon run FILE.py:NAME --input data.jsonl --output results.jsonl`, or a `.stc`
program of steps), and the plain records its runs are written as (a result line, the `--stats` trace of its steps).

As a one-step dataset run (`stdsl/runtime/program_runs.py`): one JSON line per input as soon as its run ends
(`{"line": n, "result": {"values": ..., "returned": ...}}` or `{"line": n, "error": "..."}`; with `trace`, the
line also holds `"steps"`: one record per step, as `step_trace` writes it), a rerun skips the lines already in the
output, and a line's failure is its own record. Up to twice the engine's rows of runs go at once, so their steps
decode in one batch.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from stdsl.errors import StdslError
from stdsl.runtime.dataset_files import check_output, finished_lines, input_lines, read_arguments, record_text
from stdsl.runtime.decode import engine_for
from stdsl.runtime.program_steps.record import ProgramRun, branch_name

TRACE_COLUMNS = ("passes", "sampled_tokens", "forced_tokens", "output_tokens", "prompt_tokens", "cached_tokens")


def plain(value: Any) -> Any:
    """A value as JSON data: a Pydantic instance dumped, an Enum member by its value, lists and dicts through."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    return value.value if isinstance(value, enum.Enum) else value


def run_record(run: ProgramRun) -> dict[str, Any]:
    """A run as plain data: the main line's values by name and what the function returned."""
    return {"values": {name: plain(value) for name, value in run.items()}, "returned": plain(run.returned)}


def step_trace(run: ProgramRun) -> list[dict[str, Any]]:
    """The steps of a run in program order as plain records: name, kind, fork position, counts, tokens prefilled,
    seconds and error (what a dataset run's `--stats` writes on each line)."""
    out = []
    for step in run.steps:
        counts = step.stats.as_dict() if step.stats is not None else {}
        out.append({"step": step.name, "kind": step.kind, "branch": list(step.branch),
                    **{column: counts.get(column) for column in TRACE_COLUMNS},
                    "prefilled_tokens": step.prefilled_tokens if step.stats is not None else None,
                    "seconds": round(step.seconds, 4), "error": str(step.error) if step.error is not None else None})
    return out


def trace_text(run: ProgramRun) -> str:
    """The steps of a run in program order, one line each (name, kind, fork position, counts, seconds), then the
    totals: what `stcon run --stats` prints."""
    rows = [["step", "kind", "branch", *TRACE_COLUMNS, "prefilled", "seconds", "error"]]
    for step in run.steps:
        counts = step.stats.as_dict() if step.stats is not None else {}
        rows.append([step.name, step.kind, branch_name(step.branch) if step.branch else "main",
                     *(str(counts.get(column, "-")) for column in TRACE_COLUMNS),
                     str(step.prefilled_tokens) if step.stats is not None else "-", f"{step.seconds:.3f}",
                     type(step.error.__cause__ or step.error).__name__ if step.error is not None else ""])
    total = run.stats.as_dict()
    rows.append(["total", "", "", *(str(total[column]) for column in TRACE_COLUMNS), str(run.prefilled_tokens),
                 f"{total['seconds']:.3f}", str(len(run.errors) or "")])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)


def run_steps_dataset(run: Callable[[dict[str, Any]], ProgramRun], model: Any, input_path: str | os.PathLike[str],
                      output_path: str | os.PathLike[str], *, progress: Callable[[bool], None] | None = None,
                      trace: bool = False) -> tuple[int, int]:
    """Run the program (`run` of one line's arguments, on `model`) on every JSON line of `input_path`, appending a
    record to `output_path` as each run ends (with `trace`, each step's record too); (lines written now, lines
    skipped because the output had them already)."""
    source, output = Path(input_path), Path(output_path)
    check_output(source, output)
    done = finished_lines(output)
    todo = iter([(n, raw) for n, raw in input_lines(source) if n not in done])
    window = 2 * engine_for(model).max_rows
    written = 0

    def one(line: int, raw: bytes) -> dict[str, Any]:
        try:
            result = run(read_arguments(raw, line))
            return {"result": run_record(result), **({"steps": step_trace(result)} if trace else {})}
        except Exception as error:  # any line's failure is its own record; the run goes on
            text = str(error) if isinstance(error, StdslError) else f"internal error: {type(error).__name__}: {error}"
            return {"error": f"{source}:{line}: {text}"}

    with open(output, "a", encoding="utf-8") as sink, \
            ThreadPoolExecutor(max_workers=window, thread_name_prefix="stdsl-dataset") as pool:
        flight: dict[Future[dict[str, Any]], int] = {}
        try:
            while True:
                while len(flight) < window and (item := next(todo, None)) is not None:
                    flight[pool.submit(one, *item)] = item[0]
                if not flight:
                    break
                finished, _ = wait(flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    payload = future.result()
                    sink.write(record_text(flight.pop(future), payload))
                    sink.flush()
                    written += 1
                    if progress is not None:
                        progress("error" in payload)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return written, len(done)

