"""`side_stream` and `beside`: a second stream per thread, and a function run meanwhile on a worker thread whose
arrays the caller can use, whose error reaches the caller."""

from __future__ import annotations

import threading

import mlx.core as mx
import pytest

from stdsl.runtime.platform import side_stream as side_stream_module
from stdsl.runtime.platform.side_stream import beside, side_stream


def test_each_thread_keeps_one_side_stream_of_its_own() -> None:
    here = side_stream()
    assert here is not None and here == side_stream()
    assert here != mx.default_stream(mx.cpu)
    there: list[mx.Stream | None] = []
    worker = threading.Thread(target=lambda: there.append(side_stream()))
    worker.start()
    worker.join()
    assert there[0] is not None and there[0] != here


def test_beside_runs_the_second_on_another_thread_and_its_arrays_serve_the_caller() -> None:
    threads: list[int] = []
    weights = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    mx.eval(weights)  # an array the worker reads is evaluated first: its ops ran on this thread's stream

    def first() -> mx.array:
        threads.append(threading.get_ident())
        return weights @ weights.T

    def second() -> mx.array:
        threads.append(threading.get_ident())
        out = (weights.T @ weights)[1:]
        mx.eval(out)
        return out

    near, far = beside(first, second)
    assert threads[0] == threading.get_ident() and threads[1] != threads[0]
    assert mx.array_equal(near, weights @ weights.T).item()
    assert mx.array_equal(far + 1, (weights.T @ weights)[1:] + 1).item()


@pytest.mark.parametrize("failing", ["first", "second"])
def test_an_error_on_either_side_reaches_the_caller_once_both_are_done(failing: str) -> None:
    done: list[str] = []

    def side(name: str) -> int:
        if name == failing:
            raise ValueError(f"{name} failed")
        done.append(name)
        return 1

    with pytest.raises(ValueError, match=f"{failing} failed"):
        beside(lambda: side("first"), lambda: side("second"))
    assert done == [name for name in ("first", "second") if name != failing]


@pytest.mark.parametrize(("version", "release"), [("0.32.4", (0, 32, 4)), ("0.31.2.dev20260401", (0, 31, 2)),
                                                  ("0.30.0rc1", (0, 30, 0)), ("1.0", (1, 0))])
def test_mlx_releases_read_by_their_numbers(version: str, release: tuple[int, ...]) -> None:
    assert side_stream_module._release(version) == release


def test_no_side_stream_before_mlx_streams_per_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLX older than 0.31.2 is not safe to evaluate on two threads: everything stays on the caller's stream."""
    monkeypatch.setattr(side_stream_module.mx, "__version__", "0.31.1")
    assert side_stream_module.side_stream() is None
