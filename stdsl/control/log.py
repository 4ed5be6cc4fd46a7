"""The values a controller reads and returns: a `Configuration`, a `Move`, and the `Log` of one output.

A row holds its controller (`stdsl.control.controller`) and its log: the configuration it samples at, the
tokens fed, the bytes they spell and how many were forced. `apply` is the only way a log changes, and it
returns a new one, so a fork (certified drafting's replay, a draft resumed) is the log kept, and moving it
never touches the original. A recording log also keeps the token sampled at each output offset (a draft's
replay must take the sampled one where the forced-span policy re-split it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stdsl.control.split.boundary_cover import BoundaryCover
from stdsl.control.split.window import Window


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
    """Whether the token budget changed this output: at some step its mask withheld a token the mask without it
    admitted, or a forced span was split on its own to fit. Until then the output is, token for token, what
    decoding without a budget gives (the finish reason is then "length", never "stop")."""


@dataclass(frozen=True)
class Move:
    """One step of a controller: the configuration it reaches, the tokens to feed (the sampled token's canonical
    re-split and the forced span after it; empty after eos), how many of them were forced, the bytes they spell,
    and the token sampled (None for a start)."""

    configuration: Configuration
    feed: tuple[int, ...]
    forced: int
    data: bytes = b""
    sampled: int | None = None


@dataclass(frozen=True)
class Log:
    """What an output emitted under its controller (see the module docstring); `sampled` is None unless recording."""

    configuration: Configuration
    tokens: tuple[int, ...] = ()
    data: bytes = b""
    """The bytes the tokens spell (committed); `decided` adds the configuration's held-back bytes."""
    forced: int = 0
    sampled: tuple[tuple[int, int], ...] | None = None
    """(output offset, token) of each sampled token since recording began (None: not recording)."""

    def apply(self, move: Move) -> Log:
        """The log after `move` (a move from this log's configuration); this one is left as it was."""
        sampled = self.sampled
        if sampled is not None and move.sampled is not None:
            sampled = (*sampled, (len(self.data), move.sampled))
        return Log(move.configuration, self.tokens + move.feed, self.data + move.data, self.forced + move.forced,
                   sampled)

    def recording(self) -> Log:
        """This log, recording the tokens sampled from here on (kept ones stay)."""
        return self if self.sampled is not None else replace(self, sampled=())

    @property
    def decided(self) -> bytes:
        """All output bytes decided so far: fed tokens plus held-back forced bytes."""
        return self.data + self.configuration.pending

    def sampled_tokens(self) -> dict[int, int]:
        """The tokens a recording log sampled, by output offset (empty when not recording)."""
        return dict(self.sampled or ())
