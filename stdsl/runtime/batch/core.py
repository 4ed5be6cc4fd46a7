"""The batch core: rows, each with its own prompt, cache slot, constraint and sampler, stepped together.

Like mlx-lm's `BatchGenerator`, the core owns no thread and no lock: whoever calls `step` (the
process's runner thread, `stdsl.runtime.runner`) is the only one that touches its rows. `insert`
queues a request, `remove` marks a row cancelled, `step` advances every row by one model pass and
returns the ids of the rows that ended in it. Each row's text events and its end go to its `RowHandle`.

A step: resume the scheduling policies whose rows have ended (`policies.py`: certified drafting
drives rows of the core rather than being one); drop cancelled rows; admit waiting rows and prefill
them together in chunks from the longest prefix the prompt cache holds (a prefix they share beyond it once);
sample every row whose logits are ready (its mask usually computed during the previous pass) and advance its
constraint by the token and its forced span (Theorem 19); then queue one model pass over every running row
(`mx.async_eval`) and, while it runs, compute the masks of the rows that will sample after it: their
constraint state after the feed is known before the pass. Masks are written by each row's controller into
one preallocated packed bitmask (a row of int32 words per running row, 32 tokens a word), uploaded once per
draw and unpacked beside the logits (`sampling.sample_packed`). An exception fails exactly the rows it
touched: a failed prefill the rows being admitted, a failed pass the rows in it, a failed mask, draw
or advance its row; the core goes on with the others. Where every running row samples and each feeds its draw
first (free text: `pipelining.py`), the step is pipelined as mlx-lm's generate loop: the draws stay on the device,
the next pass is queued feeding them, and the draws are read and the rows advanced while it runs.

Ragged feeds (drip rule): a pass over B rows of width T costs about `1 + TOKEN_COST * B * T`
single-token passes on this CPU (SmolLM2, `benchmarks/batch.py`: least squares gives 0.096). Each
step feeds at most `width` tokens per row, the width among the feed lengths that maximises tokens
fed per unit of cost; longer feeds drip the rest in later steps (their row samples again only once
its feed is empty), so one long forced literal does not pad every other row.

Control shares: a row whose mask and advance work runs past its share of the runner rests while others run
(`control_shares.py`); one past `max_control_seconds` of the runner thread's CPU in all fails.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import mlx.core as mx
import numpy as np

from stdsl.control.lookahead import Lookahead
from stdsl.errors import GenerationError
from stdsl.kernels.token_mask import bitmask_words
from stdsl.runtime.batch import pipelining
from stdsl.runtime.batch.control_shares import DEFAULT_MAX_CONTROL_SECONDS, awake, weigh
from stdsl.runtime.batch.device_masks import place_masks
from stdsl.runtime.batch.forward import forward_drawn, forward_rows
from stdsl.runtime.batch.pass_clock import PassClock, look_ahead
from stdsl.runtime.batch.pipelining import ends_with_draw, feeds_draw_first, may_end_by_automaton
from stdsl.runtime.batch.policies import Policies, Policy
from stdsl.runtime.batch.prefill import DEFAULT_PREFILL_CHUNK, Donor, feed_width, prefill_rows
from stdsl.runtime.batch.prompt_cache import PromptCache
from stdsl.runtime.batch.requests import RowRequest
from stdsl.runtime.batch.row import Row, RowHandle
from stdsl.runtime.batch.sampling import draw_packed, read_draws, sample_packed
from stdsl.runtime.option_values import integer, real, refuse
from stdsl.runtime.row_caches.layers import BatchCaches, LeafRow
from stdsl.runtime.row_caches.load_probe import cache_layout

PHASES = ("pass", "wait", "mask", "sample", "control", "prefill", "ahead", "step")
"""Seconds a core spends per phase (`BatchCore.seconds`): queueing a pass, waiting for its logits, masks,
draws, constraint advance and text, prefill, tables computed ahead for new grammars while a pass runs, and whole
steps (the rest is `step` minus the others)."""


class BatchCore:
    """Steps many requests on one model together (single-threaded: only the thread that steps it may call
    `insert` and `step`; `remove` and the read-only `busy`/`metrics` are safe from any thread).

    `max_rows` rows decode at once (others wait in order); prompts are prefilled in chunks of `prefill_chunk`
    tokens; the prompt cache keeps at most `prompt_cache_bytes` of KV state and bookkeeping; a row whose constraint
    takes more than `max_control_seconds` of CPU in mask and advance work in all fails. A model whose layers the
    engine cannot batch exactly (`row_caches`) is refused here (UnsupportedModelError), before any request.
    """

    def __init__(self, model: Any, *, max_rows: int = 8, prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
                 prompt_cache_bytes: int = 256 << 20,
                 max_control_seconds: float = DEFAULT_MAX_CONTROL_SECONDS) -> None:
        self.model = model
        self.layout = cache_layout(model.net, f"model {getattr(model, 'name', type(model).__name__)!r}")
        self.max_rows = integer("max_rows", max_rows, minimum=1)
        self.prefill_chunk = integer("prefill_chunk", prefill_chunk, minimum=1)
        self.max_control_seconds = real("max_control_seconds", max_control_seconds, "a number of seconds > 0")
        if not self.max_control_seconds > 0:
            raise refuse("max_control_seconds", max_control_seconds, "a number of seconds > 0")
        self.prompt_cache = PromptCache(integer("prompt_cache_bytes", prompt_cache_bytes, minimum=0),
                                        exact=not self.layout.trimmable)
        self._uids = itertools.count()
        self._live: dict[int, Row] = {}
        self._policies = Policies()
        self._waiting: list[Row] = []
        self._rows: list[Row] = []
        self._caches: BatchCaches | None = None
        self._logits: mx.array | None = None
        self._bitmask: np.ndarray | None = None
        """The packed masks, int32 (max_rows, words): row i holds running row i's mask where `_filled` says so."""
        self._filled: set[Row] = set()
        """The running rows whose bitmask row holds the mask they sample with next (filled during the pass)."""
        self.clock = PassClock()
        """How long passes take: new grammars' lookaheads run in what is left of one after its masks."""
        self.counters = {"passes": 0, "prompt_tokens": 0, "prefilled_tokens": 0, "sampled_tokens": 0,
                         "forced_tokens": 0, "requests": 0, "control_rests": 0, "shared_prefix_rows": 0,
                         "shared_prefix_tokens": 0}
        self.seconds = dict.fromkeys(PHASES, 0.0)

    # ------------------------------------------------------------------ the driver's side

    def insert(self, request: RowRequest, handle: RowHandle) -> int:
        """Queue a prepared request whose events go to `handle`; its id (a row fully forced ends here, passless). A
        pushdown row takes its device masks here, on the stepping thread, where the runtime picks them."""
        uid = next(self._uids)
        controller = place_masks(request.controller)
        row = Row(request.prompt_ids, controller, request.log, request.options, request.parser, handle,
                  until=request.until, max_samples=request.max_samples, remember=request.remember)
        row.feed = list(request.prefix)
        if request.fresh:
            row.ahead = Lookahead(controller)
        self.counters["requests"] += 1
        if request.log.configuration.finished:
            row.complete(eos_sampled=False)
            return uid
        self._live[uid] = row
        self._waiting.append(row)
        return uid

    def insert_policy(self, steps: Policy, handle: RowHandle) -> int:
        """Take a scheduling policy's run (`policies.py`: it drives rows of this core and ends `handle`); its id."""
        uid = next(self._uids)
        self._policies.start(uid, steps, handle)
        self.counters["requests"] += 1
        return uid

    def remove(self, uid: int) -> None:
        """Cancel row `uid`: it ends as Cancelled at the next step (a prefill stops between two chunks). Safe from
        any thread (it only sets a flag); an unknown or ended id is ignored."""
        row = self._live.get(uid)
        if row is not None:
            row.cancelled = True
        else:
            self._policies.cancel(uid)

    def remove_all(self) -> None:
        """Cancel every row and policy run (see `remove`)."""
        for row in list(self._live.values()):
            row.cancelled = True
        self._policies.cancel_all()

    @property
    def busy(self) -> bool:
        """Whether rows or policy runs are waiting or in flight (inserted and not yet reported ended by `step`)."""
        return bool(self._live or self._policies)

    def metrics(self) -> dict[str, Any]:
        """Counters of the core's life: rows active and queued, passes, tokens, prompt cache use (and prefixes shared
        by rows prefilled together: `shared_prefix_rows`, `shared_prefix_tokens`), and the seconds spent per phase
        (`seconds`, keyed by `PHASES`)."""
        return {**self.counters, "seconds": dict(self.seconds),
                "rows_active": sum(not row.handle.done for row in self._rows),
                "rows_queued": sum(not row.handle.done for row in self._waiting),
                "policy_runs": len(self._policies),
                "prompt_cache_hits": self.prompt_cache.hits,
                "prompt_cache_hit_tokens": self.prompt_cache.hit_tokens,
                "prompt_cache_entries": len(self.prompt_cache), "prompt_cache_bytes": self.prompt_cache.nbytes,
                "kv_bytes": self._caches.nbytes if self._caches is not None else 0}

    def release(self) -> None:
        """Drop the KV state held (running rows' caches and the prompt cache); call it only when not `busy`."""
        self._caches, self._logits, self._filled = None, None, set()
        self.prompt_cache.clear()

    def abandon(self) -> list[int]:
        """End every row at once as Cancelled without a pass (the process is exiting); their ids."""
        for row in list(self._live.values()):
            row.cancel_now()
        self._waiting, self._rows = [], []
        self.release()
        return self._policies.abandon() + self._collect_ended()

    def step(self) -> list[int]:
        """One step: resume policies, admit, prefill, sample, queue the next pass; the ids of the rows and policy
        runs that ended in it."""
        began = time.perf_counter()
        ended = self._policies.resume()
        try:
            self._step()
        except Exception as error:  # a fault outside the guarded phases: fail the rows in flight, keep waiting ones
            for row in self._rows:
                row.fail(error)
            self._rows, self._caches, self._logits, self._filled = [], None, None, set()
        self.seconds["step"] += time.perf_counter() - began
        return ended + self._collect_ended()

    # ------------------------------------------------------------------ one step

    def _step(self) -> None:
        for row in [r for r in self._waiting if r.cancelled]:
            self._waiting.remove(row)
            row.cancel_now()
        self._drop([i for i, r in enumerate(self._rows) if r.cancelled], cancelled=True)
        room = self.max_rows - len(self._rows)
        admitted, self._waiting = self._waiting[:room], self._waiting[room:]
        if admitted:
            self._admit(admitted)
        if self._pipelinable():
            self._sample_ahead()
            return
        self._sample()
        if any(row.feed for row in self._rows):  # none feeds when every row left is resting
            self._pass()

    def _collect_ended(self) -> list[int]:
        ended = [uid for uid, row in self._live.items() if row.handle.done]
        for uid in ended:
            del self._live[uid]
        return ended

    def _admit(self, rows: list[Row]) -> None:
        """Prefill `rows` and join them to the running batch; a failure fails them (and, while joining, the
        running rows whose caches it was rebuilding)."""
        began = time.perf_counter()
        self.clock.queued = None  # the wait for the next logits includes this prefill: no pass timing from it
        try:
            prefilled = self._prefill(rows)
        except Exception as error:
            for row in rows:
                row.fail(error)
            prefilled = None
        self.seconds["prefill"] += time.perf_counter() - began
        if prefilled is None:
            return
        try:
            self._join(rows, *prefilled)
        except Exception as error:
            for row in self._rows + rows:
                row.fail(error)
            self._rows, self._caches, self._logits, self._filled = [], None, None, set()

    def _prefill(self, rows: list[Row]) -> tuple[list[list[LeafRow]], list[mx.array]] | None:
        """Prefill new rows in caches of their own (`prefill.prefill_rows`), from running rows' keys and values where
        every layer can be cut to a prefix and the running row is held whole."""
        donors: list[Donor] = []
        caches = self._caches
        if caches is not None and self.layout.trimmable:
            for index, (row, length) in enumerate(zip(self._rows, caches.row_lengths)):
                if caches.whole(index):
                    donors.append(((row.prompt_ids + row.fed)[:length], partial(caches.row, index)))
        return prefill_rows(self.model.net, self.layout, self.prompt_cache, rows, self.prefill_chunk, self.counters,
                            donors)

    def _join(self, rows: list[Row], states: list[list[LeafRow]], last: list[mx.array]) -> None:
        """Append prefilled rows (their states and last logits) to the running batch."""
        if self._caches is None:
            self._caches = self.layout.new(bounded=True)
        self._caches.append_rows(states, [len(row.prompt_ids) + len(row.fed) for row in rows])
        ready = mx.stack(last)
        self._logits = ready if self._logits is None else mx.concatenate([self._logits, ready])
        self._rows += rows
        words = bitmask_words(int(ready.shape[-1]))
        if self._bitmask is None or self._bitmask.shape[1] != words:
            self._bitmask = np.zeros((self.max_rows, words), dtype=np.int32)

    def _remember(self, sequence: list[int], caches: BatchCaches | None, index: int) -> None:
        """Store row `index`'s KV state for `sequence` in the prompt cache (it copies out what it keeps): a finished
        row's prompt and every token fed after it, so the conversation's next turn, which repeats that output,
        prefills only what is new."""
        assert caches is not None
        self.prompt_cache.store(sequence, caches.row(index))

    def _mask(self, index: int) -> None:
        """Running row `index`'s admissible tokens in its bitmask row: filled during the last pass, else here."""
        row = self._rows[index]
        if row in self._filled:
            self._filled.discard(row)
            return
        began = time.perf_counter()
        try:
            self._fill(index)
        finally:
            self.seconds["mask"] += time.perf_counter() - began

    def _fill(self, index: int) -> None:
        """Write running row `index`'s mask into its bitmask row (its controller's packed words), timed as its
        control work."""
        row = self._rows[index]
        began = row.control_clock()
        try:
            assert self._bitmask is not None
            row.controller.fill_row(row.log, self._bitmask[index])
        finally:
            row.charge_control(began)

    def _awake(self, ready: list[int]) -> list[int]:
        """The ready rows that may sample now (`control_shares.awake`)."""
        assert self._logits is not None
        return awake(self._rows, self._logits, ready)

    def _weigh(self, drawing: list[int], finished: list[int]) -> None:
        """Rest or fail drawing rows past their control share (`control_shares.weigh`)."""
        self.counters["control_rests"] += weigh(self._rows, drawing, finished, self.max_control_seconds)

    def _sample(self) -> None:
        """Draw a token for every row whose feed is empty, advance its constraint, finish rows that are done."""
        ready = [i for i, row in enumerate(self._rows) if not row.feed]
        if not ready or self._logits is None:
            return
        began = time.perf_counter()
        try:
            mx.eval(self._logits)
        finally:
            self.seconds["wait"] += time.perf_counter() - began
            self.clock.waited(began)
        ready = self._awake(ready)
        finished: list[int] = []
        drawing: list[int] = []
        for i in ready:
            try:
                self._mask(i)
                drawing.append(i)
            except Exception as error:
                self._rows[i].fail(error)
                finished.append(i)
        began = time.perf_counter()
        tokens = self._draw(drawing, finished)
        self.seconds["sample"] += time.perf_counter() - began
        began = time.perf_counter()
        for i, token in zip(drawing, tokens):
            if self._advance(i, token):
                finished.append(i)
        self.seconds["control"] += time.perf_counter() - began
        self._weigh(drawing, finished)
        self._drop(sorted(set(finished)))

    def _draw(self, drawing: list[int], finished: list[int]) -> list[int]:
        """One token per drawing row under its bitmask row; a failed draw fails those rows (added to `finished`) and
        draws nothing."""
        if not drawing or self._logits is None or self._bitmask is None:
            return []
        everyone = drawing == list(range(len(self._rows)))
        words = self._bitmask[: len(drawing)] if everyone else self._bitmask[drawing]
        rows = [self._rows[i] for i in drawing]
        if any(row.held is not None for row in rows):
            logits = mx.stack([self._logits[i] if row.held is None else row.held for i, row in zip(drawing, rows)])
            for row in rows:
                row.held = None
        else:
            logits = self._logits[mx.array(drawing, dtype=mx.int32)]
        try:
            return sample_packed(logits, words, [self._rows[i].sampler for i in drawing])
        except Exception as error:
            for i in drawing:
                self._rows[i].fail(error)
            finished += drawing
            return []

    def _advance(self, index: int, token: int) -> bool:
        """Take `token` into running row `index`'s constraint and publish its text; True when the row has ended (a
        finished row's sequence goes to the prompt cache first, so its caller's next turn finds it, unless its
        sliding-window layers have forgotten their oldest positions)."""
        row = self._rows[index]
        row.stats.sampled_tokens += 1
        self.counters["sampled_tokens"] += 1
        began = row.control_clock()
        try:
            move = row.controller.taken(row.log, token)
            row.log = row.log.apply(move)
            feed = move.feed
            row.charge_control(began)
            ended = not feed or row.log.configuration.finished or row.stopped
            if ended and row.remember and row.fed and self._caches is not None and self._caches.whole(index):
                self._remember(row.prompt_ids + row.fed, self._caches, index)
        except Exception as error:
            row.fail(error)
            return True
        row.publish()
        if ended:
            row.complete(eos_sampled=not feed)
            self.counters["forced_tokens"] += row.log.forced
            return True
        row.feed = list(feed)
        return False

    def _pass(self) -> None:
        """Queue one model pass feeding every running row (up to the drip width), then compute the masks of the
        rows that sample after it while it runs; a pass that fails fails the rows in it."""
        began = time.perf_counter()
        lengths = [len(row.feed) if row.max_feed is None else min(len(row.feed), row.max_feed) for row in self._rows]
        width = feed_width(lengths)
        feeds = []
        for row, n in zip(self._rows, lengths):
            take = min(n, width)
            feeds.append(row.feed[:take])
            row.fed += row.feed[:take]
            row.feed = row.feed[take:]
            if take:
                row.stats.passes += 1
        try:
            assert self._caches is not None
            logits = forward_rows(self.model.net, self._caches, feeds, [bool(f) and not row.feed
                                                                        for f, row in zip(feeds, self._rows)])
            mx.async_eval(logits, *self._caches.arrays())
        except Exception as error:
            for row in self._rows:
                row.fail(error)
            self._rows, self._caches, self._logits, self._filled = [], None, None, set()
            return
        finally:
            self.seconds["pass"] += time.perf_counter() - began
        self.counters["passes"] += 1
        self._logits = logits
        self._fill_during_pass(time.perf_counter())

    def _fill_during_pass(self, queued: float) -> None:
        """While the pass queued at `queued` runs, compute the masks of the rows that sample after it, then the
        lookaheads of new grammars."""
        began = now = time.perf_counter()
        for i, row in enumerate(self._rows):
            if not row.feed and not row.cancelled and row.rest_until <= now:
                try:
                    self._fill(i)
                except Exception:  # computed again at the draw, where its error fails the row
                    continue
                self._filled.add(row)
        self.seconds["mask"] += time.perf_counter() - began
        self.clock.queued = queued
        self.seconds["ahead"] += look_ahead(self._rows, self.clock.deadline())

    def _pipelinable(self) -> bool:
        """Whether this step may queue the next pass before reading its draws (`pipelining.py`): every running row
        samples now (nothing left to feed, awake), feeds its draw first and cannot finish its output by its draw."""
        now = time.perf_counter()
        return pipelining.PIPELINED and self._logits is not None and bool(self._rows) and all(
            not row.feed and row.held is None and row.rest_until <= now and feeds_draw_first(row.controller)
            and not may_end_by_automaton(row) for row in self._rows)

    def _sample_ahead(self) -> None:
        """A pipelined step (`pipelining.py`): draw every row's token on the device, queue the next pass feeding each
        row its draw (none to a row that ends with it), then read the draws, advance the rows and compute their next
        masks while that pass runs. A row left with forced tokens after its draw feeds them in the next step. The
        draws are evaluated on their own, before the pass is queued: MLX signals one event per `async_eval`, so draws
        queued with the pass would be read only once the whole pass is done, and the device would wait for the host's
        work after it."""
        failed = []
        for i, row in enumerate(self._rows):
            try:
                self._mask(i)
            except Exception as error:
                row.fail(error)
                failed.append(i)
        self._drop(failed)
        rows, logits = self._rows, self._logits
        if not rows or logits is None or self._bitmask is None or self._caches is None:
            return
        words = self._bitmask[: len(rows)]
        began = time.perf_counter()
        try:
            tokens, keys = draw_packed(logits, words, [row.sampler for row in rows])
            mx.async_eval(tokens, *keys)
        except Exception as error:
            for row in rows:
                row.fail(error)
            self._drop(range(len(rows)))
            return
        finally:
            self.seconds["sample"] += time.perf_counter() - began
        fed = [not ends_with_draw(row) for row in rows]
        began = queued = time.perf_counter()
        try:
            if any(fed):
                self._logits = forward_drawn(self.model.net, self._caches, tokens, fed)
                mx.async_eval(self._logits, *self._caches.arrays())
                self.counters["passes"] += 1
                queued = time.perf_counter()
                self.seconds["pass"] += queued - began
            mx.eval(tokens, *keys)
            self.seconds["wait"] += time.perf_counter() - queued
            self.clock.waited(queued)
            drawn = read_draws(tokens, words)
        except Exception as error:
            for row in rows:
                row.fail(error)
            self._rows, self._caches, self._logits, self._filled = [], None, None, set()
            return
        began = time.perf_counter()
        finished = []
        for i, (row, token, fed_token) in enumerate(zip(rows, drawn, fed)):
            if not self._take(i, token, fed_token):
                finished.append(i)
        self.seconds["control"] += time.perf_counter() - began
        self._weigh(list(range(len(rows))), finished)
        self._drop(finished)
        if any(fed):
            self._fill_during_pass(queued)

    def _take(self, index: int, token: int, fed: bool) -> bool:
        """Advance running row `index` by `token`, drawn in a pipelined step that fed it the token (`fed`) or nothing;
        False when the row has ended."""
        row = self._rows[index]
        if fed:
            row.fed.append(token)
        if self._advance(index, token):
            return False
        if fed:
            if row.feed[:1] != [token]:
                row.fail(GenerationError(f"token {token} was fed ahead of its draw's feed {row.feed}"))
                return False
            row.stats.passes += 1
            row.feed = row.feed[1:]
        return True

    def _drop(self, indices: Sequence[int], cancelled: bool = False) -> None:
        """Remove rows from the running batch (and their cache slots, logits and bitmask rows, which close up)."""
        if not indices:
            return
        gone = set(indices)
        for i in gone:
            row = self._rows[i]
            self._filled.discard(row)
            if cancelled:
                row.cancel_now()
        keep = [i for i in range(len(self._rows)) if i not in gone]
        self._rows = [self._rows[i] for i in keep]
        if self._bitmask is not None and keep:
            self._bitmask[: len(keep)] = self._bitmask[keep]
        if self._caches is not None:
            self._caches.keep(keep)
        if self._logits is not None:
            self._logits = self._logits[mx.array(keep, dtype=mx.int32)] if keep else None
        if not self._rows:
            self._caches = None
