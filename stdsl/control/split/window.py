"""The window of fed output the forced planner re-splits and the boundary cover reads (D.3)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """The output from the last stable block boundary (the anchor) to the end of what was fed.

    `starts[i]` is the offset in `text` where fed token `tokens[i]` starts (tokens that start
    before the anchor are dropped).  Everything before the anchor can never be re-split.
    `forced_end` is the end of the last forced byte in `text` (0: the window holds none);
    `spanned` says that the last fed token was sampled as exactly a held-back one-token block (D.3).
    Frozen: a move makes a new window, so a kept configuration (a fork) never changes under its holder.
    """

    text: bytes = b""
    starts: tuple[int, ...] = ()
    tokens: tuple[int, ...] = ()
    forced_end: int = 0
    spanned: bool = False
