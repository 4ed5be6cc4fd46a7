"""The reasoning budget: after `budget` thinking tokens, the mask admits only tokens that close the block.

A row policy over the constraint's own mask, never beside it: the tokens kept are those whose
bytes agree with the rest of the closing tag (a prefix of it, or it and more), intersected with
the mask, so the answer stays constrained and valid under `max_tokens`.  Thinking tokens are the
tokens emitted after the opening tag was decided while the block is open.  Once over budget the
block closes in the fewest steps: the rest of a tag begun at the end of the thinking text, else a
new tag; where the budget mask of Theorem 21 admits neither (a shorter ending there restarts the
tag), the mask is left as it is, as the boundary cover yields to it.
"""

from __future__ import annotations

import numpy as np

from stdsl.control.log import Log
from stdsl.control.split.token_spellings import TokenSpellings
from stdsl.control.thinking_region import ThinkingRegion


class ReasoningPolicy:
    """The thinking block of one row (`region`) and its budget in tokens (None: no budget)."""

    def __init__(self, region: ThinkingRegion, budget: int | None = None) -> None:
        self.region = region
        self.budget = budget
        self._opened_at: int | None = None

    def thinking_tokens(self, log: Log) -> int:
        """Tokens emitted inside the block so far (0 before it opens)."""
        emitted = len(log.tokens)
        if not self.region.thinking_open(log.decided):
            return 0 if self._opened_at is None else emitted - self._opened_at
        if self._opened_at is None:
            self._opened_at = emitted
        return emitted - self._opened_at

    def restrict(self, log: Log, allowed: np.ndarray, spellings: TokenSpellings) -> np.ndarray:
        """`allowed` with only closing tokens kept once the block is open and its budget spent (after `log`)."""
        decided = log.decided
        if self.budget is None or not self.region.thinking_open(decided):
            return allowed
        if self.thinking_tokens(log) < self.budget:
            return allowed
        for rest in (self.region.closing_rest(decided), self.region.close):
            closing = allowed & spellings.agreeing_with(rest) & (spellings.lengths > 0)
            if closing.any():
                return closing
        return allowed
