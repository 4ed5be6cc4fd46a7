"""The result of one constrained generation: text, emitted tokens, and pass/token counts (every surface returns it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Stats:
    """Counts of one generation: model passes (prefill included), sampled and forced tokens, prompt size, time.

    `sampled_tokens` counts every draw from the model (an eos draw included); `forced_tokens`
    counts emitted tokens the constraint decided (healed replacements included); `emitted_tokens`
    is the output length in tokens (eos excluded); `rounds` counts certification rounds (0: not certified);
    `cached_tokens` counts the prompt tokens the prompt cache served (the rest were prefilled).
    """

    passes: int = 0
    sampled_tokens: int = 0
    forced_tokens: int = 0
    prompt_tokens: int = 0
    seconds: float = 0.0
    emitted_tokens: int = 0
    rounds: int = 0
    cached_tokens: int = 0

    @property
    def passes_per_token(self) -> float:
        """Model passes per output token (the paper's headline ratio; 1.0 for free decoding)."""
        return self.passes / self.emitted_tokens if self.emitted_tokens else 0.0

    @property
    def forced_share(self) -> float:
        """Share of output tokens the constraint forced."""
        return self.forced_tokens / self.emitted_tokens if self.emitted_tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The counts as a plain dict (for printing and benchmarks)."""
        return {
            "passes": self.passes,
            "sampled_tokens": self.sampled_tokens,
            "forced_tokens": self.forced_tokens,
            "output_tokens": self.emitted_tokens,
            "prompt_tokens": self.prompt_tokens,
            "rounds": self.rounds,
            "cached_tokens": self.cached_tokens,
            "seconds": round(self.seconds, 4),
        }


@dataclass
class Generation:
    """One finished generation: `text` (valid under the constraint unless `finish_reason` says otherwise).

    After a reasoning model's thinking block, `text` is the answer and `reasoning` the thinking text
    (None: the output had no block); `tokens` and the stats count both. `accepted` says whether the whole output
    is in the constraint's language: always for a finished row, possibly not for a certified draft cut at its block.
    """

    text: str
    tokens: list[int]
    stats: Stats
    accepted: bool
    finish_reason: str
    data: bytes = b""
    parser: Callable[[str], Any] | None = field(default=None, repr=False)
    reasoning: str | None = None

    @property
    def value(self) -> Any:
        """The text read back by the constraint's parser (a validated model instance, parsed JSON), else as JSON."""
        return self.parser(self.text) if self.parser is not None else json.loads(self.text)
