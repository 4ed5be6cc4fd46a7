"""Whether certified drafts of the fields left to decode cost less than decoding them sequentially
(`parallel_fields="auto"`).

Sequentially every sampled token of the fields left costs one single-token pass. Certified, a wave of
`rows` draft rows (one per block left, up to the decoder's wave size) runs for as long as its lead row; the lead (the
block the output is in, drafted from its exact configuration) is always accepted, and each other row's
token is accepted with probability `acceptance`, so a wave pass makes `1 + (rows - 1) * acceptance`
tokens of progress. Tokens of kept drafts cost a pass only when rejected. Every later block whose draft is
rejected costs a round, and each round adds a certification pass over the document left (on average
between all of it and half) and a prefill of the new rows' literal contexts. Costs are in single-token
passes of this machine (`PassCost.units`); drafting goes on only where it is forecast at most `MARGIN`
of the sequential cost, so "auto" pays a wide pass only where this machine makes it cheap.

`acceptance` is learned per model in the process: each certification reports, per later block, how many of
its drafted tokens agreed with the masked argmax before the block's first disagreement. It starts at
`PRIOR_ACCEPTANCE` weighted as `PRIOR_TOKENS` tokens.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stdsl.caches import CacheKind
from stdsl.runtime.certified.blocks import END, Block, Language
from stdsl.runtime.pass_cost import PassCost

MARGIN = 0.9
PRIOR_ACCEPTANCE = 0.3
PRIOR_TOKENS = 64.0
TYPICAL_BLOCK_BYTES = 16
BYTES_PER_TOKEN = 3.0


@dataclass(frozen=True)
class Forecast:
    """The fields left to decode: sampled tokens still to draft (the lead's rest included), tokens of kept
    drafts, blocks left (the lead's included), rows of a wave, forced literal tokens between the blocks, and
    the literal context tokens one new draft row prefills."""

    new_tokens: float
    kept_tokens: float
    blocks: int
    rows: int
    literal_tokens: float = 0.0
    context_tokens: float = 0.0


def certified_units(forecast: Forecast, cost: PassCost, acceptance: float) -> float:
    """Forecast cost of the fields left by certified rounds: wave passes, certification passes, prefills."""
    f, p = forecast, acceptance
    progress = 1 + (f.rows - 1) * p
    wave = (f.new_tokens + (1 - p) * f.kept_tokens) / progress * cost.units(f.rows, 1)
    rounds = 1 + max(f.blocks - 1, 0) * (1 - p)
    document = (f.new_tokens + f.kept_tokens + f.literal_tokens + 1) * (1 + 1 / rounds) / 2
    prefill = cost.units(f.rows - 1, f.context_tokens) if f.rows > 1 and f.context_tokens > 0 else 0.0
    return wave + rounds * (cost.units(1, document) + prefill)


def sequential_units(forecast: Forecast, cost: PassCost) -> float:
    """Forecast cost of the fields left decoded one sampled token per pass."""
    return (forecast.new_tokens + forecast.kept_tokens) * cost.units(1, 1)


def worth_drafting(forecast: Forecast, cost: PassCost, acceptance: float) -> bool:
    """Whether certified rounds are forecast to cost at most `MARGIN` of sequential decoding (never for fewer
    than two blocks left)."""
    if forecast.blocks < 2:
        return False
    return certified_units(forecast, cost, acceptance) <= MARGIN * sequential_units(forecast, cost)


def shortest_bytes(language: Language, state: int) -> int:
    """Bytes of the shortest accepted completion from `state` (a DFA state or a pushdown configuration id)."""
    return language.shortest_completion(state)


def expected_block_tokens(language: Language, block: Block) -> float:
    """Sampled tokens a draft of `block` is expected to take: its shortest content, at least a typical field."""
    after = 0 if block.exit == END else shortest_bytes(language, block.exit)
    least = max(shortest_bytes(language, block.entry) - after, 0)
    return max(least, TYPICAL_BLOCK_BYTES) / BYTES_PER_TOKEN


@dataclass(frozen=True)
class KeptDraft:
    """A block's draft kept from earlier waves: its tokens, and its bytes."""

    tokens: int
    size: int


def remaining_forecast(language: Language, blocks: Sequence[Block], first: int, lead_done: int,
                       kept: Mapping[int, KeptDraft], wave_rows: int) -> Forecast:
    """The forecast of the blocks from `first` (the lead, `lead_done` bytes of it decided) to the end, drafted
    by waves of up to `wave_rows` rows: each later block's kept draft, and every block's expected tokens not
    yet drafted (the lead and undrafted blocks at least one)."""
    new = held = literal = 0.0
    for index in range(first, len(blocks)):
        expected = expected_block_tokens(language, blocks[index])
        draft = kept.get(index)
        done = lead_done if index == first else draft.size if draft is not None else 0
        held += draft.tokens if draft is not None and index != first else 0
        new += max(expected - done / BYTES_PER_TOKEN, 0.0 if draft is not None and index != first else 1.0)
        literal += len(blocks[index].literal) / BYTES_PER_TOKEN if index != first else 0.0
    count = len(blocks) - first
    context = literal / (count - 1) if count > 1 else 0.0
    return Forecast(new, held, count, max(1, min(wave_rows, count)), literal, context)


def later_agreement(step_blocks: Sequence[int | None], lead: int | None,
                    agrees: Callable[[int], bool]) -> tuple[int, int]:
    """(agreed, drafted) tokens of the later blocks' drafts in a certified replay: for each block other than the
    lead's, its tokens before its first step `k` where `agrees(k)` is False (asked only up to there)."""
    drafted: dict[int, int] = {}
    agreed: dict[int, int] = {}
    for k, block in enumerate(step_blocks):
        if block is None or block == lead:
            continue
        drafted[block] = drafted.get(block, 0) + 1
        if agreed.get(block, 0) == drafted[block] - 1 and agrees(k):
            agreed[block] = drafted[block]
    return sum(agreed.values()), sum(drafted.values())


class Acceptance:
    """The share of later blocks' drafted tokens that certification accepted, with a prior (thread-safe)."""

    def __init__(self, prior: float = PRIOR_ACCEPTANCE, weight: float = PRIOR_TOKENS) -> None:
        self._accepted = prior * weight
        self._drafted = weight
        self._lock = threading.Lock()

    @property
    def rate(self) -> float:
        """The current estimate."""
        with self._lock:
            return self._accepted / self._drafted

    def observe(self, accepted: int, drafted: int) -> None:
        """Count `drafted` later-block tokens of one certification, `accepted` of which agreed with it."""
        if not 0 <= accepted <= drafted:
            raise ValueError(f"accepted ({accepted}) must lie in [0, drafted ({drafted})]")
        with self._lock:
            self._accepted += accepted
            self._drafted += drafted


_ACCEPTANCE: CacheKind[Acceptance] = CacheKind("draft acceptance")


def acceptance_for(model: Any) -> Acceptance:
    """The model's acceptance estimate, kept in the cache registry while the model lives (from the prior at
    first use)."""
    return _ACCEPTANCE.get((model,), Acceptance)


def set_acceptance(model: Any, acceptance: Acceptance) -> None:
    """Use `acceptance` for `model` from now on."""
    _ACCEPTANCE.put((model,), acceptance)
