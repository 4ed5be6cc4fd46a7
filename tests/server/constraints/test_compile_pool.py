"""The compile pool: a worker stuck past its limit is killed and replaced, a slow schema never holds up a new one,
and `close` leaves no worker running; through the real server, a schema that times out leaves the next compiling."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import openai
import psutil
import pytest

from stdsl.errors import CompileTimeError
from stdsl.server.constraints.compile_pool import CompilePool
from stdsl.server.constraints.constraint_cache import ConstraintCache
from tests.server.server_fixtures import live_group, running_server

ROOT = Path(__file__).resolve().parents[3]


def _schema(i: int) -> dict:
    return {"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"],
            "additionalProperties": False}


def _spec(schema: dict) -> dict:
    return {"kind": "json_schema", "strict": True, "schema": schema}


def _overlapping(objects: int) -> dict:
    """Issue 28's schema: objects with overlapping integer members under `oneOf` (minutes to compile in full)."""
    return {"oneOf": [{"type": "object", "required": [f"k{i % 6}", f"k{(i + 1) % 6}"],
                       "properties": {f"k{j}": {"type": "integer", "minimum": (i + j) % 5, "maximum": 10 + i}
                                      for j in range(6)}} for i in range(objects)]}


def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether the process has ended (and been reaped, or is a zombie of no one) within `within` seconds."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.05)
    return False


def test_a_stuck_worker_is_killed_at_the_limit_and_replaced() -> None:
    async def run() -> None:
        cache = ConstraintCache(compile_seconds=1.0, workers=1, grace_seconds=0.5, reserved_workers=0)
        try:
            await cache.get(_spec(_schema(0)))
            [stuck] = cache.pool.pids()
            os.kill(stuck, signal.SIGSTOP)
            start = time.monotonic()
            with pytest.raises(CompileTimeError, match=r"did not answer within 1\.5 s \(compiling \(limit 1 s\)\)"):
                await cache.get(_spec(_schema(1)))
            assert time.monotonic() - start < 1.5 + 1.0
            assert _gone(stuck) and cache.pool.replaced == 1
            compiled = await cache.get(_spec(_schema(2)))
            assert compiled.accepts('{"k2":7}') and stuck not in cache.pool.pids()
        finally:
            cache.close()

    asyncio.run(run())


def test_a_slow_schema_does_not_hold_up_a_new_one() -> None:
    async def run() -> None:
        cache = ConstraintCache(compile_seconds=4.0)
        try:
            await asyncio.gather(cache.get(_spec(_schema(0))), cache.get(_spec(_schema(1))))
            slow = asyncio.ensure_future(cache.get(_spec(_overlapping(8))))
            await asyncio.sleep(0.2)
            start = time.monotonic()
            compiled = await cache.get(_spec(_schema(2)))
            assert time.monotonic() - start < 2.0 and not slow.done()
            assert compiled.accepts('{"k2":1}')
            with pytest.raises(CompileTimeError):
                await slow
        finally:
            cache.close()

    asyncio.run(run())


def test_close_kills_a_worker_in_the_middle_of_a_compile() -> None:
    async def run() -> list[int]:
        pool = CompilePool(1)
        job = asyncio.ensure_future(pool.run(_spec(_overlapping(10)), 600.0))
        while not pool.pids():
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        pids = pool.pids()
        pool.close()
        with pytest.raises(Exception):
            await job
        return pids

    pids = asyncio.run(run())
    assert pids and all(_gone(pid) for pid in pids)


@pytest.mark.timeout(300)
def test_a_schema_that_times_out_leaves_the_next_compiling(tiny_model) -> None:
    """One client's slow schema is refused at the limit; meanwhile and after, new schemas compile promptly."""
    ask = [{"role": "user", "content": "Fill it in."}]

    def fmt(schema: dict, name: str) -> dict:
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

    with running_server(tiny_model, max_rows=4, compile_seconds=10.0) as url:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        client.chat.completions.create(model="m", messages=ask, max_tokens=8, response_format=fmt(_schema(0), "warm"))
        slow_error: list[openai.BadRequestError] = []

        def slow_client() -> None:
            try:
                client.chat.completions.create(model="m", messages=ask, max_tokens=8,
                                               response_format=fmt(_overlapping(9), "slow"))
            except openai.BadRequestError as error:
                slow_error.append(error)

        slow = threading.Thread(target=slow_client)
        slow.start()
        time.sleep(0.5)
        for i in (1, 2):
            start = time.monotonic()
            reply = client.chat.completions.create(model="m", messages=ask, max_tokens=8,
                                                   response_format=fmt(_schema(i), f"new{i}"))
            assert reply.choices[0].message.content is not None
            assert time.monotonic() - start < 8.0
            if i == 1:
                assert slow.is_alive()
                slow.join()
                assert slow_error and slow_error[0].code == "constraint_compile_timeout"


EXIT_WHILE_COMPILING = """
import asyncio, sys, time
from stdsl.server.constraints.compile_pool import CompilePool
from tests.server.constraints.test_compile_pool import _overlapping, _spec

async def main():
    pool = CompilePool(2)
    job = asyncio.ensure_future(pool.run(_spec(_overlapping(10)), 600.0))
    await asyncio.sleep(1.0)
    print(" ".join(map(str, pool.pids())), flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)

asyncio.run(main())
"""


@pytest.mark.parametrize("ending", ["exit", "hang"])
def test_no_worker_outlives_its_process(ending: str) -> None:
    """A script that ends with a compile running leaves no worker (exit hook); nor does one killed outright
    (each worker asks the kernel to end it with its parent)."""
    child = subprocess.Popen([sys.executable, "-c", EXIT_WHILE_COMPILING, ending], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert child.stdout is not None
    pids = [int(p) for p in child.stdout.readline().split()]
    assert len(pids) == 3  # two general workers and one reserved for small jobs
    if ending == "hang":
        child.kill()
    assert child.wait(timeout=30) == (0 if ending == "exit" else -signal.SIGKILL)
    assert all(_gone(pid, 10) for pid in pids)
    assert not live_group(child.pid, within=10)
