"""The engine: one model's batch core, stepped by the process's runner thread.

`Engine` is what callers hold: `submit` turns a prompt and a constraint into a row of its
`BatchCore` and returns the row's `RowHandle` at once; the runner (`stdsl.runtime.runner`), the
one thread that steps every core, decodes it. An engine owns no thread: dropping it (and its
model) frees its KV state, and `close` stops its scheduling, never a thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from stdsl.errors import StdslError
from stdsl.model_files.prompt import check_prompt
from stdsl.runtime.batch.control_shares import DEFAULT_MAX_CONTROL_SECONDS
from stdsl.runtime.batch.core import BatchCore
from stdsl.runtime.batch.policies import Policy
from stdsl.runtime.batch.prefill import DEFAULT_PREFILL_CHUNK
from stdsl.runtime.batch.prompt_cache import PromptCache
from stdsl.runtime.batch.requests import RowRequest, prepare_request
from stdsl.runtime.batch.row import RowHandle
from stdsl.runtime.options import DecodeOptions
from stdsl.runtime.row_caches.layers import CacheLayout
from stdsl.runtime.runner import RUNNER

T = TypeVar("T")


class Engine:
    """Steps many requests on one model together; `submit` returns a `RowHandle` at once.

    `max_rows` rows decode at once (others wait in order); prompts are prefilled in chunks of
    `prefill_chunk` tokens; the prompt cache keeps at most `prompt_cache_bytes` of KV state and its entries'
    bookkeeping; a row whose constraint takes more than `max_control_seconds` of CPU in mask and advance work in all
    fails with GenerationError (a row over its share of a step's control work rests meanwhile: `core.py`). A model
    whose layers the engine cannot batch exactly (`row_caches`) is refused here (UnsupportedModelError), before any
    request.
    """

    def __init__(self, model: Any, *, max_rows: int = 8, prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
                 prompt_cache_bytes: int = 256 << 20, max_control_seconds: float = DEFAULT_MAX_CONTROL_SECONDS) -> None:
        self.model = model
        self.core = BatchCore(model, max_rows=max_rows, prefill_chunk=prefill_chunk,
                              prompt_cache_bytes=prompt_cache_bytes, max_control_seconds=max_control_seconds)
        self._closed = False

    @property
    def max_rows(self) -> int:
        """Rows decoded at once."""
        return self.core.max_rows

    @property
    def cache_layout(self) -> CacheLayout:
        """How the model's layers are cached by row (`trimmable`: no layer keeps a recurrent state)."""
        return self.core.layout

    @property
    def prompt_cache(self) -> PromptCache:
        """The KV states of prompts prefilled before (used on the runner thread only)."""
        return self.core.prompt_cache

    def submit(self, prompt: Any, constraint: Any = None, **options: Any) -> RowHandle:
        """Queue one request and return its handle; bad arguments and infeasible budgets raise here, before any pass."""
        settings = DecodeOptions.of(**options)
        check_prompt(prompt)
        return self.submit_request(prepare_request(self.model, prompt, constraint, settings))

    def submit_request(self, request: RowRequest) -> RowHandle:
        """Queue a prepared request (prompt ids, its controller and started log, options)."""
        if self._closed:
            raise StdslError("the engine is closed")
        return RUNNER.submit(self.core, request)

    def submit_policy(self, make: Callable[[RowHandle], Policy]) -> RowHandle:
        """Queue a scheduling policy's run (`policies.py`; `make(handle)` builds it) and return its handle."""
        if self._closed:
            raise StdslError("the engine is closed")
        return RUNNER.submit_policy(self.core, make)

    def call(self, work: Callable[[], T]) -> T:
        """Run `work` on the runner thread between two steps and return its result (model work off the batch)."""
        if self._closed:
            raise StdslError("the engine is closed")
        return RUNNER.call(work)

    def metrics(self) -> dict[str, Any]:
        """Counters of the engine's life: rows active and queued, passes, tokens, prompt cache use, seconds per
        phase."""
        return self.core.metrics()

    def close(self, drain_seconds: float = 0.0) -> None:
        """Refuse new requests, let the rows in flight finish for up to `drain_seconds`, cancel the rest (each
        stops at the next step, a prefill between two chunks) and wait until none is left (on the runner
        thread itself, e.g. from a done callback, it only cancels)."""
        self._closed = True
        if not RUNNER.is_current():
            RUNNER.wait_idle(self.core, timeout=max(drain_seconds, 0.0))
        RUNNER.cancel_all(self.core)
        if not RUNNER.is_current():
            RUNNER.wait_idle(self.core)
