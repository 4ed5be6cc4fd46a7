"""A dataset run learns that a row ended from the row's done callback, not by polling: each record is written as its
row ends, in the order the rows end, and an interrupted run cancels every row still in flight. No model: an engine
thread that ends the newest row first stands in for the batch engine."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from stdsl.errors import GenerationError
from stdsl.generation import Generation, Stats
from stdsl.programs import Program
from stdsl.runtime import program_runs
from stdsl.runtime.batch.handle import Event, RowHandle

PROGRAM = '''
param name: str
user """Describe {{ name }}."""
output """Kind: {kind: "cat" | "dog"}
"""
'''


class NewestFirstEngine:
    """Rows submitted by the run, ended by a thread of their own, newest first once the run's window is full (or
    all `total` lines are in); `ended` is the order they ended in (input line numbers); lines named "fail" end with
    an error."""

    def __init__(self, max_rows: int, total: int) -> None:
        self.total = total
        self.engine = SimpleNamespace(max_rows=max_rows)
        self.rows: list[tuple[int, RowHandle, bool]] = []
        self.ended: list[int] = []
        self.cancelled: list[int] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._end_rows, daemon=True)

    def submit(self, engine: Any, prompt: Any, constraint: Any, **options: Any) -> RowHandle:
        line = len(self.rows) + 1
        handle = RowHandle(lambda: self.cancelled.append(line))
        with self.lock:
            self.rows.append((line, handle, "fail" in json.dumps(prompt)))
        return handle

    def _end_rows(self) -> None:
        while not self.stop.wait(0.001):
            with self.lock:
                open_rows = [row for row in self.rows if not row[1].done]
                submitted = len(self.rows)
            if not open_rows or (len(open_rows) < 2 * self.engine.max_rows and submitted < self.total):
                continue
            line, handle, fails = open_rows[-1]
            self.ended.append(line)
            if fails:
                handle._finish(None, GenerationError("the row failed"))
                continue
            result = Generation(text="Kind: cat", tokens=[], stats=Stats(), accepted=True, finish_reason="stop")
            handle._emit(Event(result.text))
            handle._emit(Event("", result))
            handle._finish(result, None)


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Any:
    fake = NewestFirstEngine(max_rows=2, total=12)
    monkeypatch.setattr(program_runs, "engine_for", lambda model: fake.engine)
    monkeypatch.setattr(program_runs, "submit", fake.submit)
    fake.thread.start()
    yield fake
    fake.stop.set()
    fake.thread.join(10)


def _data(tmp_path: Any, names: list[str]) -> Any:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"name": name}) + "\n" for name in names))
    return data


def test_records_are_written_in_the_order_the_rows_end(engine: NewestFirstEngine, tmp_path: Any) -> None:
    names = [f"pet {k}" if k % 4 else "fail" for k in range(1, 13)]
    out = tmp_path / "results.jsonl"
    reported: list[bool] = []
    written, skipped = program_runs.run_dataset(Program(PROGRAM), None, _data(tmp_path, names), out,
                                                progress=reported.append)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert (written, skipped) == (12, 0)
    assert [r["line"] for r in records] == engine.ended and sorted(engine.ended) == list(range(1, 13))
    assert engine.ended != list(range(1, 13))
    assert {r["line"] for r in records if "error" in r} == {4, 8, 12}
    assert all(r["result"] == {"kind": "cat"} for r in records if "result" in r)
    assert reported == ["error" in r for r in records]


def test_an_interrupted_run_cancels_every_row_in_flight(engine: NewestFirstEngine, tmp_path: Any) -> None:
    engine.stop.set()
    engine.thread.join(10)
    out = tmp_path / "results.jsonl"
    first = threading.Timer(0.05, lambda: engine.rows[0][1]._finish(None, GenerationError("done early")))
    first.start()

    def interrupt(error: bool) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        program_runs.run_dataset(Program(PROGRAM), None, _data(tmp_path, [f"pet {k}" for k in range(9)]), out,
                                 progress=interrupt)
    first.join()
    assert [json.loads(line)["line"] for line in out.read_text().splitlines()] == [1]
    assert sorted(engine.cancelled) == [2, 3, 4]
