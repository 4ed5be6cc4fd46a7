"""The window of fed output the forced planner re-splits and the boundary cover reads (D.3)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Window:
    """The output from the last stable block boundary (the anchor) to the end of what was fed.

    `starts[i]` is the offset in `text` where fed token `tokens[i]` starts (tokens that start
    before the anchor are dropped).  Everything before the anchor can never be re-split.
    `forced_end` is the end of the last forced byte in `text` (0: the window holds none);
    `spanned` says that the last fed token was sampled as exactly a held-back one-token block (D.3).
    """

    text: bytes = b""
    starts: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    forced_end: int = 0
    spanned: bool = False
