"""`Engine.close` stops admission, lets rows finish within its bound and cancels the rest; engines start no thread
of their own (the process's one runner thread steps them all); a process that exits with rows decoding exits 0
promptly."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from stdsl.compiler.automata.build import compile_regex
from stdsl.errors import Cancelled, StdslError
from stdsl.runtime.engine import Engine
from stdsl.runtime.runner import THREAD_NAME

ROOT = Path(__file__).resolve().parents[2]
LONG = compile_regex("(?:[a-z ]{1000}){3}")
"""Hundreds of tokens at least, with no end-of-text before them: a row still decoding when the bound passes."""


def _runner_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME and t.is_alive()]


def test_close_lets_rows_finish_within_the_bound(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=2)
    handles = [engine.submit("Name a colour.", {"enum": ["red", "green"]}, max_tokens=8),
               engine.submit("Free text.", None, max_tokens=6)]
    engine.close(drain_seconds=120)
    assert all(h.done for h in handles)
    assert handles[0].result(timeout=0).text in ('"red"', '"green"')
    assert len(handles[1].result(timeout=0).tokens) <= 6
    with pytest.raises(StdslError, match="closed"):
        engine.submit("Again.", None, max_tokens=4)


def test_close_waits_for_a_request_the_runner_is_still_inserting(tiny_model) -> None:
    """A request taken from the runner's inbox but not yet in the core is still owed: close waits for it (and would
    cancel it), it does not return while the request is between the two."""
    engine = Engine(tiny_model, max_rows=2)
    insert, entered, release = engine.core.insert, threading.Event(), threading.Event()

    def slow_insert(request, handle):  # type: ignore[no-untyped-def]
        entered.set()
        release.wait(60)
        return insert(request, handle)

    engine.core.insert = slow_insert  # type: ignore[method-assign]
    handle = engine.submit("Name a colour.", {"enum": ["red", "green"]}, max_tokens=8)
    assert entered.wait(60)
    closer = threading.Thread(target=engine.close, kwargs={"drain_seconds": 120})
    closer.start()
    time.sleep(0.3)
    assert closer.is_alive(), "close returned while the request was being inserted"
    release.set()
    closer.join(120)
    assert handle.done and handle.result(timeout=0).text in ('"red"', '"green"')


def test_close_cancels_rows_past_the_bound_and_starts_no_thread(tiny_model) -> None:
    before = set(threading.enumerate())
    engine = Engine(tiny_model, max_rows=2)
    long_rows = [engine.submit(f"Free text {i}.", LONG, max_tokens=4000) for i in range(3)]
    next(iter(long_rows[0]))
    start = time.monotonic()
    engine.close(drain_seconds=0.3)
    assert time.monotonic() - start < 0.3 + 5.0
    for handle in long_rows:
        with pytest.raises(Cancelled):
            handle.result(timeout=0)
    assert engine.metrics()["rows_active"] == 0 and engine.metrics()["rows_queued"] == 0
    assert len(_runner_threads()) == 1
    assert set(threading.enumerate()) - before <= set(_runner_threads())


EXIT_WHILE_DECODING = textwrap.dedent("""
    import sys, time
    import stdsl
    from stdsl.compiler.automata.build import compile_regex
    from stdsl.runtime.engine import Engine
    engine = Engine(stdsl.load(), max_rows=2)
    long = compile_regex("(?:[a-z ]{1000}){3}")
    handles = [engine.submit("Write a long story.", long, max_tokens=4000) for _ in range(2)]
    next(iter(handles[0]))
    print("decoding", flush=True)
    sys.stdout.close()
""")


def test_the_interpreter_exits_promptly_and_cleanly_with_rows_decoding(smollm2_gguf_path) -> None:
    """Falling off the end of a script mid-decode: the exit hook cancels the rows; status 0, no abort."""
    child = subprocess.Popen([sys.executable, "-c", EXIT_WHILE_DECODING], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "decoding"
    start = time.monotonic()
    _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err[-2000:]
    assert time.monotonic() - start < 10.0
