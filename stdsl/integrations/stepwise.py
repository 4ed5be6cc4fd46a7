"""One constrained output driven one token per engine step (transformers' and vLLM's generate loops).

stdsl's own loop feeds a sampled token and its forced span in one pass; an engine's loop appends
exactly one token per step, so here the controller's plan is queued and spent a token at a time:
after a forced prefix or span the mask is the singleton of the next forced token, and only when the
queue is empty is the controller's mask (`ConstraintState.mask()`) asked for.  The engine has already
appended the sampled token when the plan is made, so the planner runs without healing (a healed plan
would replace that token).  An output the controller finishes before the engine's budget is closed
by a forced eos.  The sampled steps' masks are exactly those of `stdsl.generate(..., healing=False)`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from stdsl.control.constraint_state import ConstraintState
from stdsl.control.finish import finish_reason, finished_generation
from stdsl.control.pushdown_state import PushdownState
from stdsl.control.row_controller import controller_for
from stdsl.errors import GenerationError, StdslError
from stdsl.generation import Generation, Stats
from stdsl.kernels.torch_mask import Row, WalkRow
from stdsl.kernels.vocabulary import Vocabulary
from stdsl.model_files.tokenizer import Tokenizer


def stepwise_controller(constraint: Any, tokenizer: Tokenizer, max_tokens: int | None) -> ConstraintState:
    """The controller of a compiled constraint for an engine's one-token steps: planning without healing, pushdown
    masks on the host (MLX's device vector is not this process's). A constraint with special tokens is refused:
    the processors mask every row with the tokenizer's one vocabulary."""
    if getattr(constraint, "special_tokens", ()):
        raise StdslError(f"the constraint uses the special tokens {', '.join(constraint.special_tokens)}, which the "
                         "vLLM and transformers processors cannot decode yet; use stdsl.generate, stream or the server")
    return controller_for(constraint, tokenizer, max_tokens=max_tokens, healing=False, pushdown_masks="host")


class StepwiseConstraint:
    """A controller, the queue of tokens it decided that the engine has not yet emitted, and step counts.

    `start()` plans the forced prefix; `row()` is what the engine's next token must satisfy;
    `accept(token)` takes the token the engine appended.  After eos (sampled or forced) the
    output is `done` and later tokens (an engine's padding of finished rows) are ignored.
    """

    def __init__(self, constraint: Any, tokenizer: Tokenizer, max_tokens: int | None) -> None:
        self.constraint = constraint
        self.control = stepwise_controller(constraint, tokenizer, max_tokens)
        self.vocab: Vocabulary = self.control.vocab
        self.queue: deque[int] = deque()
        self.eos_id = int(self.vocab.eos_ids[0]) if self.vocab.eos_ids.size else -1
        self.done = False
        self.eos_sampled = False
        self.error: StdslError | None = None
        self.stats = Stats()
        self.emitted = 0

    def start(self) -> None:
        """Plan the forced prefix (BudgetError when no valid output fits in the budget)."""
        self.queue.extend(self.control.start())

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
        if self.control.finished:
            return self.eos_id
        return None

    def row(self, host: bool = False) -> Row:
        """The next step's batch row for `torch_mask.batch_mask`: a forced token, a DFA `WalkRow` or a host mask.

        `host` asks for the controller's own mask (numpy, with its row cache and budget shortcut)
        instead of a `WalkRow`; pushdown rows are always host masks.  A controller that can go no
        further (a pushdown at its nesting cap) records its GenerationError in `error` and the
        output is ended by eos: never an invalid continuation.
        """
        forced = self.forced
        if forced is None and (host or isinstance(self.control, PushdownState)):
            try:
                return self.control.mask()
            except GenerationError as error:
                self.fail(error)
                forced = self.eos_id
        if forced is not None:
            if forced < 0:
                raise GenerationError("the output is finished but the vocabulary has no eos token to end it")
            return forced
        control = self.control
        cover = control.cover
        return WalkRow(control.automaton, control.state, control.accepting,
                       None if cover is None else control.planner.cover_mask(cover),
                       True if cover is None else cover.eos, control.remaining, control.budget, control.rows)

    def mask(self) -> np.ndarray:
        """The next step's mask on the host (bool (V,)): the singleton of a forced token, else the controller's."""
        row = self.row(host=True)
        if isinstance(row, np.ndarray):
            return row
        allowed = np.zeros(self.vocab.size, dtype=bool)
        allowed[int(row)] = True  # type: ignore[arg-type]
        return allowed

    def accept(self, token: int) -> None:
        """Take the token the engine appended; GenerationError if it is not the one the constraint forced."""
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
        feed = self.control.advance(token)
        if not feed:
            self.done = self.eos_sampled = True
            return
        if feed[0] != token:
            raise GenerationError(f"the plan after token {token} replaced it; engine steps need healing off")
        self.queue.extend(feed[1:])

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
        if self.queue or not self.control.accepting:
            raise GenerationError("decoding ended outside an accepting state (the engine stopped the output early)")
        self.stats.prompt_tokens = prompt_tokens
        return finished_generation(self.control, self.stats, finish_reason(self.control, self.eos_sampled),
                                   getattr(self.constraint, "parse", None))
