"""A row's handle after its end: iterating again, or asking a drained `Stream` for its result, returns at once
(no second wait on an end marker consumed by the first loop), and a caller interrupted while `generate` waits
frees its row, so the engine goes on serving the next call."""

from __future__ import annotations

import threading

import pytest

import stdsl
from stdsl.errors import Cancelled
from stdsl.runtime.batch.engine import Engine
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.decode import engine_for


def _within(seconds: float, work) -> object:
    """`work()`'s value, failing the test if it has not returned after `seconds` (a hang, not a slow run)."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds} s"
    return out[0]


def test_stream_result_after_iteration_returns_the_generation(tiny_model) -> None:
    stream = stdsl.stream(tiny_model, "Count.", {"type": "integer"}, max_tokens=8)
    pieces = list(stream)
    result = _within(30, stream.result)
    assert "".join(pieces) == result.text == stream.generation.text


def test_a_handle_iterated_twice_ends_both_times(tiny_model) -> None:
    handle = Engine(tiny_model, max_rows=1).submit("Go.", {"type": "integer"}, max_tokens=8)
    first = "".join(event.text for event in handle)
    second = _within(30, lambda: list(handle))
    assert second == [] and first == handle.result(timeout=30).text


def test_interrupting_generate_cancels_its_row_and_the_engine_serves_the_next_call(tiny_model, monkeypatch) -> None:
    waited: list[RowHandle] = []
    plain_result = RowHandle.result

    def interrupted(self: RowHandle, timeout: float | None = None):
        waited.append(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(RowHandle, "result", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stdsl.generate(tiny_model, "Write on and on.", None, max_tokens=100_000)
    monkeypatch.setattr(RowHandle, "result", plain_result)
    (handle,) = waited
    with pytest.raises(Cancelled):
        handle.result(timeout=30)
    after = stdsl.generate(tiny_model, "Count.", {"type": "integer"}, max_tokens=8)
    assert after.text.lstrip("-").isdigit()
    assert engine_for(tiny_model).metrics()["rows_active"] == 0


def test_interrupting_generate_batch_cancels_every_row_it_submitted(tiny_model, monkeypatch) -> None:
    made: list[RowHandle] = []
    plain_init = RowHandle.__init__

    def recorded(self: RowHandle, cancel) -> None:
        plain_init(self, cancel)
        made.append(self)

    def interrupted(self: RowHandle, timeout: float | None = None):
        raise KeyboardInterrupt

    monkeypatch.setattr(RowHandle, "__init__", recorded)
    monkeypatch.setattr(RowHandle, "result", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stdsl.generate_batch(tiny_model, [{"prompt": "On."}, {"prompt": "And on."}], max_tokens=100_000)
    monkeypatch.undo()
    assert len(made) == 2
    for handle in made:
        with pytest.raises(Cancelled):
            handle.result(timeout=30)
