"""Certified block-parallel decoding (Theorem 23, D.5): draft independent blocks at once, then verify in one pass.

A round: (1) a wave drafts, as rows of the batch engine, the block the certified output is in
(continued from its exact configuration), every later block without a draft (from its entry, the
literal before it as context) and every later block whose draft failed last round (from its first
failing position, with the model's choice there). (2) The drafts are assembled into one document
and replayed through the constraint under the forced-span policy, recording the configuration
before every sampled position. (3) One pass over the replayed tokens, on the cache of the certified
prefix, gives the logits at every position; a position is accepted iff its token is the masked
argmax there. The accepted prefix, extended by the argmax at the first rejected position (or after
the last), is certified. Every round certifies at least one sampled token, so greedy outputs equal
sequential greedy decoding (in exact arithmetic); after `MAX_ROUNDS` the rest decodes sequentially.

A pushdown constraint's blocks lie between its cut configurations (`compiler.pushdown.cut_configurations`): states are
configuration ids (state and stack), so a later block is drafted from its exact configuration and the
replay steps the same machine. Sampling at temperature > 0 is not certified (the test is for the argmax):
such requests and languages with fewer than two blocks decode sequentially, as `generate` does.

With `parallel_fields="auto"` each round is forecast first (`forecast.py`): where its wave and certification
pass are not predicted cheaper, on this machine's measured pass cost (`pass_cost.py`), than decoding the same
progress one token per pass, the rest of the output decodes sequentially (from the start when it is the first
round, as an ordinary engine row).

The decoder is a scheduling policy of the engine's core (`batch/policies.py`), not a second engine: it owns no
thread; the core resumes it on the runner thread once a wave's rows have ended, and its certification pass runs
there between two steps.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stdsl.caches import CacheKind
from stdsl.control.controller import MAX_MASKS
from stdsl.control.finish import finished_generation
from stdsl.control.log import Log
from stdsl.control.tables import controller_of, machine_of
from stdsl.errors import GenerationError, StdslError
from stdsl.generation import Generation, Stats
from stdsl.runtime.batch.requests import (
    RowRequest,
    compiled_constraint,
    prepare_request,
    prompt_tokens,
    within_context,
)
from stdsl.runtime.batch.row import Event, RowHandle
from stdsl.runtime.certified.blocks import END, Block, BlockWatch, Language, block_plan
from stdsl.runtime.certified.document import Draft, Replay, assemble, replay_document
from stdsl.runtime.certified.forecast import (
    Acceptance,
    KeptDraft,
    acceptance_for,
    later_agreement,
    remaining_forecast,
    worth_drafting,
)
from stdsl.runtime.certified.forks import masked_argmax, start_at
from stdsl.runtime.certified.prefix import CertifiedPrefix
from stdsl.runtime.engine import Engine
from stdsl.runtime.options import DecodeOptions
from stdsl.runtime.pass_cost import PassCost, pass_cost

FIRST_WAVE_SAMPLES = 24
WAVE_ROWS = 4
CONTINUATION_SAMPLES = 96
MAX_ROUNDS = 24


@dataclass
class _Job:
    """One wave row: which block it drafts, the row request, how to read its result back into a Draft."""

    block: int
    request: RowRequest
    watch: BlockWatch
    origin: int
    base: list[int]
    frontier: bool = False


Waits = Generator[Sequence[RowHandle], None, None]
"""A piece of the decoder's run: it yields the draft rows' handles it waits for (`batch/policies.py`)."""


class CertifiedDecoder:
    """One request decoded by certified block-parallel rounds: a scheduling policy of the engine's core, whose
    run (`run`) is resumed on the runner thread and whose drafts are rows of the same batch."""

    def __init__(self, engine: Engine, prompt_ids: list[int], compiled: Any, blocks: list[Block],
                 options: DecodeOptions, cost: PassCost | None = None) -> None:
        """`cost`: forecast every round on this pass cost and draft only where it pays (`parallel_fields="auto"`)."""
        self.engine = engine
        self.prompt_ids = prompt_ids
        self.blocks = blocks
        self.options = options
        self.handle = RowHandle(lambda: None)
        """The request's handle, given to `run`."""
        self.parser = getattr(compiled, "parse", None)
        self.controller = controller_of(compiled, engine.model.tokenizer, max_tokens=options.max_tokens,
                                        healing=options.healing, masks=MAX_MASKS)
        """The controller of the certified output, its drafts and its replay (its masks memoized across rounds)."""
        self.fresh = len(self.controller.rows) == 0
        """Whether the grammar's rows were all still to compute (its draft rows warm them ahead, `RowRequest`)."""
        self.log = self.controller.started()
        """The certified output's log."""
        self.pending = prompt_ids + list(self.log.tokens)
        self.automaton: Language = self.controller.machine
        self.vocab = self.controller.vocab
        self.stats = Stats(prompt_tokens=len(prompt_ids))
        self.rounds = 0
        self.wave_rows = WAVE_ROWS
        self.drafts: dict[int, Draft] = {}
        self.continuations: dict[int, _Job] = {}
        self.frontier_draft: Draft | None = None
        self.eos_sampled = False
        """Whether the certified output ended on a drawn eos (the controller's finish rule reads it)."""
        self.began = time.perf_counter()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._shown = 0
        self.cost = cost
        self.acceptance: Acceptance = acceptance_for(engine.model)

    # ------------------------------------------------------------------ driver

    def run(self, handle: RowHandle) -> Waits:
        """Decode to the end, publishing certified text to `handle` as it grows; it gets the result or the error.
        Runs on the runner thread: model work goes through `engine.call` (at once there), and it yields the draft
        rows it waits for."""
        self.handle = handle
        try:
            if self.log.configuration.finished:
                self._complete()
                return
            self.prefix = self.engine.call(lambda: CertifiedPrefix(self.engine, self.prompt_ids))
            self.stats.passes += 1
            self.pending = self.pending[len(self.prompt_ids) :]
            while not self.log.configuration.finished:
                if self.rounds >= MAX_ROUNDS or not (yield from self._round()):
                    yield from self._finish_sequentially()
                    return
                self._publish()
            self._complete()
        except Exception as error:  # handed to the caller through the handle
            self.handle._finish(None, error if isinstance(error, StdslError) else _internal(error))

    def _round(self) -> Generator[Sequence[RowHandle], None, bool]:
        """Draft, certify and commit one round; False (nothing done) where the forecast says it does not pay."""
        if not self.worth_drafting():
            return False
        frontier, upcoming = self._frontier()
        jobs = self._jobs(frontier, upcoming)
        self.rounds += 1
        yield from self._draft(jobs)
        document = assemble(self.automaton, self.blocks, bytes(self.log.decided), self.frontier_draft,
                            self.drafts, frontier, upcoming)
        replay = replay_document(self.controller, self.log.configuration, len(self.log.data),
                                 self.pending, document, self.engine.model.tokenizer)
        starts = document.starts
        feed = replay.feed
        before = self.prefix.last
        logits = self.engine.call(lambda: self.prefix.feed(feed)) if feed else None
        if feed:
            self.stats.passes += 1

        def scores(at: int) -> np.ndarray:
            return logits[at] if logits is not None and at >= 0 else before

        rejected, choice = len(replay.steps), -1
        for k, (at, allowed, token, _) in enumerate(replay.steps):
            best = masked_argmax(scores(at), allowed)
            if best != token:
                rejected, choice = k, best
                break
        self._observe(replay, scores, jobs[0].block if jobs else frontier)
        self.stats.sampled_tokens += min(rejected + 1, len(replay.steps))
        self._plan_continuations(replay, rejected, scores, starts)
        if rejected < len(replay.steps):
            keep = replay.steps[rejected][0] + 1

            def trim_and_share() -> int:
                passes = self.prefix.trim(len(feed) - keep, scores(keep - 1))
                self.prefix.share()
                return passes

            self.stats.passes += self.engine.call(trim_and_share)
            for _, _, token, _ in replay.steps[:rejected]:
                self._advance(token)
        else:
            for _, _, token, _ in replay.steps:
                self._advance(token)
            if self.log.configuration.finished:
                last = replay.steps[-1][2] if replay.steps else -1
                self.eos_sampled = last >= 0 and bool(self.vocab.eos[last])
                return True
            choice = masked_argmax(scores(len(feed) - 1), self.controller.row_mask(self.log))
            self.stats.sampled_tokens += 1
            if feed:
                self.engine.call(self.prefix.share)
        self.pending = []
        self._take(choice)
        return True

    def _observe(self, replay: Replay, scores: Any, lead: int | None) -> None:
        """Tell the acceptance estimate how many of the later blocks' drafted tokens the certification agreed with."""
        steps = replay.steps
        agreed, drafted = later_agreement([step[3] for step in steps], lead,
                                          lambda k: masked_argmax(scores(steps[k][0]), steps[k][1]) == steps[k][2])
        if drafted:
            self.acceptance.observe(agreed, drafted)

    def _advance(self, token: int) -> tuple[int, ...]:
        """Move the certified output's log on `token`; the tokens to feed."""
        move = self.controller.taken(self.log, token)
        self.log = self.log.apply(move)
        return move.feed

    def _take(self, token: int) -> None:
        """Commit the certified argmax `token` at the current configuration."""
        feed = self._advance(token)
        if not feed:
            self.eos_sampled = True
            return
        self.pending = list(feed)
        entered = self._visits(bytes(self.log.decided))
        for index in list(self.drafts):
            if self.blocks[index].entry in entered:
                del self.drafts[index]
        for index in list(self.continuations):
            if self.blocks[index].entry in entered:
                del self.continuations[index]

    def _visits(self, data: bytes) -> dict[int, int]:
        """Offset of the first visit of each state on the run over `data` (cut states are visited once)."""
        state, seen = 0, {0: 0}
        for offset, byte in enumerate(data):
            state = self.automaton.next_state(state, byte)
            if state < 0:
                break
            seen.setdefault(state, offset + 1)
        return seen

    def _frontier(self) -> tuple[int | None, int]:
        """The block the certified output is inside (None: in a literal) and the first block not yet entered."""
        visited = self._visits(bytes(self.log.decided))
        entered = [i for i, b in enumerate(self.blocks) if b.entry in visited]
        if entered:
            last = entered[-1]
            exit_state = self.blocks[last].exit
            if exit_state == END or exit_state not in visited:
                return last, last + 1
            return None, last + 1
        return None, 0

    # ------------------------------------------------------------------ wave

    def _jobs(self, frontier: int | None, upcoming: int) -> list[_Job]:
        """The rows of the next wave: the frontier block, later blocks without drafts, and continuations.

        The wave lasts as long as its lead row (the frontier block, else the next block): the other
        rows stop when it ends, keep what they drafted, and resume from there in the next wave.
        """
        options = DecodeOptions.of(max_tokens=None, healing=self.options.healing)
        jobs: list[_Job] = []
        if frontier is not None:
            log = self.log.recording()
            data = bytes(log.decided)
            watch = BlockWatch(self.automaton, self.blocks[frontier], len(data), self.automaton.step(0, data))
            request = RowRequest(self.prompt_ids + list(log.tokens), self.controller, log, [], options, None,
                                 remember=False, fresh=self.fresh)
            jobs.append(_Job(frontier, request, watch, 0, self.prompt_ids, frontier=True))
        for index in range(upcoming, len(self.blocks)):
            if len(jobs) >= self.wave_rows:
                break
            if index in self.continuations:
                jobs.append(self.continuations.pop(index))
            elif index not in self.drafts:
                block = self.blocks[index]
                controller, log, forced = start_at(self.controller, self.log, block.entry)
                context = self.prompt_ids + self.engine.model.tokenizer.encode(
                    block.literal.decode("utf-8", errors="replace"))
                request = RowRequest(context, controller, log, forced, options, None, remember=False,
                                     fresh=self.fresh)
                jobs.append(_Job(index, request, BlockWatch(self.automaton, block), 0, context))
        left = self.log.configuration.remaining
        for k, job in enumerate(jobs):
            cap = CONTINUATION_SAMPLES if k == 0 or job.origin else FIRST_WAVE_SAMPLES
            job.request.max_samples = cap if left is None else max(1, min(cap, left))
        return jobs

    def worth_drafting(self) -> bool:
        """Whether certified rounds of the fields left are forecast cheaper than sequential decoding on `cost`
        (True without a cost to forecast on; `forecast.py`)."""
        if self.cost is None:
            return True
        if self.log.configuration.finished:
            return False
        frontier, upcoming = self._frontier()
        decided = bytes(self.log.decided)
        lead_done = len(decided) - self._visits(decided)[self.blocks[frontier].entry] if frontier is not None else 0
        kept = {index: KeptDraft(len(draft.tokens), len(draft.data)) for index, draft in self.drafts.items()}
        first = frontier if frontier is not None else upcoming
        forecast = remaining_forecast(self.automaton, self.blocks, first, lead_done, kept, self.wave_rows)
        return worth_drafting(forecast, self.cost, self.acceptance.rate)

    def _draft(self, jobs: list[_Job]) -> Waits:
        """Run `jobs` as engine rows of one wave (the first is the lead) and keep what each drafted."""
        self.frontier_draft = None
        if not jobs:
            return
        lead: list[RowHandle] = []
        for k, job in enumerate(jobs):
            job.request.until = _until(job.watch, None if k == 0 else lead)
        handles = [self.engine.submit_request(jobs[0].request)]
        lead.append(handles[0])
        handles += [self.engine.submit_request(job.request) for job in jobs[1:]]
        yield handles
        passes = 0
        for job, handle in zip(jobs, handles):
            result = handle.result()
            passes = max(passes, result.stats.passes)
            job.watch.done(result.data)
            assert handle.log is not None  # a completed row's
            self._keep(job, result, handle.log)
        self.stats.passes += passes

    def _keep(self, job: _Job, result: Generation, log: Log) -> None:
        """Record a wave row's draft (`log`: the row's when it ended); an unfinished one is resumed from where it
        stopped in the next wave."""
        offsets = np.cumsum([0] + [len(self.vocab.token_bytes[t] or b"") for t in result.tokens])
        end = job.watch.exit_offset
        data = result.data if end is None else result.data[:end]
        complete = end is not None or (job.watch.block.exit == END and result.finish_reason in ("eos", "stop"))
        tokens = {int(o) - job.origin: t for o, t in zip(offsets[:-1], result.tokens) if o >= job.origin}
        tokens.update({o - job.origin: t for o, t in log.sampled_tokens().items() if o >= job.origin})
        draft = Draft(data[job.origin :], tokens, complete)
        if job.frontier:
            self.frontier_draft = draft
            return
        self.drafts[job.block] = draft
        if not complete and not log.configuration.finished:
            resumed = log.recording()
            request = RowRequest(job.base + list(resumed.tokens), job.request.controller, resumed, [],
                                 job.request.options, None, remember=False, fresh=self.fresh)
            self.continuations[job.block] = _Job(job.block, request, job.watch, job.origin, job.base)

    def _plan_continuations(self, replay: Replay, rejected: int, scores: Any, starts: dict[int, int]) -> None:
        """Continue each later block whose draft fails after the first rejection from its first failure, next wave."""
        failed_block = replay.steps[rejected][3] if rejected < len(replay.steps) else None
        seen: set[int] = set()
        options = DecodeOptions.of(max_tokens=None, healing=self.options.healing)
        log = self.log
        for k, (at, allowed, token, block) in enumerate(replay.steps):
            if k > rejected and block is not None and block != failed_block and block not in seen:
                best = masked_argmax(scores(at), allowed)
                if best != token and block in starts:
                    seen.add(block)
                    forked = log.recording()
                    move = self.controller.taken(forked, best)
                    forked, feed = forked.apply(move), move.feed
                    if feed and not forked.configuration.finished:
                        origin = starts[block]
                        watch = BlockWatch(self.automaton, self.blocks[block], len(forked.decided),
                                           self.automaton.step(0, bytes(forked.decided)))
                        sequence = self.prompt_ids + list(forked.tokens[: len(forked.tokens) - len(feed)])
                        request = RowRequest(sequence, self.controller, forked, list(feed), options, None,
                                             remember=False, fresh=self.fresh)
                        self.continuations[block] = _Job(block, request, watch, origin, self.prompt_ids)
                        self.drafts.pop(block, None)
            log = log.apply(self.controller.taken(log, token))

    # ------------------------------------------------------------------ results

    def _publish(self) -> None:
        decided = bytes(self.log.decided)
        piece = self._decoder.decode(decided[self._shown :])
        self._shown = len(decided)
        if piece:
            self.handle._emit(Event(piece))

    def _complete(self) -> None:
        if not self.controller.accepting(self.log.configuration):
            raise GenerationError("decoding ended outside an accepting state")
        self._publish()
        tail = self._decoder.decode(b"", final=True)
        if tail:
            self.handle._emit(Event(tail))
        self.stats.rounds = self.rounds
        self.stats.seconds = time.perf_counter() - self.began
        reason = self.controller.finish_reason(self.log.configuration, self.eos_sampled)
        result = finished_generation(self.controller, self.log, self.stats, reason, self.parser)
        self.handle._emit(Event("", result))
        self.handle._finish(result, None)

    def _finish_sequentially(self) -> Waits:
        """After `MAX_ROUNDS`, decode the rest as one ordinary engine row from the certified state."""
        tokens = list(self.log.tokens)
        fed = self.prompt_ids + tokens[: len(tokens) - len(self.pending)]
        request = RowRequest(fed, self.controller, self.log, list(self.pending), self.options, self.parser,
                             fresh=self.fresh)
        rest = self.engine.submit_request(request)
        yield [rest]
        result = rest.result()
        result.stats.passes += self.stats.passes
        result.stats.prompt_tokens = len(self.prompt_ids)
        result.stats.sampled_tokens += self.stats.sampled_tokens
        result.stats.rounds = self.rounds
        self.handle._emit(Event("", result))
        self.handle._finish(result, None)


def _until(watch: BlockWatch, lead: list[RowHandle] | None) -> Any:
    """A draft row's stop rule: its block's exit reached, or (for a row that is not the lead) the lead row done."""
    if lead is None:
        return lambda log: watch.done(bytes(log.decided))
    return lambda log: watch.done(bytes(log.decided)) or (bool(lead) and lead[0].done)


def _internal(error: BaseException) -> GenerationError:
    wrapped = GenerationError(f"internal error in certified decoding: {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


_BLOCK_PLANS: CacheKind[list[Block]] = CacheKind("certified block plans")


def submit_certified(engine: Engine, prompt: Any, constraint: Any, options: DecodeOptions) -> RowHandle:
    """Decode with certified parallel fields where exact (greedy, a DFA or pushdown with two or more blocks and no
    special tokens; on every served model, recurrent states included: `prefix.py`), else as usual; with
    `parallel_fields="auto"`, only where the first round is forecast to pay on the model's pass cost (measured at
    first use), and each later round likewise."""
    compiled = compiled_constraint(constraint, engine.model.tokenizer, options.strict)
    machine = machine_of(compiled)
    specials = bool(getattr(compiled, "special_tokens", ()))
    plain = not options.sampling.greedy or specials
    if plain:
        blocks = []
    else:
        blocks = _BLOCK_PLANS.get((machine,), lambda: block_plan(machine))
    if len(blocks) < 2:
        return engine.submit_request(prepare_request(engine.model, prompt, constraint, options))
    cost = pass_cost(engine.model, engine.call) if options.parallel_fields == "auto" else None
    ids = prompt_tokens(engine.model, prompt, options.chat)
    options = within_context(engine.model, len(ids), options)
    decoder = CertifiedDecoder(engine, ids, compiled, blocks, options, cost)
    if not decoder.worth_drafting():
        return engine.submit_request(prepare_request(engine.model, prompt, constraint, options))
    return engine.submit_policy(decoder.run)
