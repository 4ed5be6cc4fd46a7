"""Decoding options as one frozen, validated value, and the check of a prompt's shape.

Every bad option or prompt raises OptionError naming the argument, before any model pass, so a
typo or a wrong type never surfaces as a foreign exception from deep inside decoding.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from stdsl.errors import OptionError
from stdsl.model_files.prompt import check_text
from stdsl.runtime.option_values import boolean, boolean_or, integer, real, refuse

GREEDY_BELOW = 1e-5
"""Temperatures below this are greedy: the draw would be the argmax anyway, and 1/T stays far from float32 overflow
(log-probabilities times 1/T are finite for any log-probability above -3e33)."""
TEMPERATURE_RANGE = "a finite number >= 0 (0, or anything below 1e-5, is greedy)"
TOP_P_RANGE = "a number in (0, 1] (1 keeps every token)"
MAX_SEED = 2**64 - 1


@dataclass(frozen=True)
class SamplingParams:
    """How to pick a token: `temperature < GREEDY_BELOW` is greedy; `top_p` < 1 and `top_k > 0` filter.

    Bad values raise OptionError naming the argument; the fields hold plain Python numbers.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self) -> None:
        temperature = real("temperature", self.temperature, TEMPERATURE_RANGE)
        if not (math.isfinite(temperature) and temperature >= 0.0):
            raise refuse("temperature", self.temperature, TEMPERATURE_RANGE)
        top_p = real("top_p", self.top_p, TOP_P_RANGE)
        if not 0.0 < top_p <= 1.0:
            raise refuse("top_p", self.top_p, TOP_P_RANGE)
        object.__setattr__(self, "temperature", temperature)
        object.__setattr__(self, "top_p", top_p)
        object.__setattr__(self, "top_k", integer("top_k", self.top_k, minimum=0))
        if self.seed is not None:
            object.__setattr__(self, "seed", integer("seed", self.seed, minimum=0, maximum=MAX_SEED))

    @property
    def greedy(self) -> bool:
        """True when the argmax is taken (no randomness)."""
        return self.temperature < GREEDY_BELOW


FLAGS = ("chat", "healing", "reference")


@dataclass(frozen=True)
class DecodeOptions:
    """What one request asks of decoding; build it with `DecodeOptions.of(**options)` to refuse unknown names.

    `max_tokens` counts every emitted token (None: no limit); `stop` ends a free-text row before any of its
    strings (refused with a constraint); `reference=True` feeds one token per pass (the oracle decoder).
    `parallel_fields=True` drafts independent fields at once and certifies them (greedy outputs unchanged);
    `"auto"` does so only where this machine's measured pass cost forecasts fewer passes' worth of time.
    `reasoning` turns a reasoning model's thinking block on or off (None: as the chat template and prompt have it), and
    `reasoning_budget` closes the block after that many thinking tokens (`max_tokens` counts both parts).
    `strict=False` compiles a JSON Schema or Pydantic constraint to its exact open language (None, the default:
    objects closed to their declared members, `stdsl.compile`'s `strict`); a constraint compiled already keeps its own,
    and one compiled with the other `strict` is refused.
    """

    max_tokens: int | None = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    chat: bool = True
    healing: bool = True
    parallel_fields: bool | str = False
    stop: tuple[str, ...] = ()
    reference: bool = False
    reasoning: bool | None = None
    reasoning_budget: int | None = None
    strict: bool | None = None

    def __post_init__(self) -> None:
        if self.max_tokens is not None:
            object.__setattr__(self, "max_tokens", integer("max_tokens", self.max_tokens, minimum=0))
        for name in ("reasoning", "strict"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, boolean(name, getattr(self, name)))
        if self.reasoning_budget is not None:
            object.__setattr__(self, "reasoning_budget", integer("reasoning_budget", self.reasoning_budget, minimum=0))
        sampling = SamplingParams(self.temperature, self.top_p, self.top_k, self.seed)
        for name in ("temperature", "top_p", "top_k", "seed"):
            object.__setattr__(self, name, getattr(sampling, name))
        for name in FLAGS:
            object.__setattr__(self, name, boolean(name, getattr(self, name)))
        object.__setattr__(self, "parallel_fields", boolean_or("parallel_fields", self.parallel_fields, ("auto",)))
        object.__setattr__(self, "stop", stop_strings(self.stop))

    @classmethod
    def of(cls, /, **options: Any) -> DecodeOptions:
        """The options given by keyword; an unknown name is refused with the closest known one suggested."""
        known = [f.name for f in fields(cls)]
        for name in options:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise OptionError(name, f"unknown option {name!r}{hint}; the options are {', '.join(known)}")
        return cls(**options)

    @property
    def sampling(self) -> SamplingParams:
        """The sampling rule these options ask for."""
        return SamplingParams(self.temperature, self.top_p, self.top_k, self.seed)


def stop_strings(stop: Any) -> tuple[str, ...]:
    """`stop` as a tuple of non-empty strings: one str is one stop string, else a sequence of them."""
    allowed = "a non-empty str or a list of non-empty str"
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, Sequence) or not all(isinstance(s, str) and s for s in stop):
        raise refuse("stop", stop, allowed)
    for index, text in enumerate(stop):
        check_text("stop", f"stop[{index}]", text)
    return tuple(stop)
