"""Compile work is shared fairly: clients are served round-robin, another client's schema is never held up by one
client's heavy grammars (a worker is kept for small jobs), and a client that leaves cancels its compile, freeing
the worker it held."""
from __future__ import annotations

import asyncio
import logging
import random
import threading
import time

import httpx
import pytest

from stdsl.server.constraints.compile_pool import CompilePool
from tests.server.server_fixtures import metric, running_server


def _regex(i: int) -> dict:
    return {"kind": "regex", "pattern": f"[a-z]{{{i}}}"}


def _heavy_grammar(seed: int, words: int = 50_000) -> str:
    """A Lark alternation of `words` random words (~670 KB): seconds to compile, little memory."""
    rng = random.Random(seed)
    alternatives = " | ".join(f'"{"".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(5, 12)))}"'
                              for _ in range(words))
    return f'start: w (" " w)*\nw: {alternatives}'


def test_clients_are_served_round_robin() -> None:
    """With one worker, a client's queued jobs wait behind another client's job asked after them."""
    async def run() -> list[str]:
        pool = CompilePool(1, reserved_workers=0)
        finished: list[str] = []

        async def job(name: str, client: str, i: int) -> None:
            await pool.run(_regex(i), 30.0, client=client)
            finished.append(name)

        try:
            await asyncio.gather(job("a1", "a", 1), job("a2", "a", 2), job("a3", "a", 3), job("b1", "b", 4))
        finally:
            pool.close()
        return finished

    assert asyncio.run(run()) == ["a1", "b1", "a2", "a3"]


def test_cancelling_a_job_frees_its_place_or_its_worker() -> None:
    """A queued job cancelled leaves the queue; a running one cancelled kills its worker, which is replaced."""
    async def run() -> None:
        pool = CompilePool(1, reserved_workers=0)
        try:
            await pool.run(_regex(1), 30.0)
            [first] = pool.pids()
            heavy = {"kind": "grammar", "text": _heavy_grammar(0), "syntax": "lark"}
            running = asyncio.ensure_future(pool.run(heavy, 30.0, client="a"))
            queued = asyncio.ensure_future(pool.run(_regex(2), 30.0, client="b"))
            await asyncio.sleep(0.5)
            assert pool.stats.queued == 1
            queued.cancel()
            await asyncio.sleep(0)
            assert pool.stats.queued == 0
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            assert pool.replaced == 1 and first not in pool.pids() and pool.stats.cancelled == 2
            compiled, error, _ = await pool.run(_regex(3), 30.0, client="b")
            assert error is None and compiled.accepts("abc")
        finally:
            pool.close()

    asyncio.run(run())


def _chat(url: str, extra: dict, address: str, timeout: float = 120) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 32, **extra}
    with httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=timeout) as client:
        return client.post(url + "/chat/completions", json=body)


def _schema(name: str) -> dict:
    digit = {"type": "integer", "minimum": 0, "maximum": 9}
    schema = {"type": "object", "properties": {f"{name}_{k}": digit for k in range(3)},
              "required": [f"{name}_{k}" for k in range(3)], "additionalProperties": False}
    return {"response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}}


@pytest.mark.timeout(300)
def test_another_clients_schema_is_not_held_up_by_heavy_grammars(tiny_model) -> None:
    """Client A's two heavy grammars fill both general workers; client B's 3-field schema, asked after them,
    compiles on the reserved worker and is answered within 2 s."""
    with running_server(tiny_model, max_rows=4) as url:
        assert _chat(url, _schema("warm"), "127.0.0.1").status_code == 200
        heavy: list[int] = []

        def hostile(seed: int) -> None:
            heavy.append(_chat(url, {"guided_grammar": _heavy_grammar(seed)}, "127.0.0.2").status_code)

        threads = [threading.Thread(target=hostile, args=(seed,)) for seed in (1, 2)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        start = time.monotonic()
        reply = _chat(url, _schema("fresh"), "127.0.0.1")
        waited = time.monotonic() - start
        assert reply.status_code == 200, reply.text
        assert waited < 2.0, waited
        assert any(thread.is_alive() for thread in threads)
        for thread in threads:
            thread.join()
        assert heavy == [200, 200]
        assert metric(url, "grammar_compile_seconds_total") > 0


@pytest.mark.timeout(300)
def test_a_client_that_leaves_cancels_its_compile(tiny_model) -> None:
    """The worker compiling for a client that left is killed and replaced, and the server logs no error."""
    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append  # type: ignore[method-assign]
    with running_server(tiny_model, max_rows=4) as url:
        logging.getLogger("uvicorn.error").addHandler(handler)  # uvicorn's logging setup has run by now
        assert _chat(url, _schema("warm"), "127.0.0.1").status_code == 200
        with pytest.raises(httpx.TimeoutException):
            _chat(url, {"guided_grammar": _heavy_grammar(3)}, "127.0.0.2", timeout=1.0)
        deadline = time.monotonic() + 5
        while metric(url, "grammar_compile_workers_replaced_total") < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metric(url, "grammar_compiles_cancelled_total") == 1
        assert metric(url, "grammar_compile_workers_replaced_total") == 1
        assert metric(url, "grammar_compiles_total") == 1
    logging.getLogger("uvicorn.error").removeHandler(handler)
    assert not errors, [record.getMessage() for record in errors]
