"""The batch engine: a running batch of rows, each with its own prompt, cache slot, constraint and sampler.

Every step: sample all rows whose logits are ready (masks from each row's constraint state),
advance their constraints (a sampled token plus its forced span, Theorem 19), drop finished and
cancelled rows, then one model pass feeds every row at once (ragged feeds, `RowSlotsCache`). New
rows are prefilled together in chunks, starting from the longest prefix the prompt cache holds,
and join the running batch between steps. `submit` is thread-safe; a pooled worker thread (`workers.py`) steps the
batch while there is work and exits when idle.

Ragged feeds (drip rule): a pass over B rows of width T costs about `1 + TOKEN_COST * B * T`
single-token passes on this CPU (SmolLM2, `benchmarks/batch.py`: least squares gives 0.096). Each
step feeds at most `width` tokens per row, the width among the feed lengths that maximises tokens
fed per unit of cost; longer feeds drip the rest in later steps (their row samples again only once
its feed is empty), so one long forced literal does not pad every other row.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import mlx.core as mx
import numpy as np

from stdsl.errors import StdslError
from stdsl.runtime.batch.forward import forward_rows, plain_cache_layers
from stdsl.runtime.batch.prompt_cache import PromptCache
from stdsl.runtime.batch.requests import RowRequest, prepare_request
from stdsl.runtime.batch.row import Row, RowHandle
from stdsl.runtime.batch.row_slots import RowSlotsCache
from stdsl.runtime.batch.sampling import sample_rows
from stdsl.runtime.options import DecodeOptions, check_prompt
from stdsl.runtime.workers import Worker

T = TypeVar("T")

TOKEN_COST = 0.1
DEFAULT_PREFILL_CHUNK = 512
IDLE_EXIT_SECONDS = 2.0


_LIVE: weakref.WeakSet[Engine] = weakref.WeakSet()


@atexit.register
def _close_engines() -> None:
    """Stop every engine's decoding before the interpreter finalizes (a thread inside an MLX call then would abort
    the process) and drop its KV state."""
    for engine in list(_LIVE):
        engine.close()
        engine.release()


def feed_width(lengths: Sequence[int]) -> int:
    """The per-row token cap for one pass: the feed length maximising tokens fed per unit of pass cost."""
    rows = len(lengths)
    best, best_rate = 1, -1.0
    for width in sorted(set(lengths)):
        fed = sum(min(n, width) for n in lengths)
        rate = fed / (1 + TOKEN_COST * rows * width)
        if rate > best_rate:
            best, best_rate = width, rate
    return best


class Engine:
    """Steps many requests on one model together; `submit` returns a `RowHandle` at once.

    `max_rows` rows decode at once (others wait in order); prompts are prefilled in chunks of
    `prefill_chunk` tokens; the prompt cache keeps at most `prompt_cache_bytes` of KV state. A model whose layers
    keep other than plain KV caches is refused here (UnsupportedModelError), before any request.
    """

    def __init__(self, model: Any, *, max_rows: int = 8, prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
                 prompt_cache_bytes: int = 256 << 20) -> None:
        from stdsl.runtime.option_values import integer

        self.model = model
        self._layers = plain_cache_layers(model.net, f"model {getattr(model, 'name', type(model).__name__)!r}")
        self.max_rows = integer("max_rows", max_rows, minimum=1)
        self.prefill_chunk = integer("prefill_chunk", prefill_chunk, minimum=1)
        self.prompt_cache = PromptCache(integer("prompt_cache_bytes", prompt_cache_bytes, minimum=0))
        self._waiting: list[Row] = []
        self._calls: list[tuple[Callable[[], Any], Future[Any]]] = []
        self._rows: list[Row] = []
        self._admitting: list[Row] = []
        self._caches: list[RowSlotsCache] = []
        self._logits: mx.array | None = None
        self._lock = threading.Condition()
        self._thread: Worker | None = None
        self._threads: list[Worker] = []
        self._closed = False
        _LIVE.add(self)
        self.counters = {"passes": 0, "prompt_tokens": 0, "prefilled_tokens": 0, "sampled_tokens": 0,
                         "forced_tokens": 0, "requests": 0}

    # ------------------------------------------------------------------ the caller's side

    def submit(self, prompt: Any, constraint: Any = None, **options: Any) -> RowHandle:
        """Queue one request and return its handle; bad arguments and infeasible budgets raise here, before any pass."""
        settings = DecodeOptions.of(**options)
        check_prompt(prompt)
        return self.submit_request(prepare_request(self.model, prompt, constraint, settings))

    def submit_request(self, request: RowRequest) -> RowHandle:
        """Queue a prepared request (prompt ids, started constraint state, options)."""
        holder: list[Row] = []
        handle = RowHandle(lambda: self._cancel(holder[0]))
        row = Row(request.prompt_ids, request.control, request.options, request.parser, handle,
                  until=request.until, max_samples=request.max_samples, remember=request.remember)
        row.feed = list(request.prefix)
        holder.append(row)
        if request.control.finished:
            row.complete("stop")
            return handle
        with self._lock:
            if self._closed:
                raise StdslError("the engine is closed")
            self._waiting.append(row)
            self.counters["requests"] += 1
            self._lock.notify_all()
            self._start_thread()
        return handle

    def call(self, work: Callable[[], T]) -> T:
        """Run `work` on the decode thread between two steps and return its result (model work off the batch)."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise StdslError("the engine is closed")
            self._calls.append((work, future))
            self._lock.notify_all()
            self._start_thread()
        return future.result()

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = Worker(self._run, "stdsl-engine")
            self._threads = [t for t in self._threads if t.is_alive()] + [self._thread]
            self._thread.start()

    def metrics(self) -> dict[str, int]:
        """Counters of the engine's life: rows active and queued, passes, tokens, prompt cache use."""
        with self._lock:
            return {**self.counters, "rows_active": len(self._rows), "rows_queued": len(self._waiting),
                    "prompt_cache_hits": self.prompt_cache.hits,
                    "prompt_cache_hit_tokens": self.prompt_cache.hit_tokens,
                    "prompt_cache_entries": len(self.prompt_cache), "prompt_cache_bytes": self.prompt_cache.nbytes,
                    "kv_bytes": sum(c.nbytes for c in self._caches)}

    def close(self, drain_seconds: float = 0.0) -> None:
        """Refuse new requests, let the rows in flight finish for up to `drain_seconds`, cancel the rest (each
        stops at the next step, a prefill between two chunks) and wait for the decode thread to end."""
        with self._lock:
            self._closed = True
            if not any(t.is_current() for t in self._threads):
                self._lock.wait_for(lambda: not (self._rows or self._waiting or self._admitting),
                                    timeout=max(drain_seconds, 0.0))
            for row in self._waiting + self._admitting + self._rows:
                row.cancelled = True
            self._lock.notify_all()
            threads = list(self._threads)
        for thread in threads:
            if not thread.is_current():
                thread.wait()

    def release(self) -> None:
        """Drop the KV state this engine holds (running rows and the prompt cache) after `close`."""
        with self._lock:
            self._rows, self._caches, self._logits = [], [], None
            self.prompt_cache.clear()

    def _cancel(self, row: Row) -> None:
        with self._lock:
            row.cancelled = True
            self._lock.notify_all()

    # ------------------------------------------------------------------ the decode thread

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._rows and not self._waiting and not self._calls:
                    if self._closed or not self._lock.wait_for(
                            lambda: bool(self._waiting or self._calls) or self._closed, timeout=IDLE_EXIT_SECONDS):
                        self._thread = None
                        return
            try:
                self.step()
            except Exception as error:  # a failed step fails the rows in flight (running or joining), never the thread
                with self._lock:
                    carried, self._admitting = self._rows + self._admitting, []
                for row in carried:
                    row.fail(error)
                self._rows, self._caches, self._logits = [], [], None
            with self._lock:
                self._lock.notify_all()

    def step(self) -> None:
        """One engine step: admit and prefill waiting rows, sample ready rows, run one pass over the batch."""
        with self._lock:
            calls, self._calls = self._calls, []
        for work, future in calls:
            try:
                future.set_result(work())
            except BaseException as error:  # handed to the caller, who raises it
                future.set_exception(error)
        with self._lock:
            for row in [r for r in self._waiting if r.cancelled]:
                self._waiting.remove(row)
                row.cancel_now()
            room = self.max_rows - len(self._rows)
            admitted, self._waiting = self._waiting[:room], self._waiting[room:]
            self._admitting = admitted
        self._drop([i for i, r in enumerate(self._rows) if r.cancelled], cancelled=True)
        if admitted:
            try:
                prefilled = self._prefill(admitted)
            except Exception as error:  # a failed prefill fails the rows it carried, not the running ones
                for row in admitted:
                    row.fail(error)
                prefilled = None
            if prefilled is not None:
                self._join(admitted, *prefilled)
            with self._lock:
                self._admitting = []
        self._sample()
        if self._rows:
            self._pass()

    def _prefill(self, rows: list[Row]) -> tuple[list[RowSlotsCache], list[mx.array | None]] | None:
        """Prefill new rows together from their longest cached prefix, in caches of their own; their caches and
        last logits, or None when every row was cancelled meanwhile.

        Chunks are at most `prefill_chunk` wide and follow the drip rule, so one long prompt among short
        ones is prefilled alone after the short ones instead of padding them all.
        """
        sequences = [row.prompt_ids + row.feed for row in rows]
        caches = [RowSlotsCache() for _ in range(self._layers)]
        starts: list[int] = []
        for sequence in sequences:
            hit = self.prompt_cache.lookup(sequence[:-1])
            start = hit.length if hit is not None else 0
            starts.append(start)
            for layer, cache in enumerate(caches):
                cache.append_rows([hit.layers[layer] if hit is not None else None], [start])
        pending = [s[k:] for s, k in zip(sequences, starts)]
        last: list[mx.array | None] = [None] * len(rows)
        while any(pending):
            if all(row.cancelled for row in rows):
                for row in rows:
                    row.cancel_now()
                return None
            width = min(self.prefill_chunk, feed_width([len(p) for p in pending if p]))
            chunk = [p[:width] for p in pending]
            logits = forward_rows(self.model.net, caches, chunk)
            mx.eval(logits, *[c.keys for c in caches], *[c.values for c in caches])
            self.counters["passes"] += 1
            for i, (row, piece) in enumerate(zip(rows, chunk)):
                if piece:
                    row.stats.passes += 1
                    self.counters["prefilled_tokens"] += len(piece)
                    pending[i] = pending[i][len(piece) :]
                    if not pending[i]:
                        last[i] = logits[i]
        for i, (row, sequence) in enumerate(zip(rows, sequences)):
            self.counters["prompt_tokens"] += len(row.prompt_ids)
            if row.remember:
                self._remember(sequence, caches, i)
            row.feed = []
            row.publish()
        return caches, last

    def _join(self, rows: list[Row], caches: list[RowSlotsCache], last: list[mx.array | None]) -> None:
        """Append prefilled rows (their caches and last logits) to the running batch."""
        for layer, cache in enumerate(caches):
            if not self._caches:
                self._caches = [RowSlotsCache() for _ in caches]
            self._caches[layer].append_rows([cache.row(i) for i in range(len(rows))], cache.lengths)
        ready = mx.stack([x for x in last if x is not None])
        self._logits = ready if self._logits is None else mx.concatenate([self._logits, ready])
        self._rows += rows

    def _remember(self, sequence: list[int], caches: list[RowSlotsCache], index: int) -> None:
        """Store row `index`'s prefilled KV state in the prompt cache (copied out of the group's arrays)."""
        if self.prompt_cache.max_bytes == 0:
            return
        layers = []
        for cache in caches:
            keys, values = cache.row(index)
            layers.append((mx.contiguous(keys), mx.contiguous(values)))
        mx.eval(*[a for kv in layers for a in kv])
        self.prompt_cache.store(sequence, layers)

    def _sample(self) -> None:
        """Draw a token for every row whose feed is empty, advance its constraint, finish rows that are done."""
        ready = [i for i, row in enumerate(self._rows) if not row.feed]
        if not ready or self._logits is None:
            return
        finished: list[int] = []
        masks: list[np.ndarray] = []
        drawing: list[int] = []
        for i in ready:
            try:
                masks.append(self._rows[i].control.mask())
                drawing.append(i)
            except Exception as error:
                self._rows[i].fail(error)
                finished.append(i)
        if drawing:
            width = int(self._logits.shape[-1])
            allowed = np.zeros((len(drawing), width), dtype=bool)
            for k, mask in enumerate(masks):
                n = min(width, mask.shape[0])
                allowed[k, :n] = mask[:n]
            logits = self._logits[mx.array(drawing, dtype=mx.int32)]
            try:
                tokens = sample_rows(logits, allowed, [self._rows[i].sampler for i in drawing])
            except Exception as error:
                for i in drawing:
                    self._rows[i].fail(error)
                tokens = []
                finished += drawing
            for i, token in zip(drawing, tokens):
                row = self._rows[i]
                row.stats.sampled_tokens += 1
                self.counters["sampled_tokens"] += 1
                try:
                    feed = row.control.advance(token)
                except Exception as error:
                    row.fail(error)
                    finished.append(i)
                    continue
                row.publish()
                if not feed or row.control.finished or row.stopped:
                    live = row.control.planner.live_count[row.control.state]
                    row.complete("eos" if not feed else "stop" if live == 0 else "length")
                    self.counters["forced_tokens"] += row.control.forced_count
                    finished.append(i)
                else:
                    row.feed = list(feed)
        self._drop(sorted(set(finished)))

    def _pass(self) -> None:
        """Feed every running row (up to the drip width) in one model pass and keep the last-position logits."""
        lengths = [len(row.feed) if row.max_feed is None else min(len(row.feed), row.max_feed) for row in self._rows]
        width = feed_width(lengths)
        feeds = []
        for row, n in zip(self._rows, lengths):
            take = min(n, width)
            feeds.append(row.feed[:take])
            row.feed = row.feed[take:]
            if take:
                row.stats.passes += 1
        logits = forward_rows(self.model.net, self._caches, feeds)
        mx.eval(logits, *[c.keys for c in self._caches], *[c.values for c in self._caches])
        self.counters["passes"] += 1
        self._logits = logits

    def _drop(self, indices: Sequence[int], cancelled: bool = False) -> None:
        """Remove rows from the running batch (and their cache slots and logits)."""
        if not indices:
            return
        gone = set(indices)
        if cancelled:
            for i in gone:
                self._rows[i].cancel_now()
        keep = [i for i in range(len(self._rows)) if i not in gone]
        self._rows = [self._rows[i] for i in keep]
        for cache in self._caches:
            cache.keep(keep)
        if self._logits is not None:
            self._logits = self._logits[mx.array(keep, dtype=mx.int32)] if keep else None
        if not self._rows:
            self._caches = []
