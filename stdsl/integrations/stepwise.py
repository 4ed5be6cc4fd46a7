"""One constrained output driven one token per engine step (transformers' and vLLM's generate loops).

stdsl's own loop feeds a sampled token and its forced span in one pass; an engine's loop appends
exactly one token per step, so here the controller's plan is queued and spent a token at a time:
after a forced prefix or span the mask is the singleton of the next forced token, and only when the
queue is empty is the controller's mask asked for.  The adapter keeps nothing but a `Controller`
(`stdsl.control.controller`) and the output's frozen `Log` (the configuration reached, tokens, bytes, how
many were forced), as a row does; every decision is the controller's.  The engine has already appended the
sampled token when the plan is made, so the planner runs without healing (a healed plan would
replace that token).  An output the controller finishes before the engine's budget is closed by a
forced eos.  The sampled steps' masks are exactly those of `stdsl.generate(..., healing=False)`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from stdsl.control.controller import Configuration, Controller
from stdsl.control.finish import output_generation
from stdsl.control.log import Log
from stdsl.control.tables import controller_of
from stdsl.errors import GenerationError, StdslError
from stdsl.generation import Generation, Stats
from stdsl.kernels.torch_mask import Row, WalkRow
from stdsl.kernels.vocabulary import Vocabulary
from stdsl.model_files.tokenizer import Tokenizer


def stepwise_controller(constraint: Any, tokenizer: Tokenizer, max_tokens: int | None) -> Controller:
    """The controller of a compiled constraint for an engine's one-token steps: planning without healing, pushdown
    masks on the host (MLX's device vector is not this process's). A constraint with special tokens is refused:
    the processors mask every row with the tokenizer's one vocabulary."""
    if getattr(constraint, "special_tokens", ()):
        raise StdslError(f"the constraint uses the special tokens {', '.join(constraint.special_tokens)}, which the "
                         "vLLM and transformers processors cannot decode yet; use stdsl.generate, stream or the server")
    return controller_of(constraint, tokenizer, max_tokens=max_tokens, healing=False)


class StepwiseConstraint:
    """A controller, the configuration reached, the queue of tokens it decided that the engine has not yet emitted,
    the output's log and step counts.

    `start()` plans the forced prefix; `row()` is what the engine's next token must satisfy;
    `accept(token)` takes the token the engine appended.  After eos (sampled or forced) the
    output is `done` and later tokens (an engine's padding of finished rows) are ignored.
    """

    def __init__(self, constraint: Any, tokenizer: Tokenizer, max_tokens: int | None) -> None:
        self.constraint = constraint
        self.controller = stepwise_controller(constraint, tokenizer, max_tokens)
        self.vocab: Vocabulary = self.controller.vocab
        self.log: Log | None = None
        """The output's log (None before `start`): the configuration reached, tokens, bytes, forced count."""
        self.queue: deque[int] = deque()
        self.eos_id = int(self.vocab.eos_ids[0]) if self.vocab.eos_ids.size else -1
        self.done = False
        self.eos_sampled = False
        self.error: StdslError | None = None
        self.stats = Stats()
        self.emitted = 0

    def start(self) -> None:
        """Plan the forced prefix (BudgetError when no valid output fits in the budget)."""
        if self.log is not None:
            raise GenerationError("start() was already called for this output")
        self.log = self.controller.started()
        self.queue.extend(self.log.tokens)

    @property
    def logged(self) -> Log:
        """The output's log (GenerationError before `start`)."""
        if self.log is None:
            raise GenerationError("call start() before stepping the output")
        return self.log

    @property
    def at(self) -> Configuration:
        """The configuration reached (GenerationError before `start`)."""
        return self.logged.configuration

    @property
    def tokens(self) -> list[int]:
        """The output's tokens so far (decided ones the engine may not have emitted yet included)."""
        return list(self.logged.tokens) if self.log is not None else []

    def fail(self, error: StdslError) -> None:
        """End the output with eos at the next step, keeping `error` for `generation()` to raise."""
        self.error, self.done = error, True

    @property
    def forced(self) -> int | None:
        """The token the next step must take (a queued forced token, or eos once the controller finished), else None."""
        if self.done:
            return self.eos_id
        if self.queue:
            return self.queue[0]
        if self.at.finished:
            return self.eos_id
        return None

    def row(self, host: bool = False) -> Row:
        """The next step's batch row for `torch_mask.batch_mask`: a forced token, a DFA `WalkRow` or a host mask.

        `host` asks for the controller's own mask (numpy, memoized per configuration, with the budget
        shortcut) instead of a `WalkRow`; pushdown rows are always host masks.  A controller that can go no
        further (a pushdown at its nesting cap) records its GenerationError in `error` and the
        output is ended by eos: never an invalid continuation.
        """
        forced = self.forced
        controller, at = self.controller, self.at
        if forced is None and (host or controller.host_masks_only):
            try:
                return controller.mask(at)
            except GenerationError as error:
                self.fail(error)
                forced = self.eos_id
        if forced is not None:
            if forced < 0:
                raise GenerationError("the output is finished but the vocabulary has no eos token to end it")
            return forced
        cover = at.cover
        return WalkRow(controller.machine, at.state, controller.accepting(at), controller.cover_mask(at),
                       True if cover is None else cover.eos, at.remaining, controller.budget, controller.rows)

    def mask(self) -> np.ndarray:
        """The next step's mask on the host (bool (V,), read-only): the singleton of a forced token, else the
        controller's."""
        row = self.row(host=True)
        if isinstance(row, np.ndarray):
            return row
        allowed = np.zeros(self.vocab.size, dtype=bool)
        allowed[int(row)] = True  # type: ignore[arg-type]
        return allowed

    def accept(self, token: int) -> None:
        """Take the token the engine appended; GenerationError if it is not the one the constraint forced, or not
        admissible where the engine sampled."""
        if self.done:
            return
        self.stats.passes += 1
        forced = self.forced
        if forced is not None:
            if token != forced:
                raise GenerationError(f"the engine appended token {token} where the constraint forced {forced}")
            if self.queue:
                self.queue.popleft()
            else:
                self.done = True
            return
        self.stats.sampled_tokens += 1
        move = self.controller.taken(self.logged, token)
        if move.feed and move.feed[0] != token:
            raise GenerationError(f"the plan after token {token} replaced it; engine steps need healing off")
        self.log = self.logged.apply(move)
        if not move.feed:
            self.done = self.eos_sampled = True
            return
        self.queue.extend(move.feed[1:])

    def sync(self, output_tokens: list[int]) -> None:
        """Take every token of the engine's running output list not seen yet (up to a -1 placeholder)."""
        self.take(output_tokens[self.emitted:])

    def take(self, tokens: Sequence[int]) -> None:
        """Take the engine's next output tokens, in order (up to a -1 placeholder)."""
        for token in tokens:
            if token < 0:
                break
            self.accept(int(token))
            self.emitted += 1

    def generation(self, prompt_tokens: int = 0) -> Generation:
        """The finished output as `stdsl.generate` returns it (GenerationError when it is not in the language)."""
        if self.error is not None:
            raise self.error
        log, controller = self.logged, self.controller
        if self.queue or not controller.accepting(log.configuration):
            raise GenerationError("decoding ended outside an accepting state (the engine stopped the output early)")
        self.stats.prompt_tokens = prompt_tokens
        reason = controller.finish_reason(log.configuration, self.eos_sampled)
        return output_generation(log.decided, list(log.tokens), log.forced, True, self.stats, reason,
                                 getattr(self.constraint, "parse", None))
