"""One request in the batch engine: its prompt, controller and log, sampler, feed queue, text events and handle.

A row is owned by the engine's decode thread; the caller only holds its `RowHandle`, which
yields `Event`s (newly decided text, the finished `Generation` last) and can cancel the row.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable
from typing import Any

from stdsl.compiler.special_tokens import visible_bytes
from stdsl.control.controller import Controller
from stdsl.control.finish import finished_generation
from stdsl.control.log import Log
from stdsl.control.lookahead import Lookahead
from stdsl.errors import Cancelled, GenerationError, StdslError
from stdsl.generation import Stats
from stdsl.runtime.batch.handle import Event, RowHandle
from stdsl.runtime.batch.sampling import RowSampler
from stdsl.runtime.options import DecodeOptions


class Row:
    """The engine's side of a request: everything it needs between steps.

    `feed` holds the tokens still to be fed before the next sample (a sampled token and its
    forced span; in drip mode the rest waits here); `cache_index` is its slot in the running batch. Its
    constraint is its `controller` and `log`: every move the controller makes is applied to the log.
    """

    def __init__(self, prompt_ids: list[int], controller: Controller, log: Log, options: DecodeOptions,
                 parser: Callable[[str], Any] | None, handle: RowHandle,
                 until: Callable[[Log], bool] | None = None, max_samples: int | None = None,
                 remember: bool = True) -> None:
        self.prompt_ids = prompt_ids
        self.remember = remember
        self.until = until
        self.max_samples = max_samples
        self.controller = controller
        self.log = log
        self.options = options
        self.parser = parser
        self.handle = handle
        self.sampler = RowSampler(options.sampling)
        self.began = time.perf_counter()
        self.stats = Stats(prompt_tokens=len(prompt_ids))
        self.feed: list[int] = []
        self.fed: list[int] = []
        """Tokens after the prompt that the row's KV cache holds (its prefix, then each pass's feed)."""
        self.cancelled = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._thought_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._thought_shown = 0
        self._reasoning = ""
        self._shown_bytes = 0
        self._text = ""
        self._sent = 0
        self._stop_at: int | None = None
        self.control_seconds = 0.0
        """Wall-clock seconds of the runner this row's mask and advance work took in all (its control share)."""
        self.control_cpu_seconds = 0.0
        """The runner thread's CPU seconds in that work (`BatchCore` bounds it: a loaded machine fails no row)."""
        self.control_excused = 0.0
        """Seconds of that work past the row's share already paid for by resting (or taken while alone)."""
        self.ahead: Lookahead | None = None
        """Warms the tables this row reads next while passes run, where its grammar is new (`BatchCore`)."""
        self.rest_until = 0.0
        """While `perf_counter()` is below this the row does not sample: it ran over its share of control work."""
        self.held: Any = None
        """The row's next-token logits kept while it rests (later passes feed it nothing and give it garbage)."""

    @property
    def max_feed(self) -> int | None:
        """Most tokens this row feeds in one pass (1 in reference mode)."""
        return 1 if self.options.reference else None

    def _answer_bytes(self, final: bool = False) -> bytes:
        """The answer's decided bytes (the whole output when it has no thinking block), after sending the
        thinking text decided since the last event."""
        decided = self.log.decided
        policy = self.controller.reasoning
        if policy is None:
            return decided
        thought = visible_bytes(policy.region.thinking(decided, final))
        piece = self._thought_decoder.decode(thought[self._thought_shown:], final=final)
        self._thought_shown = len(thought)
        if piece:
            self._reasoning += piece
            self.handle._emit(Event("", reasoning=piece))
        return policy.region.answer(decided)

    @staticmethod
    def control_clock() -> tuple[float, float]:
        """The two clocks a row's control work is timed on (wall, thread CPU), read before it (`charge_control`)."""
        return time.perf_counter(), time.thread_time()

    def charge_control(self, began: tuple[float, float]) -> None:
        """Add the control work since `began` (`control_clock`) to this row's wall and CPU totals."""
        self.control_seconds += time.perf_counter() - began[0]
        self.control_cpu_seconds += time.thread_time() - began[1]

    @property
    def _has_block(self) -> bool:
        """Whether the output has a thinking block."""
        policy = self.controller.reasoning
        return policy is not None and policy.region.has_block

    def publish(self) -> None:
        """Send the text decided since the last event (held back where it could still start a stop string)."""
        decided = self._answer_bytes()
        self._text += self._decoder.decode(visible_bytes(decided[self._shown_bytes :]))
        self._shown_bytes = len(decided)
        stops = self.options.stop
        if stops and self._stop_at is None:
            hits = [i for i in (self._text.find(s) for s in stops) if i >= 0]
            if hits:
                self._stop_at = min(hits)
        end = len(self._text) if self._stop_at is None else self._stop_at
        if stops and self._stop_at is None:
            end -= max(len(s) for s in stops) - 1
        if end > self._sent:
            self.handle._emit(Event(self._text[self._sent : end]))
            self._sent = end

    @property
    def stopped(self) -> bool:
        """Whether the row must end here: a stop string appeared, or a draft reached its block's end or draw cap."""
        if self._stop_at is not None:
            return True
        if self.until is not None and self.until(self.log):
            return True
        return self.max_samples is not None and self.stats.sampled_tokens >= self.max_samples

    @property
    def partial(self) -> bool:
        """Whether this row may end outside an accepting state (a draft)."""
        return self.until is not None or self.max_samples is not None

    def complete(self, eos_sampled: bool) -> None:
        """Finish the row (`eos_sampled`: the model drew eos): flush the text, build its `Generation` with the
        controller's finish reason, and hand it to the caller."""
        controller, log = self.controller, self.log
        answer = self._answer_bytes(final=True)
        self._text += self._decoder.decode(visible_bytes(answer[self._shown_bytes :]), final=True)
        self._shown_bytes = len(answer)
        if self._stop_at is None and not controller.accepting(log.configuration) and not self.partial:
            self.fail(GenerationError("decoding ended outside an accepting state"))
            return
        text = self._text if self._stop_at is None else self._text[: self._stop_at]
        if len(text) > self._sent:
            self.handle._emit(Event(text[self._sent :]))
            self._sent = len(text)
        self.stats.seconds = time.perf_counter() - self.began
        data = answer if self._stop_at is None else text.encode("utf-8")
        reason = controller.finish_reason(log.configuration, eos_sampled, stopped=self._stop_at is not None)
        result = finished_generation(controller, log, self.stats, reason, self.parser, data=data, text=text,
                                     reasoning=self._reasoning if self._has_block else None,
                                     partial=self.partial or self._stop_at is not None)
        self.handle.log = log
        self.handle._emit(Event("", result))
        self.handle._finish(result, None)

    def fail(self, error: BaseException) -> None:
        """End the row with `error` (wrapped in GenerationError unless it is already one of ours)."""
        if not isinstance(error, StdslError):
            wrapped = GenerationError(f"internal error while decoding: {type(error).__name__}: {error}")
            wrapped.__cause__ = error
            error = wrapped
        self.handle._finish(None, error)

    def cancel_now(self) -> None:
        """End the row as cancelled."""
        self.handle._finish(None, Cancelled("the request was cancelled before it finished"))
