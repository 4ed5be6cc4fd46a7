"""`GET /metrics`: the server's counters and gauges in Prometheus' text exposition format (version 0.0.4)."""

from __future__ import annotations

import resource
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from stdsl.server.constraints.constraint_cache import CacheStats

PREFIX = "stdsl_"

ENGINE_COUNTERS = {
    "requests": "requests the engine admitted",
    "passes": "model passes (prefill chunks and decode steps)",
    "prompt_tokens": "prompt tokens of admitted requests",
    "prefilled_tokens": "prompt tokens actually prefilled (not served by the prompt cache)",
    "sampled_tokens": "tokens sampled from the model",
    "prompt_cache_hits": "prompts that started from a cached prefix",
    "prompt_cache_hit_tokens": "prompt tokens served by the prompt cache",
    "shared_prefix_rows": "prompts that started from a prefix shared with rows prefilled beside them or running",
    "shared_prefix_tokens": "prompt tokens served by such a shared prefix (prefilled once for all its rows)",
    "control_rests": "rests of rows past their share of mask and advance work (others stepped meanwhile)",
}
ENGINE_GAUGES = {
    "rows_active": "rows in the running batch",
    "rows_queued": "rows waiting for a slot (queue depth)",
    "prompt_cache_bytes": "bytes held by the prompt cache",
    "kv_bytes": "bytes held by the running batch's KV caches",
}


class Metrics:
    """HTTP request counts by endpoint and status, completion tokens, and the exposition of everything else."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.http: Counter[tuple[str, int]] = Counter()
        self.completion_tokens = 0
        self.completion_forced_tokens = 0
        self.guard_cancels = 0

    def request(self, endpoint: str, status: int) -> None:
        with self._lock:
            self.http[(endpoint, status)] += 1

    def completed(self, tokens: int, forced: int) -> None:
        """Count a reply's tokens, `forced` of them decided by its constraint without a model pass."""
        with self._lock:
            self.completion_tokens += tokens
            self.completion_forced_tokens += forced

    def render(self, engine: Mapping[str, Any], cache: CacheStats, cache_limit: int) -> str:
        """The exposition text: request counts, engine counters and gauges, grammar cache, memory."""
        lines: list[str] = []

        def metric(name: str, kind: str, text: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {PREFIX}{name} {text}")
            lines.append(f"# TYPE {PREFIX}{name} {kind}")
            lines.extend(f"{PREFIX}{name}{labels} {_number(value)}" for labels, value in samples)

        with self._lock:
            http = sorted(self.http.items())
            completion, forced, guards = self.completion_tokens, self.completion_forced_tokens, self.guard_cancels
        metric("http_requests_total", "counter", "HTTP requests by endpoint and status",
               [(f'{{endpoint="{e}",status="{s}"}}', n) for (e, s), n in http])
        metric("completion_tokens_total", "counter", "tokens returned to clients", [("", completion)])
        metric("completion_forced_tokens_total", "counter", "returned tokens the constraints forced (no pass)",
               [("", forced)])
        metric("guard_cancels_total", "counter", "replies cancelled for repeating a call or looping", [("", guards)])
        for key, text in ENGINE_COUNTERS.items():
            metric(f"{key}_total", "counter", text, [("", engine.get(key, 0))])
        for key, text in ENGINE_GAUGES.items():
            metric(key, "gauge", text, [("", engine.get(key, 0))])
        metric("engine_seconds_total", "counter", "seconds the engine spent per phase of its steps ('step' is the "
               "whole step)", [(f'{{phase="{p}"}}', v) for p, v in sorted(engine.get("seconds", {}).items())])
        metric("grammars_compiled", "gauge", "compiled constraints held by the cache", [("", cache.entries)])
        metric("grammar_bytes", "gauge", "bytes of the compiled constraints held", [("", cache.bytes)])
        metric("grammar_bytes_limit", "gauge", "bound on grammar_bytes", [("", cache_limit)])
        metric("grammar_compiles_total", "counter", "constraints compiled", [("", cache.compiles)])
        metric("grammar_cache_hits_total", "counter", "requests served a cached constraint", [("", cache.hits)])
        metric("grammar_compiles_warmed_total", "counter", "compiles started with no request waiting (a tool list's "
               "reply with tool_choice auto, first seen with none or one named tool)", [("", cache.warmed)])
        metric("grammar_evictions_total", "counter", "constraints evicted to stay under the byte bound",
               [("", cache.evictions)])
        metric("grammar_compile_seconds_total", "counter", "seconds compiles spent on a worker",
               [("", cache.compile_seconds)])
        metric("grammar_compile_queue_seconds_total", "counter", "seconds compiles waited for a worker",
               [("", cache.pool.queue_seconds)])
        metric("grammar_compiles_queued", "gauge", "compiles waiting for a worker", [("", cache.pool.queued)])
        metric("grammar_compiles_running", "gauge", "compiles on a worker now (no request with a compiled grammar "
               "waits for them)", [("", cache.pool.running)])
        metric("grammar_compiles_cancelled_total", "counter", "compiles cancelled because their clients left",
               [("", cache.pool.cancelled)])
        metric("grammar_compile_memory_refusals_total", "counter", "compiles refused past --max-compile-bytes",
               [("", cache.pool.memory_refusals)])
        metric("grammar_compile_workers_replaced_total", "counter", "compile workers killed and replaced",
               [("", cache.pool.replaced)])
        for name, value in memory().items():
            metric(name, "gauge", name.replace("_", " "), [("", value)])
        return "\n".join(lines) + "\n"


def memory() -> dict[str, int]:
    """Process memory: resident set now and at its peak, and MLX's active and cache memory."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/statm") as handle:
            out["process_resident_bytes"] = int(handle.read().split()[1]) * resource.getpagesize()
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["process_peak_resident_bytes"] = peak if sys.platform == "darwin" else peak * 1024
    mx = sys.modules.get("mlx.core")
    if mx is not None:
        out["mlx_active_bytes"] = int(mx.get_active_memory())
        out["mlx_cache_bytes"] = int(mx.get_cache_memory())
    return out


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6f}"
