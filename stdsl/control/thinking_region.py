"""Where a row's thinking block lies in its decided bytes: thinking text, closing text, answer's head, answer.

The output is THINK · CLOSE · HEAD · ANSWER (or OPEN first, or optionally, or HEAD · ANSWER alone;
`stdsl.compiler.reasoning`).  Since THINK never contains the closing tag, the block ends at the tag's
first occurrence, so the split of a prefix of the output is decided as it grows: bytes that might
still begin the tag (or, before an optional block, the opening tag) are held back until they are decided.
"""

from __future__ import annotations

from stdsl.compiler.reasoning import ThinkingFormat


def partial_suffix(data: bytes, tag: bytes) -> int:
    """The length of the longest suffix of `data` that is a proper prefix of `tag`."""
    for size in range(min(len(tag) - 1, len(data)), 0, -1):
        if data.endswith(tag[:size]):
            return size
    return 0


class ThinkingRegion:
    """The thinking block of one output in `mode` (`tokens`: the tags written as one token); every query takes the
    output's decided bytes so far (which only grow), and positions found once are kept."""

    def __init__(self, fmt: ThinkingFormat, mode: str, tokens: tuple[str, ...] = ()) -> None:
        self.format = fmt
        self.mode = mode
        self.open, self.close, self.close_text, self.head = fmt.spelled(tokens)
        """The tags, closing text and answer's head as the output's bytes (the markers in `tokens` in their
        tokens' spelling)."""
        self.start: int | None = {"opened": 0, "off": -1}.get(mode)
        """Offset where the thinking text starts (None: not decided yet, -1: the output has no block)."""
        self.end: int | None = None
        """Offset of the closing tag once written (the thinking text ends there)."""

    def _locate(self, decided: bytes) -> None:
        if self.start is None:
            if decided.startswith(self.open):
                self.start = len(self.open)
            elif not self.open.startswith(decided):
                self.start = -1
        if self.start is not None and self.start >= 0 and self.end is None:
            found = decided.find(self.close, self.start)
            if found >= 0:
                self.end = found

    @property
    def has_block(self) -> bool:
        """Whether the output has a thinking block (known once its start is decided)."""
        return self.start is not None and self.start >= 0

    def thinking_open(self, decided: bytes) -> bool:
        """Whether the output is inside the thinking block now (opened, not yet closed)."""
        self._locate(decided)
        return self.has_block and self.end is None

    def thinking(self, decided: bytes, final: bool = False) -> bytes:
        """The thinking text decided so far (without the tags; a possible start of the closing tag held back)."""
        self._locate(decided)
        if self.start is None or self.start < 0:
            return b""
        if self.end is not None:
            return decided[self.start:self.end]
        held = 0 if final else partial_suffix(decided[self.start:], self.close)
        return decided[self.start:len(decided) - held]

    def answer(self, decided: bytes) -> bytes:
        """The answer's bytes decided so far (nothing while the block, its closing text or the answer's head is
        still being written)."""
        self._locate(decided)
        if self.start == -1:
            after = 0
        elif self.end is None:
            return b""
        else:
            after = self.end + len(self.close_text)
        return decided[after + len(self.head):] if len(decided) >= after + len(self.head) else b""

    def closing_rest(self, decided: bytes) -> bytes:
        """The bytes that close the open block soonest from here: the rest of a closing tag begun at the end of
        the thinking text, or the whole tag."""
        assert self.start is not None and self.start >= 0
        begun = partial_suffix(decided[self.start:], self.close)
        return self.close[begun:]
