"""Soak (`-m slow`): STDSL_SOAK_SECONDS (default 1200) of mixed concurrent clients against one server: schemas, tools,
streams, text completions, clients that disconnect and streams cancelled early.  Every request that is not abandoned
gets a 200 that obeys its constraint (no request lost), every abandoned row is freed, and the resident memory after
warm-up grows by at most STDSL_SOAK_RSS_GROWTH_MB (default 150) beside the prompt cache's own growth (its KV and its
entries' bookkeeping, bounded by the engine's `prompt_cache_bytes`, 256 MB, and filling with the clients' distinct
prompts)."""
from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from typing import Any

import httpx
import psutil
import pytest

from tests.server.reply_checks import CHAT, PERSON, SEEDS, check_reply
from tests.server.server_fixtures import metric, running_server

SECONDS = float(os.environ.get("STDSL_SOAK_SECONDS", "1200"))
GROWTH_MB = float(os.environ.get("STDSL_SOAK_RSS_GROWTH_MB", "150"))
CLIENTS = 8
WORDS = ["Paris", "Lima", "a cat", "the sea", "Ada", "numbers", "rain", "a robot", "Kyoto", "bread"]


def _varied(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A seed request with its own user text, and for schemas one of 20 variants (so the grammar cache turns)."""
    path, body = rng.choice(SEEDS)
    body = json.loads(json.dumps(body))
    if "messages" in body:
        body["messages"] = [{"role": "user", "content": f"Tell me about {rng.choice(WORDS)} {rng.randrange(1000)}."}]
    if body.get("response_format", {}).get("type") == "json_schema":
        schema = json.loads(json.dumps(PERSON))
        schema["properties"]["name"]["maxLength"] = rng.randrange(3, 23)
        body["response_format"]["json_schema"]["schema"] = schema
    return path, body


class Soak:
    """The clients' shared tally, and the failures they saw."""

    def __init__(self, url: str, deadline: float) -> None:
        self.url, self.deadline = url, deadline
        self.tally: Counter[str] = Counter()
        self.failures: list[str] = []
        self.lock = threading.Lock()

    def count(self, key: str, amount: int = 1) -> None:
        with self.lock:
            self.tally[key] += amount

    def fail(self, what: str) -> None:
        with self.lock:
            self.failures.append(what[:600])

    def client(self, seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(timeout=300) as http:
            while time.monotonic() < self.deadline:
                kind = rng.choices(["request", "disconnect", "cancel"], weights=[8, 1, 1])[0]
                try:
                    getattr(self, kind)(http, rng)
                except Exception as error:  # any other failure is a lost request
                    self.fail(f"{kind}: {type(error).__name__}: {error}")

    def request(self, http: httpx.Client, rng: random.Random) -> None:
        path, body = _varied(rng)
        self.count("sent")
        response = http.post(self.url + path, json=body)
        if response.status_code != 200:
            self.fail(f"{response.status_code} for {body}: {response.text}")
            return
        stream = response.headers["content-type"].startswith("text/event-stream")
        self.count("choices_validated", check_reply(path, body, response.text, stream))
        self.count("replies_validated")

    def disconnect(self, http: httpx.Client, rng: random.Random) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "Go on."}], "max_tokens": 2000}
        self.count("sent")
        self.count("abandoned")
        try:
            httpx.post(self.url + CHAT, json=body, timeout=rng.uniform(0.2, 1.5))
        except httpx.ReadTimeout:
            return
        self.count("finished_before_leaving")

    def cancel(self, http: httpx.Client, rng: random.Random) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "Go on."}], "max_tokens": 2000, "stream": True}
        self.count("sent")
        self.count("abandoned")
        with http.stream("POST", self.url + CHAT, json=body) as response:
            if response.status_code != 200:
                self.fail(f"cancel: {response.status_code}")
                return
            for i, _ in enumerate(response.iter_lines()):
                if i >= rng.randrange(1, 12):
                    break


def _resident_mb() -> float:
    """Resident memory of this process (the server runs in it) and its children (the compile worker), in MB."""
    me = psutil.Process()
    total = me.memory_info().rss
    for child in me.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def _server_memory_mb(url: str) -> dict[str, float]:
    """Where the server's memory is, by its own /metrics: MLX arrays and cache, grammars, prompt cache, KV."""
    names = ("mlx_active_bytes", "mlx_cache_bytes", "grammar_bytes", "prompt_cache_bytes", "kv_bytes")
    return {name.removesuffix("_bytes"): round(metric(url, name) / 2**20, 1) for name in names}


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + 600)
def test_soak(tiny_model) -> None:
    with running_server(tiny_model, max_rows=8, compile_seconds=10.0) as url:
        start = time.monotonic()
        soak = Soak(url, start + SECONDS)
        warm_up = min(120.0, SECONDS / 5)
        samples: list[tuple[float, float]] = []
        breakdown: dict[str, dict[str, float]] = {}
        clients = [threading.Thread(target=soak.client, args=(seed,)) for seed in range(CLIENTS)]
        for thread in clients:
            thread.start()
        while any(thread.is_alive() for thread in clients):
            samples.append((time.monotonic() - start, _resident_mb()))
            if samples[-1][0] >= warm_up and "after_warm_up" not in breakdown:
                breakdown["after_warm_up"] = _server_memory_mb(url)
            time.sleep(5)
        for thread in clients:
            thread.join()
        deadline = time.monotonic() + 30
        while metric(url, "rows_active") or metric(url, "rows_queued"):
            assert time.monotonic() < deadline, "abandoned rows were never freed"
            time.sleep(0.2)
        samples.append((time.monotonic() - start, _resident_mb()))
        breakdown["end"] = _server_memory_mb(url)
    warm = [mb for at, mb in samples if at >= warm_up]
    report = {**soak.tally, "seconds": round(SECONDS), "clients": CLIENTS,
              "rss_start_mb": round(samples[0][1]), "rss_after_warm_up_mb": round(warm[0]),
              "rss_max_after_warm_up_mb": round(max(warm)), "rss_end_mb": round(samples[-1][1]),
              "failures": len(soak.failures), "server_memory_mb": breakdown,
              "rss_every_minute_mb": [round(mb) for at, mb in samples[::12]]}
    print(f"\nsoak report: {json.dumps(report)}")
    assert not soak.failures, soak.failures[:5]
    assert soak.tally["replies_validated"] > 0
    cache_growth = breakdown["end"]["prompt_cache"] - breakdown["after_warm_up"]["prompt_cache"]
    assert max(warm) - warm[0] - cache_growth <= GROWTH_MB, report
