"""The process's one runner thread: every engine is stepped by it, engines start no thread of their own (nor does
`generate_batch(max_rows=...)`), `Engine.call` work runs on it, and a dropped model frees its engine."""

from __future__ import annotations

import gc
import threading
import weakref

import stdsl
from stdsl.runtime.decode import engine_for
from stdsl.runtime.engine import Engine
from stdsl.runtime.model.loading import Model
from stdsl.runtime.runner import RUNNER, THREAD_NAME


def _runner_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def test_engines_start_no_thread_and_share_the_runner(tiny_model) -> None:
    stdsl.generate(tiny_model, "Warm up.", {"type": "integer"}, max_tokens=6)
    before = set(threading.enumerate())
    engines = [Engine(tiny_model, max_rows=2) for _ in range(3)]
    handles = [e.submit("Count.", {"type": "integer"}, max_tokens=6) for e in engines]
    assert all(h.result(timeout=120).text.lstrip("-").isdigit() for h in handles)
    out = stdsl.generate_batch(tiny_model, [{"prompt": f"Count {i}."} for i in range(3)], max_rows=2,
                               constraint={"type": "integer"}, max_tokens=6)
    assert all(not isinstance(r, Exception) for r in out)
    assert set(threading.enumerate()) == before
    (runner,) = _runner_threads()
    assert {e.call(threading.current_thread) for e in engines} == {runner}
    for engine in engines:
        engine.close()


def test_engine_call_runs_on_the_runner_and_raises_what_the_work_raises(tiny_model) -> None:
    engine = Engine(tiny_model, max_rows=1)
    assert engine.call(RUNNER.is_current) and not RUNNER.is_current()

    def broken() -> None:
        raise KeyError("work failed")

    try:
        engine.call(broken)
    except KeyError as error:
        assert "work failed" in str(error)
    else:
        raise AssertionError("the work's error must reach the caller")
    assert engine.submit("Again.", {"type": "integer"}, max_tokens=6).result(timeout=120).text
    engine.close()


def test_a_dropped_model_frees_its_engine(tiny_model) -> None:
    model = Model(net=tiny_model.net, tokenizer=tiny_model.tokenizer, name="tiny-dropped")
    assert stdsl.generate(model, "Count.", {"type": "integer"}, max_tokens=6).text
    assert engine_for(model) is engine_for(model)
    models, engines = weakref.ref(model), weakref.ref(engine_for(model))
    del model
    gc.collect()
    assert models() is None and engines() is None
