"""What one model pass costs on this machine, by tokens fed: measured once per model and process.

A pass over B rows of T tokens each feeds N = B * T tokens. Its time is taken as a function of N alone,
interpolated linearly between measured points and extended past the widest one by the last slope: on a CPU
it grows with N (the drip rule's `1 + TOKEN_COST * B * T`), on a GPU it should stay nearly flat until the
device fills. `units(rows, width)` is that time over the time of one single-token pass, the unit certified
drafts (`parallel_fields="auto"`) forecast in. Measuring takes a few timed passes on empty caches (attention
over a long prompt is left out: it adds the same to every pass of a row, so it makes wide passes relatively
cheaper and the forecast conservative), bounded by `MEASURE_SECONDS` (a pass predicted to end past it is
skipped). `set_pass_cost` overrides it (tests, or a cost measured offline). The cost is an entry of the cache
registry (`stdsl.caches`): `clear()` has it measured again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np

from stdsl.caches import CacheKind
from stdsl.errors import OptionError
from stdsl.runtime.platform.mlx_lm_models import make_prompt_cache

MEASURE_SECONDS = 2.0
REPEATS = 3
SHAPES = ((1, 1), (1, 16), (4, 1), (1, 64), (2, 1), (8, 1), (1, 4), (1, 32))
PROBE_TOKEN = 17


@dataclass(frozen=True)
class PassCost:
    """Seconds of one pass by tokens fed, as increasing token counts and their nondecreasing times."""

    tokens: tuple[float, ...]
    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) < 2 or len(self.tokens) != len(self.seconds):
            raise OptionError("pass_cost", "a pass cost needs two or more (tokens, seconds) points")
        if list(self.tokens) != sorted(set(self.tokens)) or self.tokens[0] <= 0:
            raise OptionError("pass_cost", f"token counts must be positive and increasing, got {self.tokens}")
        if any(s <= 0 for s in self.seconds) or list(self.seconds) != sorted(self.seconds):
            raise OptionError("pass_cost", f"pass times must be positive and nondecreasing, got {self.seconds}")

    @classmethod
    def from_samples(cls, samples: Mapping[int, Sequence[float]]) -> PassCost:
        """The cost through the fastest time of each token count (timing noise only slows a pass down), made
        nondecreasing in tokens."""
        counts = sorted(n for n, times in samples.items() if times)
        fastest = np.maximum.accumulate([min(samples[n]) for n in counts]).tolist()
        return cls(tuple(float(n) for n in counts), tuple(float(s) for s in fastest))

    @classmethod
    def linear(cls, token_cost: float) -> PassCost:
        """The drip rule's model: a pass of N tokens costs `1 + token_cost * N` (arbitrary time unit)."""
        return cls((1.0, 2.0), (1.0 + token_cost, 1.0 + 2 * token_cost))

    def seconds_for(self, rows: float, width: float) -> float:
        """Predicted time of one pass over `rows` rows of `width` tokens each."""
        n = max(rows * width, 0.0)
        xs, ys = self.tokens, self.seconds
        if n <= xs[-1]:
            return float(np.interp(n, xs, ys))
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        return ys[-1] + slope * (n - xs[-1])

    def units(self, rows: float, width: float) -> float:
        """The pass's cost in single-token passes (a pass over one row of one token costs 1)."""
        return self.seconds_for(rows, width) / self.seconds_for(1, 1)


def measure_pass_cost(net: Any, budget_seconds: float = MEASURE_SECONDS,
                      shapes: Sequence[tuple[int, int]] = SHAPES) -> PassCost:
    """Time passes of `net` over `shapes` (rows, width) in turn, `REPEATS` times while `budget_seconds` lasts.

    The first shape is run once untimed (a warm-up). Once two token counts are known, a pass the curve so far
    predicts to end past the budget is skipped and measuring stops at the first pass that does end past it;
    every shape is tried once before any repeats, so a slow machine still gets the whole curve when the budget
    allows it. Runs on the caller's thread (the thread that owns MLX).
    """
    ended = time.perf_counter() + budget_seconds
    _timed_pass(net, *shapes[0])
    samples: dict[int, list[float]] = {}
    for _ in range(REPEATS):
        for rows, width in shapes:
            if len(samples) >= 2:
                if time.perf_counter() >= ended:
                    return PassCost.from_samples(samples)
                if time.perf_counter() + PassCost.from_samples(samples).seconds_for(rows, width) > ended:
                    continue
            samples.setdefault(rows * width, []).append(_timed_pass(net, rows, width))
    return PassCost.from_samples(samples)


def _timed_pass(net: Any, rows: int, width: int) -> float:
    """Seconds of one evaluated pass of `net` over `rows` x `width` tokens on a fresh cache."""
    cache = make_prompt_cache(net)
    inputs = mx.full((rows, width), PROBE_TOKEN, dtype=mx.int32)
    began = time.perf_counter()
    mx.eval(net(inputs, cache=cache))
    return time.perf_counter() - began


_COSTS: CacheKind[PassCost] = CacheKind("pass costs")


def pass_cost(model: Any, run: Callable[[Callable[[], PassCost]], PassCost]) -> PassCost:
    """The model's pass cost, measured at first use (`run` executes the measurement on the MLX thread, as
    `Engine.call` does) and kept in the cache registry while the model lives."""
    return _COSTS.get((model,), lambda: run(lambda: measure_pass_cost(model.net)))


def set_pass_cost(model: Any, cost: PassCost) -> None:
    """Use `cost` for `model` from now on instead of measuring it."""
    _COSTS.put((model,), cost)
