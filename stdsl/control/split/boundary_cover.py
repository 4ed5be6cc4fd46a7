"""The boundary cover (D.3): which next tokens keep the tokenizer's own split where forced text meets sampled text.

While the open pre-token block holds forced bytes (or a forced chain follows the next
character), the cover tries each continuation the constraint allows, as far as a split can
depend on it (the next character, its forced chain, one more choice), encodes the block with it
and admits the next tokens that extend the fed tokens in the tokenizer's split. D.3's rule: a
held-back block that is one vocabulary token is spanned by one token. The cover never makes an
output unreachable: every live byte keeps a token where its lookahead cannot vouch for the path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from stdsl.caches import CacheKind
from stdsl.compiler.byte_machine import ByteMachine
from stdsl.compiler.special_tokens import SPECIAL_MARK
from stdsl.control.split.characters import lead_byte_representatives, valid_utf8_prefix
from stdsl.control.split.intern_table import InternTable
from stdsl.control.split.split_memo import SplitMemo
from stdsl.control.split.token_spellings import NO_BYTE, TokenSpellings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from stdsl.control.split.window import Window

MAX_LOOKAHEAD_BYTES = 64
"""How much of the forced chain after a next character the boundary cover looks at."""

MAX_CACHED_COVERS = 4096
COVER_ENTRY_NBYTES = 300
"""About what one remembered lookahead tuple or cover holds (its key, the value's tuples and sets, the slot)."""

MAX_CACHED_PARTS = 16384
"""Lookahead parts kept per tokenizer (shared by its grammars; emptied when full)."""
PART_NBYTES = 400
"""About what one remembered lookahead part holds (its key, the part and their tuples), for `stdsl.caches`."""

MAX_SHARED_VALUES = 65536
"""Equal lookaheads and parts are one object, across states and grammars (each table emptied when full)."""
INTERNED_NBYTES = 200
"""About what one interned lookahead or part holds (the tuple, its fields, the table's slot)."""

MAX_BRANCHES = 16
"""Choices after a forced chain up to which the cover looks one character further."""

PUNCTUATION = frozenset(bytes([b]) for b in b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
"""ASCII punctuation: characters that extend a punctuation block in the regex pre-tokenizers."""


class Lookahead(NamedTuple):
    """A continuation the boundary cover tries: `text`, and the prefix lengths [cut_from, cut_to) of
    it where a token that stops short of the tokenizer's token over it is cut (the bytes after the
    first character up to the next choice are decided by the constraint). `chained`: forced bytes follow;
    `extended`: longer lookaheads through the choice after it exist (its own split there is provisional)."""

    text: bytes
    cut_from: int
    cut_to: int
    chained: bool
    extended: bool = False


class LookaheadPart(NamedTuple):
    """What one lookahead adds to a cover: `offered` a first byte the spanning token stood for one step
    before (-1: none); `counted` whether its continuation keeps the fed tokens (then its first byte is
    admitted, or eos when it is empty), `short` the tokenizer's next token when it ends inside the held
    bytes (-1: none), `following` tokens never cut, `cut` tokens that stop short (-1 entries are ignored)."""

    offered: int
    counted: bool
    short: int = -1
    following: frozenset[int] = frozenset()
    cut: frozenset[int] = frozenset()


PartKey = tuple[tuple[bytes, tuple[int, ...], int, bool], Lookahead]
"""A lookahead part's key: (open block, fed tokens, held bytes, spanned) and the lookahead."""


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


class CoverPlanner(Protocol):
    """What the boundary cover reads from its forced planner: the byte machine, forced chains, the tokenizer's
    spellings and splits."""

    machine: ByteMachine
    tokenizer: Any
    token_bytes: Sequence[bytes | None]
    by_bytes: dict[bytes, int]
    spellings: TokenSpellings
    splits: SplitMemo

    def chain(self, state: int) -> tuple[bytes, int]: ...

    def spell(self, tokens: Sequence[int]) -> bytes: ...


class BoundaryCovers:
    """The boundary covers of one forced planner (its automaton and tokenizer), cached by configuration."""

    def __init__(self, planner: CoverPlanner) -> None:
        self.planner = planner
        self.token_bytes = planner.token_bytes
        self.by_bytes = planner.by_bytes
        self._lookahead_cache: dict[int, tuple[Lookahead, ...]] = {}
        self._chained: dict[int, bool] = {}
        """Per state, whether any of its lookaheads is chained (asked at every sampling step; free text's states
        have over a thousand lookaheads)."""
        self._cover_cache: dict[tuple[bytes, tuple[int, ...], int, int], BoundaryCover | None] = {}
        self._cover_masks: dict[BoundaryCover, np.ndarray] = {}
        self._parts: dict[PartKey, LookaheadPart] = _PARTS.get((planner.tokenizer, planner.token_bytes), dict)

    @property
    def nbytes(self) -> int:
        """An estimate of the memos' bytes: `COVER_ENTRY_NBYTES` per lookahead or cover kept, plus the packed masks."""
        masks = list(self._cover_masks.values())
        entries = len(self._lookahead_cache) + len(self._cover_cache)
        return entries * COVER_ENTRY_NBYTES + sum(int(mask.nbytes) for mask in masks)

    def lookaheads(self, state: int) -> tuple[Lookahead, ...]:
        """What may follow `state`, as far as a split can depend on it (b"" when the output may end here, or a
        special token may follow: no split crosses one, and a forced chain is read up to the first):

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
        steps: dict[int, list[tuple[bytes, int]]] = {}
        punctuation: dict[int, list[bytes]] = {}

        def next_steps(origin: int) -> list[tuple[bytes, int]]:
            if origin not in steps:
                steps[origin] = self._next_steps(origin)
            return steps[origin]

        def punctuation_after(origin: int) -> list[bytes]:
            """Each punctuation character that may follow `origin`, with the forced chain after it."""
            if origin not in punctuation:
                punctuation[origin] = [more + _before_special(self.planner.chain(beyond)[0])[:MAX_LOOKAHEAD_BYTES]
                                       for more, beyond in next_steps(origin) if more in PUNCTUATION]
            return punctuation[origin]

        if self.planner.machine.accepting[state] or self.planner.machine.byte_row(state)[SPECIAL_MARK] >= 0:
            found[b""] = Lookahead(b"", 0, 0, False)
        for data, after in next_steps(state):
            full, chain_end = self.planner.chain(after)
            whole = _before_special(full)
            chain = whole[:MAX_LOOKAHEAD_BYTES]
            text = data + chain
            choices = next_steps(chain_end) if chain and whole == full and len(whole) <= MAX_LOOKAHEAD_BYTES else []
            extended = 0 < len(choices) <= MAX_BRANCHES
            found.setdefault(text, Lookahead(text, len(data), len(text), bool(chain), extended))
            if extended:
                for more, beyond in choices:
                    longer = text + more + self.planner.chain(beyond)[0][:MAX_LOOKAHEAD_BYTES]
                    found.setdefault(longer, Lookahead(longer, len(data), len(text) + 1, True))
            elif not chain and data in PUNCTUATION:
                for pair in punctuation_after(after):
                    longer = data + pair
                    if longer not in found:
                        found[longer] = Lookahead(longer, len(longer), len(longer), False)
        result = tuple(_LOOKAHEADS.intern(ahead) for ahead in found.values())
        self._lookahead_cache[state] = result
        return result

    def _next_steps(self, state: int) -> list[tuple[bytes, int]]:
        """(character bytes, state after them) for each of the state's `next_characters` the automaton admits."""
        out = []
        row = self.planner.machine.byte_row(state)
        for byte in np.flatnonzero(row >= 0).tolist():
            if byte < 0x80:
                out.append((bytes([byte]), int(row[byte])))
                continue
            for ch in lead_byte_representatives(byte):
                data = ch.encode("utf-8")
                after = self.planner.machine.step(int(row[byte]), data[1:])
                if after >= 0:
                    out.append((data, after))
        return out

    def at(self, window: Window, pending: bytes, end_state: int) -> BoundaryCover | None:
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
        if light and not self._any_chained(end_state):
            return None
        key = (window.text + pending, tuple(window.tokens), len(pending), end_state)
        if key in self._cover_cache:
            return self._cover_cache[key]
        cover = self._chained_cover(window, end_state) if light else self._compute_cover(window, pending, end_state)
        if len(self._cover_cache) >= MAX_CACHED_COVERS:
            self._cover_cache.clear()
        self._cover_cache[key] = cover
        return cover

    def _any_chained(self, state: int) -> bool:
        """Whether a forced chain follows some next character of `state` (memoized per state)."""
        found = self._chained.get(state)
        if found is None:
            found = self._chained[state] = any(ahead.chained for ahead in self.lookaheads(state))
        return found

    def _compute_cover(self, window: Window, pending: bytes, end_state: int) -> BoundaryCover | None:
        block = window.text + pending
        fed = tuple(window.tokens)
        if valid_utf8_prefix(block) != len(block) or self.planner.spell(fed) != window.text:
            return None
        spanned = self._spanned_block(window, pending)
        short: set[int] = set()
        after: set[int] = set()
        following: set[int] = set()
        cut: set[int] = set()
        kept: list[bytes] = []
        offered: set[int] = set()
        eos = False
        context = (block, fed, len(pending), spanned)
        parts = self._parts
        for ahead in self.lookaheads(end_state):
            part = parts.get((context, ahead))
            if part is None:
                part = _PART_VALUES.intern(self._lookahead_part(block, fed, pending, spanned, ahead))
                if len(parts) >= MAX_CACHED_PARTS:
                    parts.clear()
                parts[(context, ahead)] = part
            if part.offered >= 0:
                offered.add(part.offered)
            if not part.counted:
                continue
            if part.short >= 0:
                short.add(part.short)
                continue
            following.update(part.following)
            cut.update(part.cut)
            if ahead.text:
                after.add(ahead.text[0])
                kept.append(ahead.text)
            else:
                eos = eos or not pending
        whole = self.by_bytes.get(pending) if pending else None
        shorter = {t for t in short if len(self.token_bytes[t] or b"") < len(pending)}
        if whole is not None and shorter and (after or short - shorter):
            short = (short - shorter) | {whole}
        if not (short or after or eos):
            return None
        excluded = (cut - following - {-1}) | self._off_lookahead(len(pending), after, kept)
        live = frozenset() if short else frozenset(self.planner.machine.live_bytes(end_state))
        return BoundaryCover(len(pending), frozenset(short), frozenset(after), eos, frozenset(excluded),
                             live - offered)

    def _lookahead_part(self, block: bytes, fed: tuple[int, ...], pending: bytes, spanned: bool,
                        ahead: Lookahead) -> LookaheadPart:
        """What one lookahead adds to the cover of the open block `block` (fed tokens `fed`, `pending` held back)."""
        lookahead = ahead.text
        canonical = self.planner.splits.split(block + lookahead)
        offered = -1
        if canonical[: len(fed)] != fed:
            if spanned and lookahead and self._starts_shorter(canonical, fed, longer=True):
                offered = lookahead[0]
            return LookaheadPart(offered, spanned and self._starts_shorter(canonical, fed))
        if len(canonical) == len(fed):
            return LookaheadPart(offered, True)
        token = canonical[len(fed)]
        width = len(self.token_bytes[token] or b"")
        if width <= len(pending):
            return LookaheadPart(offered, True, token)
        rest = pending + lookahead
        following: set[int] = set()
        if not ahead.extended:
            following.add(token)
            if width >= len(rest):
                following.update(self._prefix_tokens(rest, len(pending)))
        stop = min(width, len(pending) + ahead.cut_to)
        cut = {self.by_bytes.get(rest[:k], -1) for k in range(len(pending) + ahead.cut_from, stop)}
        return LookaheadPart(offered, True, -1, frozenset(following), frozenset(cut))

    def _off_lookahead(self, held: int, after: set[int], kept: list[bytes]) -> set[int]:
        """Tokens longer than `held` that spell no kept lookahead's start (ASCII first bytes whose
        lookaheads all continue with decided bytes; any token agrees with a lookahead that does not)."""
        off: set[int] = set()
        firsts = self._byte_at(held)
        by_first: dict[int, list[bytes]] = {}
        for x in kept:
            by_first.setdefault(x[0], []).append(x)
        for byte in after:
            starting = by_first.get(byte, [])
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
        fed = tuple(window.tokens)
        if valid_utf8_prefix(block) != len(block) or self.planner.spell(fed) != block:
            return None
        cut: set[int] = set()
        following: set[int] = set()
        for ahead in self.lookaheads(end_state):
            if not ahead.chained or ahead.cut_to <= ahead.cut_from or ahead.extended:
                continue
            canonical = self.planner.splits.split(block + ahead.text)
            if canonical[: len(fed)] != fed or len(canonical) == len(fed):
                continue
            token = canonical[len(fed)]
            width = len(self.token_bytes[token] or b"")
            following.add(token)
            if width >= len(ahead.text):
                following.update(self._prefix_tokens(ahead.text, 0))
            elif width >= ahead.cut_to:
                cut.update(self.by_bytes.get(ahead.text[:k], -1) for k in range(ahead.cut_from, ahead.cut_to))
        excluded = cut - following - {-1}
        if not excluded:
            return None
        live = frozenset(self.planner.machine.live_bytes(end_state))
        return BoundaryCover(0, frozenset(), live, True, frozenset(excluded), live)

    def _prefix_tokens(self, data: bytes, held: int) -> set[int]:
        """Vocabulary tokens that spell a prefix of `data` longer than `held` bytes: where the tokenizer's
        token reaches the end of a lookahead, the split there is not known, so none of them is cut."""
        return {self.by_bytes[data[:k]] for k in range(held + 1, len(data) + 1) if data[:k] in self.by_bytes}

    def _spanned_block(self, window: Window, pending: bytes) -> bool:
        """Whether the last fed token spelled a whole held-back one-token block, so D.3's continuations
        that the tokenizer would have started with a shorter token are admitted after it."""
        return not pending and window.spanned and bool(window.tokens)

    def _starts_shorter(self, canonical: Sequence[int], fed: Sequence[int], longer: bool = False) -> bool:
        """Whether `canonical` agrees with `fed` up to its last token and starts that one shorter
        (`longer`: longer, i.e. the spanning token the cover offered in its place one step before)."""
        last = len(fed) - 1
        if len(canonical) <= last or list(canonical[:last]) != list(fed[:last]):
            return False
        ours, theirs = len(self.token_bytes[fed[last]] or b""), len(self.token_bytes[canonical[last]] or b"")
        return theirs > ours if longer else theirs < ours

    def mask(self, cover: BoundaryCover) -> np.ndarray:
        """The tokens a boundary cover admits (bool (V,); eos ids excluded: see `BoundaryCover.eos`).

        Kept as a bitset per cover (a bit per token) and unpacked on each use.
        """
        size = len(self.token_bytes)
        packed = self._cover_masks.get(cover)
        if packed is not None:
            return np.unpackbits(packed, count=size).view(bool)
        firsts = self._byte_at(cover.held)
        longer = firsts != NO_BYTE
        allowed = np.zeros(size, dtype=bool)
        allowed[list(cover.short)] = True
        byte_ok = np.zeros(NO_BYTE + 1, dtype=bool)
        byte_ok[list(cover.after)] = True
        allowed |= byte_ok[firsts]
        allowed[list(cover.excluded)] = False
        if cover.live:
            kept = np.zeros(NO_BYTE + 1, dtype=bool)
            kept[firsts[allowed & longer]] = True
            bare = np.zeros(NO_BYTE + 1, dtype=bool)
            bare[list(cover.live)] = True
            bare &= ~kept
            allowed |= longer & bare[firsts]
        if len(self._cover_masks) >= MAX_CACHED_COVERS // 16:
            self._cover_masks.clear()
        self._cover_masks[cover] = np.packbits(allowed)
        return allowed

    @property
    def _lengths(self) -> np.ndarray:
        return self.planner.spellings.lengths

    def _byte_at(self, offset: int) -> np.ndarray:
        """Each token's byte at `offset` (NO_BYTE where the token is shorter), shared by the tokenizer's grammars."""
        return self.planner.spellings.byte_at(offset)


def _before_special(data: bytes) -> bytes:
    """`data` up to its first special token (the split of what comes before it ends there)."""
    at = data.find(SPECIAL_MARK)
    return data if at < 0 else data[:at]


_PARTS: CacheKind[dict[PartKey, LookaheadPart]] = CacheKind("lookahead parts",
                                                           size=lambda parts: len(parts) * PART_NBYTES)
"""Lookahead parts per tokenizer (its split and its token bytes): every grammar's covers read them."""

_LOOKAHEADS: InternTable[Lookahead] = InternTable("interned lookaheads", MAX_SHARED_VALUES, INTERNED_NBYTES)
_PART_VALUES: InternTable[LookaheadPart] = InternTable("interned lookahead parts", MAX_SHARED_VALUES, INTERNED_NBYTES)
