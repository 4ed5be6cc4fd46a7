"""The forced planner (Appendix D.3): forced text fed in the tokenizer's own split (Theorem 20).

After a sampled token y, the planner follows the automaton's forced chain w, commits the
pre-token blocks of the output that no later byte can change, holds back the last block unless
the stable-tail test certifies it, heals y when it would merge with w, and sets the boundary
cover: while the open block holds forced bytes, the next token must continue the tokenizer's own
split of that block for some allowed next character and the forced chain after it.

Output text holds special tokens only where its constraint names them, spelled privately
(`compiler.special_tokens`); each is its own token and no split crosses it, as `encode` splits special
text out first. Between them "the tokenizer's own split" is `encode_ordinary`: `encode` with
special-token text spelled as ordinary text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import pairwise
from typing import Protocol

import numpy as np

from stdsl import caches
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.state_graph import bfs_distances, predecessor_lists
from stdsl.compiler.byte_machine import ByteMachine
from stdsl.compiler.special_tokens import SPECIAL_MARK, special_spans, visible_bytes
from stdsl.control.split.boundary_cover import BoundaryCover, BoundaryCovers
from stdsl.control.split.characters import next_characters, starts_a_character, valid_utf8_prefix
from stdsl.control.split.split_memo import SplitMemo
from stdsl.control.split.token_spellings import TokenSpellings
from stdsl.control.split.window import Window
from stdsl.errors import GenerationError, UnspellableError

MARK = bytes([SPECIAL_MARK])

MAX_CACHED_TAILS = 4096
"""Stable-tail answers kept per planner (the cache is emptied when full)."""
MEMO_ENTRY_NBYTES = 150
_CHAIN_COUNTS = caches.kind("forced text token counts", size=lambda counts: len(counts) * MEMO_ENTRY_NBYTES)
"""Canonical token counts of forced texts per tokenizer and vocabulary, shared by every automaton's planner: a
reply grammar whose tool list changed meets the same calls' forced texts again."""

"""About what one remembered stable tail or forced chain holds (its key, its value, the dictionary's slot)."""


class PreTokenizingTokenizer(Protocol):
    """What the planner needs from a tokenizer: the encoding of output text and its pre-token blocks."""

    def encode_ordinary(self, text: str) -> list[int]: ...

    def pre_tokenize(self, text: str, ordinary: bool = False) -> list[tuple[int, int]]: ...


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


class ForcedPlanner:
    """The canonical policy of Theorem 20 for one automaton and one tokenizer.

    `token_bytes[i]` is token i's bytes (None for specials); single-byte tokens are the fallback
    for byte runs that are not valid UTF-8 (a forced span that starts inside a character).
    """

    def __init__(
        self,
        machine: ByteMachine,
        tokenizer: PreTokenizingTokenizer,
        token_bytes: Sequence[bytes | None],
        healing: bool = True,
    ) -> None:
        self.machine = machine
        """The byte machine read (a DFA's states or a pushdown's configuration ids)."""
        self.tokenizer = tokenizer
        self.token_bytes = token_bytes
        self.healing = healing
        self.live_count = machine.live_count
        self.spellings = TokenSpellings.of(token_bytes)
        self.splits = SplitMemo.of(tokenizer)
        self.by_bytes = self.spellings.by_bytes
        self.longest_token = self.spellings.longest_token
        self._tail_cache: dict[tuple[bytes, int], bool] = {}
        self._chain_cache: dict[int, tuple[bytes, int]] = {}
        self._chain_counts: dict[bytes, int] = _CHAIN_COUNTS.get((tokenizer, token_bytes), dict)
        self.covers = BoundaryCovers(self)

    @property
    def nbytes(self) -> int:
        """An estimate of this planner's own memos (stable tails, chains, covers; what `stdsl.caches` counts): the
        automaton, tokenizer and spellings it reads are counted where they are kept."""
        return (len(self._tail_cache) + len(self._chain_cache)) * MEMO_ENTRY_NBYTES + self.covers.nbytes

    # ------------------------------------------------------------------ helpers

    def chain(self, state: int) -> tuple[bytes, int]:
        """(forced chain, chain end) of `state`, cached. A chain stops where a special token's spelling opens: the
        token is chosen by the mask (taken without a pass when it is the only one), never forced as bytes, so two
        special tokens whose spellings share a prefix are never split inside it."""
        hit = self._chain_cache.get(state)
        if hit is None:
            forced = self.machine.forced_chain(state)
            special = forced.find(MARK)
            if special < 0:
                hit = (forced, self.machine.chain_end(state))
            else:
                hit = (forced[:special], self.machine.step(state, forced[:special]))
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
        """Canonical tokens of `data` on its own: each special token's spelling its token, and between them blocks
        of the valid UTF-8 runs, single bytes elsewhere."""
        if MARK not in data:
            return self._encode_text(data)
        out: list[int] = []
        position = 0
        for start, end in special_spans(data):
            out += self._encode_text(data[position:start])
            token = self.by_bytes.get(data[start:end])
            if token is None:
                raise GenerationError(f"the special token {visible_bytes(data[start:end])!r} has no token in this "
                                      "vocabulary")
            out.append(token)
            position = end
        return out + self._encode_text(data[position:])

    def _segment_bounds(self, data: bytes) -> set[int]:
        """Block boundaries of output `data` that ends with a special token: the edges of every special token's
        spelling and the blocks of the text between them."""
        bounds = {0, len(data)}
        position = 0
        for start, end in special_spans(data):
            bounds.update(position + b for b in self.boundaries(data[position:start].decode("utf-8")))
            bounds.update((start, end))
            position = end
        return bounds

    def _encode_text(self, data: bytes) -> list[int]:
        """Canonical tokens of `data` (no special token in it): blocks of its valid UTF-8 runs, single bytes
        elsewhere."""
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
        tokens = list(self.splits.split(block))
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
        """The single-byte token of `byte`; UnspellableError if the vocabulary has none."""
        token = self.spellings.byte_tokens[byte]
        if token < 0:
            raise UnspellableError(f"the constraint forces byte {byte:#04x}, which this model's vocabulary has no "
                                   "token to write")
        return token

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
        live = list(self.machine.live_bytes(end_state))
        result = all(byte < 0x80 or byte == SPECIAL_MARK or starts_a_character(byte) for byte in live) and all(
            len(tail) in self.boundaries(text + ch) for ch in next_characters(live))
        if len(self._tail_cache) >= MAX_CACHED_TAILS:
            self._tail_cache.clear()
        self._tail_cache[key] = result
        return result

    # ------------------------------------------------------------------ the boundary cover

    def boundary_cover(self, window: Window, pending: bytes, end_state: int) -> BoundaryCover | None:
        """The boundary cover at a sampling configuration (see `BoundaryCovers.at`)."""
        return self.covers.at(window, pending, end_state)

    def cover_mask(self, cover: BoundaryCover) -> np.ndarray:
        """The tokens a boundary cover admits (see `BoundaryCovers.mask`)."""
        return self.covers.mask(cover)

    def _forced_prefix(self, state: int, data: bytes) -> int:
        """The end of the last byte of `data` that the automaton forces when read from `state` (0: none)."""
        end = 0
        for i, byte in enumerate(data):
            if self.live_count[state] == 1 and not self.machine.accepting[state]:
                end = i + 1
            state = self.machine.step(state, bytes([byte]))
        return end

    # ------------------------------------------------------------------ the policy

    @cached_property
    def _forcing_reachable(self) -> np.ndarray | None:
        """Per DFA state: whether a state that forces a byte is reachable from it (itself included); None for a
        pushdown machine, whose configurations are not listed."""
        if not isinstance(self.machine, Automaton):
            return None
        indptr, indices = predecessor_lists(self.machine.class_transitions)
        return bfs_distances(indptr, indices, np.flatnonzero(self.machine.forced_byte >= 0)) >= 0

    def unforced(self, state: int) -> bool:
        """Whether no byte is ever forced from `state` on: every plan there is the sampled token alone, whatever
        the window holds (free text's every step, planned without pre-tokenizing the window: `plan`)."""
        reachable = self._forcing_reachable
        return reachable is not None and not reachable[state]

    def plan(self, window: Window, state: int, pending: bytes, sampled: int | None) -> Plan:
        """The canonical plan after sampling `sampled` at `state` (None: the start, before any sample)."""
        y = b"" if sampled is None else (self.token_bytes[sampled] or b"")
        if sampled is not None and not y:
            raise GenerationError(f"token {sampled} spells no bytes and cannot be fed as output")
        after_y = self.machine.step(state, y)
        if after_y < 0:
            raise GenerationError(f"token {sampled} ({y!r}) is not allowed at state {state}")
        if sampled is not None and not pending and window.forced_end == 0 and self.unforced(state):
            # Nothing forced now or later: no healing, no held-back bytes, no boundary cover (nothing chained), so
            # the window, which only those read, is dropped rather than re-split every token.
            return Plan(tokens=(sampled,), healed=False, state=after_y, pending=b"", cover=None, end_state=after_y,
                        decided=y, window=Window(), finished=bool(self.live_count[after_y] == 0))
        forced, end_state = self.chain(after_y)
        base = window.text
        s = base + y + forced
        y_start, y_end = len(base), len(base) + len(y)
        forced_in_y = self._forced_prefix(state, y)
        forced_end = y_start + forced_in_y if forced_in_y else window.forced_end
        if forced:
            forced_end = len(s)
        finished = bool(self.live_count[end_state] == 0)
        closed = special_spans(s) if MARK in s else []
        hard = closed[-1][1] if closed else 0
        opened = s.find(MARK, hard)
        valid = opened if opened >= 0 else hard + valid_utf8_prefix(s[hard:])
        text = s[hard:valid].decode("utf-8")
        spans = [(hard + a, hard + b) for a, b in self.tokenizer.pre_tokenize(text, ordinary=True)]
        bounds = self.boundaries(text, spans) if not closed and opened < 0 else sorted(
            self._segment_bounds(s[:hard]) | {hard, valid} | {b for span in spans for b in span})
        last_start = spans[-1][0] if spans else valid
        trailing_ws = len(text) - len(text.rstrip())
        ws_start = valid - len(text[len(text) - trailing_ws :].encode("utf-8"))
        m = min(last_start, ws_start)
        # A special token starts where a mark opens: the text before it is final (no split crosses a special token).
        stable = valid if opened >= 0 else max(b for b in bounds if b <= m)
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
        next_state = self.machine.step(state, s[y_start:commit_end])
        anchor = len(s) if certified else min(stable, commit_end)
        new_window = self._advance_window(
            window, s[:commit_end], y_start, tokens, anchor, min(forced_end, commit_end))
        new_window = replace(new_window,
                             spanned=bool(pending) and y == pending and pending in self.by_bytes and not healed)
        return Plan(
            tokens=tuple(tokens),
            healed=healed,
            state=next_state,
            pending=pending_bytes,
            cover=None if finished else self.covers.at(new_window, pending_bytes, end_state),
            end_state=end_state,
            decided=s[y_start:],
            window=new_window,
            finished=finished,
        )

    def table_plan(self, window: Window, state: int, sampled: int | None) -> Plan:
        """The context-free fallback policy the budget table counts: the whole chain, split on its own."""
        y = b"" if sampled is None else (self.token_bytes[sampled] or b"")
        after_y = self.machine.step(state, y)
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
        return self.text_token_count(self.chain(state)[0])

    def text_token_count(self, forced: bytes) -> int:
        """Tokens of a forced text under the table policy, kept per tokenizer (0 for none)."""
        if not forced:
            return 0
        count = self._chain_counts.get(forced)
        if count is None:
            count = self._chain_counts[forced] = len(self.encode_segment(forced))
        return count

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
        return _reanchor(Window(text, tuple(starts), tuple(toks), forced_end), anchor)


def _reanchor(window: Window, anchor: int) -> Window:
    """Drop everything before `anchor` (a stable block boundary) from the window."""
    if anchor <= 0:
        return window
    kept = [(s - anchor, t) for s, t in zip(window.starts, window.tokens) if s >= anchor]
    return Window(window.text[anchor:], tuple(s for s, _ in kept), tuple(t for _, t in kept),
                  max(0, window.forced_end - anchor))
