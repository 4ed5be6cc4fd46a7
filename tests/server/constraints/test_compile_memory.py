"""Compile memory is capped while a compile runs: a grammar that would take gigabytes is refused within seconds with
a memory error naming `--max-compile-bytes`, its worker's resident memory stays under the cap, and the worker is
replaced so the next compile runs; `stcon serve --max-compile-bytes` sets the cap."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import pytest

from stdsl.server.constraints.compile_pool import MAX_COMPILE_BYTES, CompileMemoryError, CompilePool
from tests.server.server_fixtures import metric, running_server

CAP = 256 << 20
SLACK = 128 << 20
"""Resident memory a worker has besides its compile (the interpreter and the compiler: about 60 MB)."""
HOSTILE = [
    {"kind": "grammar", "text": 'start: (("a"|"b") ~ 100..200) ~ 100..200', "syntax": "lark"},
    {"kind": "grammar", "text": "root ::= ([a-z]{1,100}){1,100}", "syntax": "gbnf"},
]


def _peak_resident(pid: int) -> int:
    """A process's peak resident memory (VmHWM) from /proc; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _PeakWatch:
    """Samples the peak resident memory of `pids()` (a pool's workers) every 20 ms while it runs."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids, self.peak, self._stop = pids, 0, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            for pid in self.pids():
                self.peak = max(self.peak, _peak_resident(pid))

    def __enter__(self) -> _PeakWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.parametrize("cap", [CAP, pytest.param(MAX_COMPILE_BYTES, marks=pytest.mark.slow)],
                         ids=["256MiB", "default"])
@pytest.mark.parametrize("spec", HOSTILE, ids=["lark-nested-repeat", "gbnf-nested-repeat"])
def test_a_compile_past_the_cap_is_refused_within_seconds_under_the_cap(spec: dict, cap: int) -> None:
    """At 256 MiB each grammar is refused in about 2 s; at the default 1 GiB (slow) in 7-8 s."""
    async def run() -> None:
        pool = CompilePool(1, reserved_workers=0, max_compile_bytes=cap)
        try:
            await pool.run({"kind": "regex", "pattern": "[a-z]+"}, 30.0)
            [first] = pool.pids()
            with _PeakWatch(pool.pids) as watch:
                start = time.monotonic()
                refusal = rf"needed more than {cap >> 20} MiB \(--max-compile-bytes\)"
                with pytest.raises(CompileMemoryError, match=refusal):
                    await pool.run(spec, 60.0)
                took = time.monotonic() - start
            assert took < 15.0 * cap / CAP, took
            assert 0 < watch.peak < cap + SLACK, watch.peak
            assert pool.replaced == 1 and first not in pool.pids() and pool.stats.memory_refusals == 1
            compiled, error, _ = await pool.run({"kind": "regex", "pattern": "[a-z]+"}, 30.0)
            assert error is None and compiled.accepts("abc")
        finally:
            pool.close()

    asyncio.run(run())


def test_a_cap_under_one_mebibyte_is_refused_before_the_model_loads() -> None:
    done = subprocess.run([sys.executable, "-m", "stdsl.cli", "serve", "--max-compile-bytes", "1000"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--max-compile-bytes must be at least 1048576" in done.stderr


@pytest.mark.timeout(300)
def test_the_server_answers_a_compile_past_the_cap_with_a_400_naming_the_flag(tiny_model) -> None:
    """Both grammars through a real server at a 256 MiB cap: 400s within seconds, workers under the cap, and a
    schema compiles after them."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    with running_server(tiny_model, max_rows=2, max_compile_bytes=CAP) as url:
        assert httpx.post(url + "/chat/completions", json={**body, "guided_grammar": "root ::= [a-z]+"},
                          timeout=120).status_code == 200

        def workers() -> list[int]:
            return [child.pid for child in psutil.Process().children(recursive=True)]

        with _PeakWatch(workers) as watch:
            for spec in HOSTILE:
                start = time.monotonic()
                reply = httpx.post(url + "/chat/completions", json={**body, "guided_grammar": spec["text"]},
                                   timeout=120)
                assert reply.status_code == 400, reply.text
                assert "needed more than 256 MiB (--max-compile-bytes)" in reply.json()["error"]["message"]
                assert time.monotonic() - start < 15.0
        assert 0 < watch.peak < CAP + SLACK, watch.peak
        assert metric(url, "grammar_compile_memory_refusals_total") == 2
        assert metric(url, "grammar_compile_workers_replaced_total") == 2
        assert httpx.post(url + "/chat/completions", json={**body, "guided_grammar": "root ::= [0-9]+"},
                          timeout=120).status_code == 200
