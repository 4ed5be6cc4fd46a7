"""Token sampling under a constraint mask: greedy, or temperature + top-p + top-k with a seed.

The rule is mlx_lm's `make_sampler` (log-probabilities, then top-p, then top-k, then a
categorical draw at temperature), applied after the constraint mask sets disallowed tokens to -inf.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from stdsl.errors import GenerationError


@dataclass(frozen=True)
class SamplingParams:
    """How to pick a token: `temperature == 0` is greedy; `top_p` in (0, 1) and `top_k > 0` filter."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 <= self.top_p <= 1.0:
            raise ValueError(f"top_p must lie in [0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")

    @property
    def greedy(self) -> bool:
        """True when the argmax is taken (no randomness)."""
        return self.temperature == 0.0


def seed_random(params: SamplingParams) -> None:
    """Seed MLX's global generator when a seed is given, as `mlx_lm` callers do with `mx.random.seed`."""
    if params.seed is not None:
        mx.random.seed(int(params.seed))


def apply_top_p(logprobs: mx.array, top_p: float) -> mx.array:
    """Nucleus filter: keep the smallest set of most likely tokens holding `top_p` of the mass (mlx_lm's rule)."""
    sorted_logprobs = mx.sort(logprobs, axis=-1)
    sorted_probs = mx.exp(sorted_logprobs.astype(mx.float32))
    mass_above = mx.cumsum(sorted_probs, axis=-1, reverse=True, inclusive=False)
    total_mass = mass_above[..., :1] + sorted_probs[..., :1]
    num_dropped = (mass_above >= top_p * total_mass).sum(axis=-1, keepdims=True)
    threshold = mx.take_along_axis(sorted_logprobs, num_dropped, axis=-1)
    return mx.where(logprobs < threshold, -float("inf"), logprobs)


def apply_top_k(logprobs: mx.array, top_k: int) -> mx.array:
    """Keep the `top_k` most likely tokens (mlx_lm's rule); a k at least the vocabulary size keeps all."""
    vocab_size = logprobs.shape[-1]
    if top_k >= vocab_size:
        return logprobs
    drop = mx.argpartition(-logprobs, kth=top_k - 1, axis=-1)[..., top_k:]
    return mx.put_along_axis(logprobs, drop, mx.array(-float("inf"), logprobs.dtype), axis=-1)


def mask_logits(logits: mx.array, allowed: np.ndarray) -> mx.array:
    """Logits with every token outside `allowed` set to -inf; ids beyond `allowed` (padding) are disallowed."""
    width = logits.shape[-1]
    if allowed.shape[0] < width:
        allowed = np.concatenate([allowed, np.zeros(width - allowed.shape[0], dtype=bool)])
    elif allowed.shape[0] > width:
        if allowed[width:].any():
            raise GenerationError(f"the constraint allows token ids beyond the model's {width} logits")
        allowed = allowed[:width]
    if not allowed.any():
        raise GenerationError("no token is admissible at this step (the constraint and budget leave nothing)")
    return mx.where(mx.array(allowed), logits, mx.array(-float("inf"), logits.dtype))


def sample(logits: mx.array, allowed: np.ndarray, params: SamplingParams) -> int:
    """One token id drawn from `logits` (1-D, one position) restricted to `allowed`.

    Draws use shape (1, V), as mlx_lm's generate loop does, so a seed gives mlx_lm's token.
    """
    masked = mask_logits(logits.astype(mx.float32), allowed)[None]
    if params.greedy:
        return int(np.asarray(mx.argmax(masked, axis=-1))[0])
    logprobs = masked - mx.logsumexp(masked, axis=-1, keepdims=True)
    if 0.0 < params.top_p < 1.0:
        logprobs = apply_top_p(logprobs, params.top_p)
    if params.top_k > 0:
        logprobs = apply_top_k(logprobs, params.top_k)
    token = int(np.asarray(mx.random.categorical(logprobs * (1.0 / params.temperature)))[0])
    if not allowed[token]:
        raise GenerationError(f"sampler drew token {token} outside the mask")
    return token
