"""The forced planner (Appendix D.3): forced text fed in the tokenizer's own split (Theorem 20).

After a sampled token y, the planner follows the automaton's forced chain w, commits the
pre-token blocks of the output that no later byte can change, holds back the last block unless
the stable-tail test certifies it, heals y when it would merge with w, and sets the boundary
cover (a held-back block that is one token must be spanned by the next sampled token).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from stdsl.errors import GenerationError

MAX_CODEPOINT_SCAN = 70_000


class PreTokenizingTokenizer(Protocol):
    """What the planner needs from a tokenizer: encoding and its pre-token blocks as byte spans."""

    def encode(self, text: str) -> list[int]: ...

    def pre_tokenize(self, text: str) -> list[tuple[int, int]]: ...


@dataclass
class Window:
    """The output from the last stable block boundary (the anchor) to the end of what was fed.

    `starts[i]` is the offset in `text` where fed token `tokens[i]` starts (tokens that start
    before the anchor are dropped).  Everything before the anchor can never be re-split.
    """

    text: bytes = b""
    starts: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    """What to feed after one sampling step, and the configuration the next step samples at.

    `tokens` replace the sampled token (itself, or its healed re-encoding) followed by the forced
    tokens; `state` is the automaton state after the fed bytes, `pending` the held-back forced
    bytes, `cover` the least byte length of the next sampled token (`cover_exempt`: shorter tokens
    the tokenizer itself starts the block with, for some allowed next character), `end_state` the chain end,
    `decided` the bytes from the previous commit point to the chain end.
    """

    tokens: tuple[int, ...]
    healed: bool
    state: int
    pending: bytes
    cover: int
    cover_exempt: frozenset[int]
    end_state: int
    decided: bytes
    window: Window
    finished: bool


def valid_utf8_prefix(data: bytes) -> int:
    """Length of the longest prefix of `data` that is valid UTF-8."""
    try:
        data.decode("utf-8")
        return len(data)
    except UnicodeDecodeError as error:
        return error.start


def _char_class(ch: str) -> str:
    """The class a regex pre-tokenizer distinguishes a character by (letter, mark, number, space, other)."""
    if ch.isspace():
        return "space"
    category = unicodedata.category(ch)
    return category[0] if category[0] in "LMN" else "other"


@cache
def lead_byte_representatives(lead: int) -> tuple[str, ...]:
    """One character per pre-tokenizer class among the characters whose UTF-8 starts with `lead`."""
    if 0xC2 <= lead <= 0xDF:
        first, last = max((lead & 0x1F) << 6, 0x80), ((lead & 0x1F) << 6) | 0x3F
    elif 0xE0 <= lead <= 0xEF:
        first, last = max((lead & 0x0F) << 12, 0x800), ((lead & 0x0F) << 12) | 0xFFF
    elif 0xF0 <= lead <= 0xF4:
        first, last = max((lead & 0x07) << 18, 0x10000), min(((lead & 0x07) << 18) | 0x3FFFF, 0x10FFFF)
    else:
        return ()
    found: dict[str, str] = {}
    for code in range(first, min(last, first + MAX_CODEPOINT_SCAN) + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        ch = chr(code)
        found.setdefault(_char_class(ch), ch)
        if len(found) == 5:
            break
    return tuple(found.values())


class ForcedPlanner:
    """The canonical policy of Theorem 20 for one automaton and one tokenizer.

    `token_bytes[i]` is token i's bytes (None for specials); single-byte tokens are the fallback
    for byte runs that are not valid UTF-8 (a forced span that starts inside a character).
    """

    def __init__(
        self,
        automaton: Any,
        tokenizer: PreTokenizingTokenizer,
        token_bytes: Sequence[bytes | None],
        healing: bool = True,
    ) -> None:
        self.automaton = automaton
        self.tokenizer = tokenizer
        self.token_bytes = token_bytes
        self.healing = healing
        self.transitions = np.asarray(automaton.transitions)
        self.live_count = np.count_nonzero(self.transitions >= 0, axis=1)
        self.by_bytes: dict[bytes, int] = {}
        for i, b in enumerate(token_bytes):
            if b:
                self.by_bytes.setdefault(bytes(b), i)
        missing = [b for b in range(256) if bytes([b]) not in self.by_bytes]
        self.byte_tokens = {b: self.by_bytes.get(bytes([b]), -1) for b in range(256)}
        self._missing_bytes = set(missing)
        self._tail_cache: dict[tuple[bytes, int], bool] = {}
        self._exempt_cache: dict[tuple[bytes, int], frozenset[int]] = {}
        self._chain_cache: dict[int, tuple[bytes, int]] = {}

    # ------------------------------------------------------------------ helpers

    def chain(self, state: int) -> tuple[bytes, int]:
        """(forced chain, chain end) of `state`, cached."""
        hit = self._chain_cache.get(state)
        if hit is None:
            hit = (self.automaton.forced_chain(state), self.automaton.chain_end(state))
            self._chain_cache[state] = hit
        return hit

    def spell(self, tokens: Sequence[int]) -> bytes:
        """The bytes a token sequence spells."""
        return b"".join(self.token_bytes[t] or b"" for t in tokens)

    def boundaries(self, text: str, spans: Sequence[tuple[int, int]] | None = None) -> list[int]:
        """Sorted block boundaries (byte offsets, 0 and the end included) of the pre-tokenized `text`."""
        if spans is None:
            spans = self.tokenizer.pre_tokenize(text)
        bounds = {0, len(text.encode("utf-8"))}
        for start, end in spans:
            bounds.add(start)
            bounds.add(end)
        return sorted(bounds)

    def encode_segment(self, data: bytes) -> list[int]:
        """Canonical tokens of `data` on its own: blocks of its valid UTF-8 runs, single bytes elsewhere."""
        out: list[int] = []
        position = 0
        while position < len(data):
            valid = valid_utf8_prefix(data[position:])
            if valid == 0:
                byte = data[position]
                if byte in self._missing_bytes:
                    raise GenerationError(f"byte {byte:#04x} has no single-byte token to spell forced text")
                out.append(self.byte_tokens[byte])
                position += 1
                continue
            text = data[position : position + valid].decode("utf-8")
            cuts = self.boundaries(text)
            raw = text.encode("utf-8")
            for start, end in pairwise(cuts):
                out.extend(self.tokenizer.encode(raw[start:end].decode("utf-8")))
            position += valid
        if self.spell(out) != data:
            raise GenerationError(f"the tokenizer's split of {data!r} does not spell it")
        return out

    def stable_tail(self, tail: bytes, end_state: int) -> bool:
        """The stable-tail test (Theorem 20(ii)): every byte allowed at `end_state` starts a new block.

        `tail` is the output from the start of its last block; ASCII bytes are tried as themselves,
        non-ASCII lead bytes by one character per pre-tokenizer class.
        """
        key = (tail, end_state)
        hit = self._tail_cache.get(key)
        if hit is not None:
            return hit
        text = tail.decode("utf-8")
        result = True
        live = np.flatnonzero(self.transitions[end_state] >= 0)
        if any(byte >= 0x80 and not lead_byte_representatives(int(byte)) for byte in live):
            result = False
        else:
            result = all(len(tail) in self.boundaries(text + ch) for ch in self.next_characters(end_state))
        self._tail_cache[key] = result
        return result

    def next_characters(self, state: int) -> list[str]:
        """Characters that may follow `state`: every live ASCII byte, one per class per live lead byte."""
        out: list[str] = []
        for byte in np.flatnonzero(self.transitions[state] >= 0).tolist():
            out.extend((chr(byte),) if byte < 0x80 else lead_byte_representatives(byte))
        return out

    def cover_exemptions(self, block: bytes, end_state: int) -> frozenset[int]:
        """Tokens shorter than the held-back single-token `block` that the tokenizer starts `block + c` with.

        The boundary cover admits them: for such a next character c the canonical split of the
        merged block begins with a shorter token, and the cover must not forbid it.
        """
        key = (block, end_state)
        hit = self._exempt_cache.get(key)
        if hit is not None:
            return hit
        text = block.decode("utf-8")
        found: set[int] = set()
        for ch in self.next_characters(end_state):
            first = self.tokenizer.encode(text + ch)[:1]
            if first and len(self.token_bytes[first[0]] or b"") < len(block):
                found.add(first[0])
        result = frozenset(found)
        self._exempt_cache[key] = result
        return result

    # ------------------------------------------------------------------ the policy

    def plan(self, window: Window, state: int, pending: bytes, sampled: int | None) -> Plan:
        """The canonical plan after sampling `sampled` at `state` (None: the start, before any sample)."""
        y = b"" if sampled is None else (self.token_bytes[sampled] or b"")
        if sampled is not None and not y:
            raise GenerationError(f"token {sampled} spells no bytes and cannot be fed as output")
        after_y = self.automaton.step(state, y)
        if after_y < 0:
            raise GenerationError(f"token {sampled} ({y!r}) is not allowed at state {state}")
        forced, end_state = self.chain(after_y)
        base = window.text
        s = base + y + forced
        y_start, y_end = len(base), len(base) + len(y)
        finished = bool(self.live_count[end_state] == 0)
        valid = valid_utf8_prefix(s)
        text = s[:valid].decode("utf-8")
        spans = self.tokenizer.pre_tokenize(text)
        bounds = self.boundaries(text, spans)
        last_start = spans[-1][0] if spans else valid
        trailing_ws = len(text) - len(text.rstrip())
        ws_start = valid - len(text[len(text) - trailing_ws :].encode("utf-8"))
        m = min(last_start, ws_start)
        stable = max(b for b in bounds if b <= m)
        certified = bool(forced) and valid == len(s) and trailing_ws == 0
        certified = certified and self.stable_tail(s[last_start:], end_state)
        commit_end = len(s) if finished or certified else max(y_end, stable)
        unhealed = [] if sampled is None else [sampled]
        unhealed += self.encode_segment(s[y_end:commit_end])
        tokens, healed = unhealed, False
        if sampled is not None and commit_end > y_end and y_end not in bounds and self.healing:
            replacement = self._heal(window, s, bounds, y_start, commit_end)
            if replacement is not None and replacement != unhealed and len(replacement) <= len(unhealed):
                tokens, healed = replacement, True
        if self.spell(tokens) != s[y_start:commit_end]:
            raise GenerationError(f"planned tokens {tokens} do not spell {s[y_start:commit_end]!r}")
        pending_bytes = s[commit_end:]
        next_state = self.automaton.step(state, s[y_start:commit_end])
        cover, exempt = 0, frozenset[int]()
        if pending_bytes and commit_end in bounds and valid == len(s):
            inner = [b for b in bounds if commit_end < b < len(s)]
            if not inner and pending_bytes in self.by_bytes:
                cover = len(pending_bytes)
                exempt = self.cover_exemptions(pending_bytes, end_state)
        anchor = len(s) if certified else min(stable, commit_end)
        new_window = self._advance_window(window, s[:commit_end], y_start, tokens, anchor)
        return Plan(
            tokens=tuple(tokens),
            healed=healed,
            state=next_state,
            pending=pending_bytes,
            cover=cover,
            cover_exempt=exempt,
            end_state=end_state,
            decided=s[y_start:],
            window=new_window,
            finished=finished,
        )

    def table_plan(self, window: Window, state: int, sampled: int | None) -> Plan:
        """The context-free fallback policy the budget table counts: the whole chain, split on its own."""
        y = b"" if sampled is None else (self.token_bytes[sampled] or b"")
        after_y = self.automaton.step(state, y)
        if after_y < 0:
            raise GenerationError(f"token {sampled} ({y!r}) is not allowed at state {state}")
        forced, end_state = self.chain(after_y)
        tokens = ([] if sampled is None else [sampled]) + self.encode_segment(forced)
        s = window.text + y + forced
        new_window = self._advance_window(window, s, len(window.text), tokens, 0)
        return Plan(
            tokens=tuple(tokens),
            healed=False,
            state=end_state,
            pending=b"",
            cover=0,
            cover_exempt=frozenset(),
            end_state=end_state,
            decided=y + forced,
            window=new_window,
            finished=bool(self.live_count[end_state] == 0),
        )

    def chain_token_count(self, state: int) -> int:
        """|φ(state)| under the table policy: tokens of the state's whole forced chain."""
        forced, _ = self.chain(state)
        return len(self.encode_segment(forced)) if forced else 0

    # ------------------------------------------------------------------ internals

    def _heal(self, window: Window, s: bytes, bounds: list[int], y_start: int, commit_end: int) -> list[int] | None:
        """Tokens that replace y and the forced tokens: the canonical split from the nearest block start.

        The split starts at the last block boundary at or before y where a fed token starts (or y
        itself); earlier fed tokens must agree with the canonical split, else y is left as sampled.
        """
        fed_starts = set(window.starts) | {y_start}
        origin = max((b for b in bounds if b <= y_start and b in fed_starts), default=None)
        if origin is None:
            return None
        previous = [t for start, t in zip(window.starts, window.tokens) if start >= origin]
        canonical = self.encode_segment(s[origin:commit_end])
        if canonical[: len(previous)] != previous or len(canonical) <= len(previous):
            return None
        return canonical[len(previous) :]

    def _advance_window(self, window: Window, text: bytes, y_start: int, tokens: Sequence[int], anchor: int) -> Window:
        """The window after feeding `tokens` from `y_start`, re-anchored at the stable boundary `anchor`."""
        starts = list(window.starts)
        toks = list(window.tokens)
        position = y_start
        for token in tokens:
            starts.append(position)
            toks.append(token)
            position += len(self.token_bytes[token] or b"")
        return _reanchor(Window(text, starts, toks), anchor)


def _reanchor(window: Window, anchor: int) -> Window:
    """Drop everything before `anchor` (a stable block boundary) from the window."""
    if anchor <= 0:
        return window
    kept = [(s - anchor, t) for s, t in zip(window.starts, window.tokens) if s >= anchor]
    return Window(window.text[anchor:], [s for s, _ in kept], [t for _, t in kept])
