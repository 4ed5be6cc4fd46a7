"""The constraint controller as pure functions of a frozen configuration: `advance(config, token)` and masks.

A row's `ConstraintState` (DFA) or `PushdownState` (pushdown) is a configuration plus the log of what the row
emitted; a `Controller` is the same decision procedure with the log left out. Its `Configuration` is frozen
and hashable, `advance` returns the next configuration and the tokens to feed without touching the one it
was given (so a fork is just a kept configuration), and masks are memoized per configuration and filled for
many rows at once into a preallocated bitmask (bool, or 32-bit words as XGrammar and vLLM's processors take).
The DFA and the pushdown meet it through the one protocol their row states share (`start`, `mask`,
`advance`, `accepting`); the budget, boundary cover, canonical split and forced spans are theirs, once.

A reasoning model's thinking budget is a row policy over these masks (it reads the row's whole output), so
a controller never applies it.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from stdsl.control.constraint_state import ConstraintState
from stdsl.control.finish import finish_reason
from stdsl.control.pushdown_state import PushdownState
from stdsl.control.split.boundary_cover import BoundaryCover
from stdsl.control.split.window import Window
from stdsl.errors import GenerationError, StdslError
from stdsl.kernels.token_mask import pack_words

MAX_MASKS = 256
"""Masks a controller keeps, least recently used dropped first (each is a vocabulary's worth of bools)."""


@dataclass(frozen=True)
class Configuration:
    """Everything the next mask and advance read: the automaton state (a pushdown configuration id), the held-back
    forced bytes, the window the canonical split re-reads, the boundary cover, the tokens left, and whether the
    output is finished or its budget has shaped it. Equal configurations give equal masks and moves."""

    state: int
    pending: bytes = b""
    window: Window = Window()
    cover: BoundaryCover | None = None
    remaining: int | None = None
    finished: bool = False
    budget_shaped: bool = False


@dataclass(frozen=True)
class Move:
    """One step of a controller: the configuration it reaches, the tokens to feed (the sampled token's canonical
    re-split and the forced span after it; empty after eos), and how many of them were forced."""

    configuration: Configuration
    feed: tuple[int, ...]
    forced: int


class Controller:
    """Pure moves and masks over the `Configuration`s of one constraint under one tokenizer and token budget.

    Built from a fresh (not started) row state (`stdsl.control.row_controller.controller_for`); it keeps that
    state as a template and never changes it; `vocab` is its vocabulary (the mask width is `vocab.size`).
    """

    def __init__(self, template: ConstraintState) -> None:
        if template.started:
            raise StdslError("a controller is built from a row state that has not started")
        self._template = copy.copy(template)
        self._template.reasoning = None
        self.vocab = template.vocab
        self.automaton = template.automaton
        """The DFA stepped (a pushdown's placeholder when `pushdown`)."""
        self.pushdown = isinstance(template, PushdownState)
        """Whether configurations are a pushdown's (states are configuration ids; masks come only from `mask`)."""
        self.rows = template.rows
        """The automaton's token rows on demand (what a device walk reads on the host path)."""
        self.budget = template.budget
        """The budget's cost table (None without a token budget)."""
        self._masks: OrderedDict[tuple[Any, ...], tuple[np.ndarray, bool]] = OrderedDict()

    # ------------------------------------------------------------------ moves

    def start(self) -> Move:
        """The first configuration and the forced prefix to feed with the prompt (BudgetError: nothing fits)."""
        scratch = copy.copy(self._template)
        scratch.window = Window()
        scratch.committed, scratch.tokens = bytearray(), []
        feed = scratch.start()
        return Move(_configuration(scratch), tuple(feed), scratch.forced_count)

    def advance(self, configuration: Configuration, token: int) -> Move:
        """The move on `token` from `configuration` (GenerationError: the token is not admissible there); the
        configuration given is left as it was."""
        if configuration.finished:
            raise GenerationError("the output is finished; no further token can be taken")
        allowed, shaped = self._mask_of(configuration)
        if not 0 <= token < allowed.shape[0] or not allowed[token]:
            raise GenerationError(f"token {token} is not admissible at this configuration")
        scratch = self._load(configuration)
        scratch.budget_shaped = scratch.budget_shaped or shaped
        scratch._masked_at = 0  # the budget was checked by the mask above
        feed = scratch.advance(token)
        return Move(_configuration(scratch), tuple(feed), scratch.forced_count)

    # ------------------------------------------------------------------ masks

    def mask(self, configuration: Configuration) -> np.ndarray:
        """The admissible tokens at `configuration` (bool (V,), read-only; eos iff the output may end, and only eos
        once it is finished), memoized per configuration."""
        return self._mask_of(configuration)[0]

    def _mask_of(self, configuration: Configuration) -> tuple[np.ndarray, bool]:
        """The mask and the shaped flag after it (set where the budget changed this mask, or before)."""
        _check(configuration)
        key = _mask_key(configuration)
        found = self._masks.get(key)
        if found is not None:
            self._masks.move_to_end(key)
            return found
        if configuration.finished:
            allowed = np.zeros(self.vocab.size, dtype=bool)
            allowed[self.vocab.eos_ids] = True
            found = (allowed, configuration.budget_shaped)
        else:
            scratch = self._load(configuration)
            allowed = scratch.mask()
            found = (allowed, scratch.budget_shaped)
        allowed.setflags(write=False)
        self._masks[key] = found
        if len(self._masks) > MAX_MASKS:
            self._masks.popitem(last=False)
        return found

    def fill(self, configurations: list[Configuration], out: np.ndarray) -> np.ndarray:
        """Write each configuration's mask into row i of `out`: bool (B, ≥ V), or int32 words (B, ≥ ceil(V / 32))
        with token t at bit t % 32 of word t // 32 (as XGrammar's and vLLM's bitmasks); columns past the vocabulary
        are cleared. Returns `out`."""
        if out.ndim != 2 or out.shape[0] < len(configurations):
            raise StdslError(f"the bitmask must be 2-D with a row per configuration, got shape {out.shape}")
        for row, configuration in enumerate(configurations):
            allowed = self.mask(configuration)
            if out.dtype == np.bool_:
                if out.shape[1] < allowed.shape[0]:
                    raise StdslError(f"a bool bitmask needs {allowed.shape[0]} columns, got {out.shape[1]}")
                out[row, : allowed.shape[0]] = allowed
                out[row, allowed.shape[0] :] = False
            elif out.dtype == np.int32:
                words = pack_words(allowed)
                if out.shape[1] < words.shape[0]:
                    raise StdslError(f"an int32 bitmask needs {words.shape[0]} words, got {out.shape[1]}")
                out[row, : words.shape[0]] = words
                out[row, words.shape[0] :] = 0
            else:
                raise StdslError(f"the bitmask must be bool or int32, got {out.dtype}")
        return out

    def cover_mask(self, configuration: Configuration) -> np.ndarray | None:
        """The boundary cover's token mask at `configuration` (None: no cover, any token), before eos and budget."""
        cover = configuration.cover
        return None if cover is None else self._template.planner.cover_mask(cover)

    # ------------------------------------------------------------------ the output

    def spell(self, tokens: list[int]) -> bytes:
        """The bytes `tokens` spell (an output's committed text; add the configuration's `pending` for all it
        decided)."""
        return bytes(self._template.planner.spell(tokens))

    # ------------------------------------------------------------------ the end

    def accepting(self, configuration: Configuration) -> bool:
        """Whether the output may end at `configuration` (nothing held back, an accepting state)."""
        return self._load(configuration).accepting

    def finish_reason(self, configuration: Configuration, eos_sampled: bool) -> str:
        """'length', 'eos' or 'stop' for an output that ended at `configuration` (`stdsl.control.finish`)."""
        return finish_reason(self._load(configuration), eos_sampled)

    def _load(self, configuration: Configuration) -> ConstraintState:
        """A scratch row state at `configuration` with an empty log (it shares the template's tables)."""
        _check(configuration)
        scratch = copy.copy(self._template)
        scratch.state, scratch.pending = configuration.state, configuration.pending
        scratch.window = configuration.window
        scratch.cover, scratch.remaining = configuration.cover, configuration.remaining
        scratch.finished, scratch.budget_shaped = configuration.finished, configuration.budget_shaped
        scratch.committed, scratch.tokens, scratch.forced_count = bytearray(), [], 0
        scratch.started = True
        return scratch


def _check(configuration: Any) -> None:
    if not isinstance(configuration, Configuration):
        raise StdslError(f"expected a Configuration, got {type(configuration).__name__}")


def configuration_of(control: ConstraintState) -> Configuration:
    """The configuration a row state samples at now (its log left out)."""
    if not control.started:
        raise GenerationError("call start() before reading the configuration")
    return _configuration(control)


def _configuration(control: ConstraintState) -> Configuration:
    return Configuration(control.state, control.pending, control.window, control.cover, control.remaining,
                         control.finished, control.budget_shaped)


def _mask_key(configuration: Configuration) -> tuple[Any, ...]:
    """What a mask (and the shaped flag after it) depends on: not the window, whose effect the cover carries."""
    return (configuration.state, configuration.pending, configuration.cover, configuration.remaining,
            configuration.finished, configuration.budget_shaped)

