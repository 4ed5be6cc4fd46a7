"""Oracles for the batch engine tests: a one-sequence greedy decoder and the near-tie check at a first difference.

Floating point: a pass over many rows or positions may round differently from a pass over one,
so where a batched output differs from the sequential one, the first difference must be a near-tie
(top two masked logits within `NEAR_TIE` at that step of the sequential run).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import make_prompt_cache
from row_driver import RowDriver

from stdsl.runtime.batch.requests import compiled_constraint, prompt_tokens
from stdsl.runtime.options import DecodeOptions

NEAR_TIE = 1e-4


def sequential_greedy(model: Any, prompt: Any, constraint: Any,
                      max_tokens: int) -> tuple[list[int], list[float], list[int]]:
    """Greedy tokens of one output decoded alone with mlx-lm's own cache; per sample: top-2 margin, output index."""
    options = DecodeOptions.of(max_tokens=max_tokens)
    control = RowDriver.request(model, compiled_constraint(constraint), options)
    feed = prompt_tokens(model, prompt) + control.start()
    cache = make_prompt_cache(model.net)
    margins: list[float] = []
    starts: list[int] = []
    while not control.finished:
        logits = np.asarray(model.net(mx.array([feed]), cache=cache)[0, -1].astype(mx.float32))
        allowed = control.mask()
        masked = np.where(allowed[: logits.shape[0]], logits[: allowed.shape[0]], -np.inf)
        top = np.sort(masked[np.isfinite(masked)])[-2:]
        margins.append(float(top[-1] - top[0]) if len(top) == 2 else float("inf"))
        starts.append(len(control.tokens))
        feed = control.advance(int(np.argmax(masked)))
        if not feed:
            break
    return list(control.tokens), margins, starts


def agrees(model: Any, prompt: Any, constraint: Any, max_tokens: int, tokens: list[int]) -> bool:
    """Whether `tokens` equal the sequential greedy output, or first differ from it at a near-tie."""
    expected, margins, starts = sequential_greedy(model, prompt, constraint, max_tokens)
    if tokens == expected:
        return True
    first = next((i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b), min(len(tokens), len(expected)))
    step = max(k for k, start in enumerate(starts) if start <= first)
    return margins[step] <= NEAR_TIE
