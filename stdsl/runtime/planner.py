"""The forced planner (Appendix D.3): forced text fed in the tokenizer's own split (Theorem 20).

After a sampled token y, the planner follows the automaton's forced chain w, commits the
pre-token blocks of the output that no later byte can change, holds back the last block unless
the stable-tail test certifies it, heals y when it would merge with w, and sets the boundary
cover: while the open block holds forced bytes, the next token must continue the tokenizer's own
split of that block for some allowed next character and the forced chain after it.

Output text never contains special tokens (their vocabulary bytes are None), so "the tokenizer's
own split" is `encode_ordinary`: `encode` with special-token text spelled as ordinary text.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from stdsl.errors import GenerationError

MAX_CODEPOINT_SCAN = 70_000


MAX_LOOKAHEAD_BYTES = 64
"""How much of the forced chain after a next character the boundary cover looks at."""

MAX_CACHED_COVERS = 4096

MAX_BRANCHES = 16
"""Choices after a forced chain up to which the cover looks one character further."""

PUNCTUATION = frozenset(bytes([b]) for b in b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
"""ASCII punctuation: characters that extend a punctuation block in the regex pre-tokenizers."""


class PreTokenizingTokenizer(Protocol):
    """What the planner needs from a tokenizer: the encoding of output text and its pre-token blocks."""

    def encode_ordinary(self, text: str) -> list[int]: ...

    def pre_tokenize(self, text: str, ordinary: bool = False) -> list[tuple[int, int]]: ...


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


@dataclass(frozen=True)
class Lookahead:
    """A continuation the boundary cover tries: `text`, and the prefix lengths [cut_from, cut_to) of
    it where a token that stops short of the tokenizer's token over it is cut (the bytes after the
    first character up to the next choice are decided by the constraint). `chained`: forced bytes follow;
    `extended`: longer lookaheads through the choice after it exist (its own split there is provisional)."""

    text: bytes
    cut_from: int
    cut_to: int
    chained: bool
    extended: bool = False


@dataclass(frozen=True)
class BoundaryCover:
    """The next tokens that keep the open block's split canonical (the boundary cover of D.3).

    With `held` forced bytes held back, a token of at most `held` bytes is admitted iff it is in
    `short`; a longer one iff its byte at offset `held` is in `after` and it is not in `excluded`
    (it spells a continuation whose split does not extend the fed tokens, or it ends inside the
    tokenizer's next token where the constraint decides those bytes). `eos`: the output may end
    here with the block's split canonical. Every byte in `live` keeps some token that starts with
    it, so the cover never makes an output unreachable (its lookahead is finite; BPE's is not);
    after a spanned block, bytes whose split the cover offered as a longer token one step before are
    not in it (that token was the way there).
    """

    held: int
    short: frozenset[int]
    after: frozenset[int]
    eos: bool
    excluded: frozenset[int] = frozenset()
    live: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Plan:
    """What to feed after one sampling step, and the configuration the next step samples at.

    `tokens` replace the sampled token (itself, or its healed re-encoding) followed by the forced
    tokens; `state` is the automaton state after the fed bytes, `pending` the held-back forced
    bytes, `cover` the boundary cover of the next sampled token (None: any token), `end_state`
    the chain end, `decided` the bytes from the previous commit point to the chain end.
    """

    tokens: tuple[int, ...]
    healed: bool
    state: int
    pending: bytes
    cover: BoundaryCover | None
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
        self.longest_token = max((len(b) for b in self.by_bytes), default=1)
        missing = [b for b in range(256) if bytes([b]) not in self.by_bytes]
        self.byte_tokens = {b: self.by_bytes.get(bytes([b]), -1) for b in range(256)}
        self._missing_bytes = set(missing)
        self._tail_cache: dict[tuple[bytes, int], bool] = {}
        self._chain_cache: dict[int, tuple[bytes, int]] = {}
        self._lookahead_cache: dict[int, tuple[Lookahead, ...]] = {}
        self._cover_cache: dict[tuple[bytes, tuple[int, ...], int, int], BoundaryCover | None] = {}
        self._cover_masks: dict[BoundaryCover, np.ndarray] = {}
        self._bytes_at: dict[int, np.ndarray] = {}

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
        """Sorted block boundaries (byte offsets, 0 and the end included) of the pre-tokenized output `text`."""
        if spans is None:
            spans = self.tokenizer.pre_tokenize(text, ordinary=True)
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
                out.append(self._byte_token(data[position]))
                position += 1
                continue
            text = data[position : position + valid].decode("utf-8")
            cuts = self.boundaries(text)
            raw = text.encode("utf-8")
            for start, end in pairwise(cuts):
                out.extend(self._encode_block(raw[start:end]))
            position += valid
        return out

    def _encode_block(self, block: bytes) -> list[int]:
        """The tokenizer's split of one pre-token block, or (when that does not spell the bytes, as
        under Unicode normalization) the longest vocabulary tokens that do, left to right."""
        tokens = self.tokenizer.encode_ordinary(block.decode("utf-8"))
        if self.spell(tokens) == block:
            return tokens
        out: list[int] = []
        position = 0
        while position < len(block):
            for width in range(min(self.longest_token, len(block) - position), 0, -1):
                token = self.by_bytes.get(block[position : position + width])
                if token is not None:
                    break
            else:
                token = self._byte_token(block[position])
                width = 1
            out.append(token)
            position += width
        return out

    def _byte_token(self, byte: int) -> int:
        """The single-byte token of `byte`; GenerationError if the vocabulary has none."""
        if byte in self._missing_bytes:
            raise GenerationError(f"byte {byte:#04x} has no single-byte token to spell forced text")
        return self.byte_tokens[byte]

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

    # ------------------------------------------------------------------ the boundary cover

    def lookaheads(self, state: int) -> tuple[Lookahead, ...]:
        """What may follow `state`, as far as a split can depend on it (b"" when the output may end here):

        each next character with the forced chain after it (up to MAX_LOOKAHEAD_BYTES); after a
        punctuation character that nothing forces on from, each punctuation character that may follow
        it (punctuation runs are one pre-token block, where BPE merges reach furthest); after a chain
        that ends at a choice of at most MAX_BRANCHES characters (an enum's values), each of them with
        its own chain, so a token that stops inside the tokenizer's token over the chain can be cut.
        """
        hit = self._lookahead_cache.get(state)
        if hit is not None:
            return hit
        found: dict[bytes, Lookahead] = {}
        if self.automaton.accepting[state]:
            found[b""] = Lookahead(b"", 0, 0, False)
        for data, after in self._next_steps(state):
            chain = self.chain(after)[0][:MAX_LOOKAHEAD_BYTES]
            text = data + chain
            choices = self._next_steps(self.chain(after)[1]) if chain and len(chain) < MAX_LOOKAHEAD_BYTES else []
            extended = 0 < len(choices) <= MAX_BRANCHES
            found.setdefault(text, Lookahead(text, len(data), len(text), bool(chain), extended))
            if extended:
                for more, beyond in choices:
                    longer = text + more + self.chain(beyond)[0][:MAX_LOOKAHEAD_BYTES]
                    found.setdefault(longer, Lookahead(longer, len(data), len(text) + 1, True))
            elif not chain and data in PUNCTUATION:
                for more, beyond in self._next_steps(after):
                    if more in PUNCTUATION:
                        longer = data + more + self.chain(beyond)[0][:MAX_LOOKAHEAD_BYTES]
                        found.setdefault(longer, Lookahead(longer, len(longer), len(longer), False))
        result = tuple(found.values())
        self._lookahead_cache[state] = result
        return result

    def _next_steps(self, state: int) -> list[tuple[bytes, int]]:
        """(character bytes, state after them) for each of `next_characters(state)` the automaton admits."""
        out = []
        for ch in self.next_characters(state):
            data = ch.encode("utf-8")
            after = self.automaton.step(state, data)
            if after >= 0:
                out.append((data, after))
        return out

    def boundary_cover(self, window: Window, pending: bytes, end_state: int) -> BoundaryCover | None:
        """The boundary cover at a sampling configuration, or None when the open block holds no forced byte.

        The open block is the window (from a stable boundary, Theorem 20(i)) plus the held-back
        bytes. For every lookahead x of the chain end, the tokenizer's split of block + x is taken;
        where it extends the fed tokens, its next token is what the cover admits. D.3's rule then
        applies: when the held-back block is one vocabulary token and the split starts it with a
        shorter token only for some continuations, the model must span the block with one token,
        and those continuations stay admitted after it (`_spanned_block`). None also when no
        lookahead extends the fed tokens (an earlier sampled token already left the tokenizer's split).
        """
        light = not pending and window.forced_end == 0
        if light and not any(ahead.chained for ahead in self.lookaheads(end_state)):
            return None
        key = (window.text + pending, tuple(window.tokens), len(pending), end_state)
        if key in self._cover_cache:
            return self._cover_cache[key]
        cover = self._chained_cover(window, end_state) if light else self._compute_cover(window, pending, end_state)
        if len(self._cover_cache) >= MAX_CACHED_COVERS:
            self._cover_cache.clear()
        self._cover_cache[key] = cover
        return cover

    def _compute_cover(self, window: Window, pending: bytes, end_state: int) -> BoundaryCover | None:
        block = window.text + pending
        fed = list(window.tokens)
        if valid_utf8_prefix(block) != len(block) or self.spell(fed) != window.text:
            return None
        spanned = self._spanned_block(window, pending)
        short: set[int] = set()
        after: set[int] = set()
        following: set[int] = set()
        cut: set[int] = set()
        kept: list[bytes] = []
        offered: set[int] = set()
        eos = False
        for ahead in self.lookaheads(end_state):
            lookahead = ahead.text
            data = block + lookahead
            canonical = self.tokenizer.encode_ordinary(data[: valid_utf8_prefix(data)].decode("utf-8"))
            if canonical[: len(fed)] != fed:
                if spanned and self._starts_shorter(canonical, fed, longer=True):
                    offered.update(lookahead[:1])
                if not (spanned and self._starts_shorter(canonical, fed)):
                    continue
            elif len(canonical) > len(fed):
                token = canonical[len(fed)]
                width = len(self.token_bytes[token] or b"")
                if width <= len(pending):
                    short.add(token)
                    continue
                rest = pending + lookahead
                if not ahead.extended:
                    following.add(token)
                    if width >= len(rest):
                        following.update(self._prefix_tokens(rest, len(pending)))
                stop = min(width, len(pending) + ahead.cut_to)
                cut.update(self.by_bytes.get(rest[:k], -1) for k in range(len(pending) + ahead.cut_from, stop))
            if lookahead:
                after.add(lookahead[0])
                kept.append(lookahead)
            else:
                eos = eos or not pending
        whole = self.by_bytes.get(pending) if pending else None
        shorter = {t for t in short if len(self.token_bytes[t] or b"") < len(pending)}
        if whole is not None and shorter and (after or short - shorter):
            short = (short - shorter) | {whole}
        if not (short or after or eos):
            return None
        excluded = (cut - following - {-1}) | self._off_lookahead(len(pending), after, kept)
        live = frozenset() if short else frozenset(np.flatnonzero(self.transitions[end_state] >= 0).tolist())
        return BoundaryCover(len(pending), frozenset(short), frozenset(after), eos, frozenset(excluded),
                             live - offered)

    def _off_lookahead(self, held: int, after: set[int], kept: list[bytes]) -> set[int]:
        """Tokens longer than `held` that spell no kept lookahead's start (ASCII first bytes whose
        lookaheads all continue with decided bytes; any token agrees with a lookahead that does not)."""
        off: set[int] = set()
        firsts = self._byte_at(held)
        for byte in after:
            starting = [x for x in kept if x[0] == byte]
            if byte >= 0x80 or any(len(x) == 1 for x in starting):
                continue
            for token in np.flatnonzero((firsts == byte) & (self._lengths > held)).tolist():
                spelled = (self.token_bytes[token] or b"")[held:]
                if not any(spelled[: len(x)] == x[: len(spelled)] for x in starting):
                    off.add(token)
        return off

    def _chained_cover(self, window: Window, end_state: int) -> BoundaryCover | None:
        """The cover where nothing forced is open yet but forced bytes may follow the next character:
        only the tokens that stop inside the tokenizer's token over those bytes and the choice after
        them are cut (healing re-splits the rest); None when there are none."""
        block = window.text
        fed = list(window.tokens)
        if valid_utf8_prefix(block) != len(block) or self.spell(fed) != block:
            return None
        cut: set[int] = set()
        following: set[int] = set()
        for ahead in self.lookaheads(end_state):
            if not ahead.chained or ahead.cut_to <= ahead.cut_from:
                continue
            data = block + ahead.text
            canonical = self.tokenizer.encode_ordinary(data[: valid_utf8_prefix(data)].decode("utf-8"))
            if canonical[: len(fed)] != fed or len(canonical) == len(fed):
                continue
            token = canonical[len(fed)]
            width = len(self.token_bytes[token] or b"")
            if ahead.extended:
                continue
            following.add(token)
            if width >= len(ahead.text):
                following.update(self._prefix_tokens(ahead.text, 0))
            elif width >= ahead.cut_to:
                cut.update(self.by_bytes.get(ahead.text[:k], -1) for k in range(ahead.cut_from, ahead.cut_to))
        excluded = cut - following - {-1}
        if not excluded:
            return None
        live = frozenset(np.flatnonzero(self.transitions[end_state] >= 0).tolist())
        return BoundaryCover(0, frozenset(), live, True, frozenset(excluded), live)

    def _prefix_tokens(self, data: bytes, held: int) -> set[int]:
        """Vocabulary tokens that spell a prefix of `data` longer than `held` bytes: where the tokenizer's
        token reaches the end of a lookahead, the split there is not known, so none of them is cut."""
        return {self.by_bytes[data[:k]] for k in range(held + 1, len(data) + 1) if data[:k] in self.by_bytes}

    def _spanned_block(self, window: Window, pending: bytes) -> bool:
        """Whether the last fed token spelled a whole held-back one-token block, so D.3's continuations
        that the tokenizer would have started with a shorter token are admitted after it."""
        return not pending and window.spanned and bool(window.tokens)

    def _forced_prefix(self, state: int, data: bytes) -> int:
        """The end of the last byte of `data` that the automaton forces when read from `state` (0: none)."""
        end = 0
        for i, byte in enumerate(data):
            if self.live_count[state] == 1 and not self.automaton.accepting[state]:
                end = i + 1
            state = self.automaton.step(state, bytes([byte]))
        return end

    def _starts_shorter(self, canonical: Sequence[int], fed: Sequence[int], longer: bool = False) -> bool:
        """Whether `canonical` agrees with `fed` up to its last token and starts that one shorter
        (`longer`: longer, i.e. the spanning token the cover offered in its place one step before)."""
        last = len(fed) - 1
        if len(canonical) <= last or list(canonical[:last]) != list(fed[:last]):
            return False
        ours, theirs = len(self.token_bytes[fed[last]] or b""), len(self.token_bytes[canonical[last]] or b"")
        return theirs > ours if longer else theirs < ours

    def cover_mask(self, cover: BoundaryCover) -> np.ndarray:
        """The tokens a boundary cover admits (bool (V,); eos ids excluded: see `BoundaryCover.eos`)."""
        hit = self._cover_masks.get(cover)
        if hit is not None:
            return hit
        lengths = self._lengths
        allowed = np.zeros(len(self.token_bytes), dtype=bool)
        allowed[list(cover.short)] = True
        byte_ok = np.zeros(257, dtype=bool)
        byte_ok[list(cover.after)] = True
        allowed |= (lengths > cover.held) & byte_ok[self._byte_at(cover.held)]
        allowed[list(cover.excluded)] = False
        firsts = self._byte_at(cover.held)
        for byte in cover.live:
            starting = (firsts == byte) & (lengths > cover.held)
            if not allowed[starting].any():
                allowed |= starting
        if len(self._cover_masks) >= MAX_CACHED_COVERS // 16:
            self._cover_masks.clear()
        self._cover_masks[cover] = allowed
        return allowed

    @cached_property
    def _lengths(self) -> np.ndarray:
        return np.fromiter((len(b or b"") for b in self.token_bytes), dtype=np.int64, count=len(self.token_bytes))

    def _byte_at(self, offset: int) -> np.ndarray:
        """Each token's byte at `offset` (256 where the token is shorter), cached per offset."""
        hit = self._bytes_at.get(offset)
        if hit is None:
            hit = np.fromiter(
                ((b[offset] if b is not None and len(b) > offset else 256) for b in self.token_bytes),
                dtype=np.int64, count=len(self.token_bytes))
            self._bytes_at[offset] = hit
        return hit

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
        forced_in_y = self._forced_prefix(state, y)
        forced_end = y_start + forced_in_y if forced_in_y else window.forced_end
        if forced:
            forced_end = len(s)
        finished = bool(self.live_count[end_state] == 0)
        valid = valid_utf8_prefix(s)
        text = s[:valid].decode("utf-8")
        spans = self.tokenizer.pre_tokenize(text, ordinary=True)
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
        if sampled is not None and y_end < len(s) and y_end not in bounds and self.healing:
            if commit_end > y_end:
                replacement = self._heal(window, s, bounds, y_start, commit_end)
                if replacement is not None and replacement != unhealed:
                    tokens, healed = replacement, True
            else:
                split = self._heal_into_pending(window, s, bounds, y_start, y_end)
                if split is not None:
                    tokens, commit_end, healed = split[0], split[1], True
        pending_bytes = s[commit_end:]
        next_state = self.automaton.step(state, s[y_start:commit_end])
        anchor = len(s) if certified else min(stable, commit_end)
        new_window = self._advance_window(
            window, s[:commit_end], y_start, tokens, anchor, min(forced_end, commit_end))
        new_window.spanned = bool(pending) and y == pending and pending in self.by_bytes and not healed
        return Plan(
            tokens=tuple(tokens),
            healed=healed,
            state=next_state,
            pending=pending_bytes,
            cover=None if finished else self.boundary_cover(new_window, pending_bytes, end_state),
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
        new_window = self._advance_window(window, s, len(window.text), tokens, 0, 0)
        return Plan(
            tokens=tuple(tokens),
            healed=False,
            state=end_state,
            pending=b"",
            cover=None,
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

    def _heal_into_pending(self, window: Window, s: bytes, bounds: list[int], y_start: int,
                           y_end: int) -> tuple[list[int], int] | None:
        """Where y merges with the held-back block after it: the canonical tokens from y's start that
        end within y, and where they end; the rest of y joins the held-back bytes (None: y stays)."""
        fed_starts = set(window.starts) | {y_start}
        origin = max((b for b in bounds if b <= y_start and b in fed_starts), default=None)
        if origin is None:
            return None
        previous = [t for start, t in zip(window.starts, window.tokens) if start >= origin]
        canonical = self.encode_segment(s[origin:])
        if canonical[: len(previous)] != previous:
            return None
        chosen: list[int] = []
        position = y_start
        for token in canonical[len(previous) :]:
            width = len(self.token_bytes[token] or b"")
            if position + width > y_end:
                break
            chosen.append(token)
            position += width
        if not chosen or position == y_end:
            return None
        return chosen, position

    def _advance_window(self, window: Window, text: bytes, y_start: int, tokens: Sequence[int], anchor: int,
                        forced_end: int) -> Window:
        """The window after feeding `tokens` from `y_start`, re-anchored at the stable boundary `anchor`."""
        starts = list(window.starts)
        toks = list(window.tokens)
        position = y_start
        for token in tokens:
            starts.append(position)
            toks.append(token)
            position += len(self.token_bytes[token] or b"")
        return _reanchor(Window(text, starts, toks, forced_end), anchor)


def _reanchor(window: Window, anchor: int) -> Window:
    """Drop everything before `anchor` (a stable block boundary) from the window."""
    if anchor <= 0:
        return window
    kept = [(s - anchor, t) for s, t in zip(window.starts, window.tokens) if s >= anchor]
    return Window(window.text[anchor:], [s for s, _ in kept], [t for _, t in kept], max(0, window.forced_end - anchor))
