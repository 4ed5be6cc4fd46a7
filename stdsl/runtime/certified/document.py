"""The draft document of a certified round: kept drafts joined by their literals, then replayed through the
constraint under the forced-span policy to get the tokens one certification pass feeds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stdsl.control.controller import Configuration, Controller
from stdsl.runtime.certified.blocks import END, Block, Language

LOOKAHEAD_BYTES = 64


@dataclass
class Draft:
    """A block's draft: bytes from the block's entry (cut at its exit when reached) and its tokens by offset."""

    data: bytes
    tokens: dict[int, int]
    complete: bool


@dataclass
class Document:
    """Output bytes from the start to as far as the drafts reach, each drafted block's start offset, candidate
    tokens by offset, and whether the document reaches the end of the output."""

    data: bytes
    starts: dict[int, int]
    candidates: dict[int, int]
    ended: bool


@dataclass
class Replay:
    """The document replayed from the certified configuration: tokens to feed and the sampled steps, each as
    (feed index of its logits, allowed tokens, token, block or None)."""

    feed: list[int] = field(default_factory=list)
    steps: list[tuple[int, np.ndarray, int, int | None]] = field(default_factory=list)
    finished: bool = False


def assemble(language: Language, blocks: Sequence[Block], decided: bytes, frontier_draft: Draft | None,
             drafts: Mapping[int, Draft], frontier: int | None, upcoming: int) -> Document:
    """The document after the certified output `decided`: the frontier block's draft (or the forced chain after
    `decided`), then from block `upcoming` on each literal and kept draft while they reach their exits."""
    candidates: dict[int, int] = {}
    starts: dict[int, int] = {}
    if frontier is not None and frontier_draft is not None:
        document = frontier_draft.data
        candidates.update(frontier_draft.tokens)
        starts[frontier] = 0
        complete = frontier_draft.complete
        need_literal = True
    else:
        state = language.step(0, decided)
        document = decided + language.forced_chain(state)
        chain_end = language.chain_end(state)
        complete = upcoming < len(blocks) and chain_end == blocks[upcoming].entry
        need_literal = False
        if upcoming == len(blocks):
            return Document(document, starts, candidates, _ends_here(language, chain_end))
    index = upcoming
    while complete and index < len(blocks):
        if need_literal:
            document += blocks[index].literal
        need_literal = True
        draft = drafts.get(index)
        if draft is None:
            return Document(document, starts, candidates, False)
        starts[index] = len(document)
        candidates.update({len(document) + o: t for o, t in draft.tokens.items()})
        document += draft.data
        complete = draft.complete
        index += 1
    if not complete:
        return Document(document, starts, candidates, False)
    last = blocks[-1]
    if last.exit == END:
        return Document(document, starts, candidates, True)
    document += language.forced_chain(last.exit)
    return Document(document, starts, candidates, _ends_here(language, language.chain_end(last.exit)))


def _ends_here(language: Language, state: int) -> bool:
    return bool(language.accepting[state]) and int(language.live_count[state]) == 0


def replay_document(controller: Controller, start: Configuration, committed: int, pending: list[int],
                    document: Document, tokenizer: Any) -> Replay:
    """Move the controller from the certified configuration `start` (`committed` output bytes fed, `pending` tokens
    not yet fed) through the document, taking the draft's token at each sampled step (else the tokenizer's first
    token of the bytes ahead, or eos at the end). The certified log is never touched: each step is a kept
    configuration, and its mask comes from the controller's memo (the same positions recur round after round)."""
    out = Replay(feed=list(pending))
    data = document.data
    block_at = sorted(((o, b) for b, o in document.starts.items()), reverse=True)
    vocab = controller.vocab
    at, offset = start, committed
    while not at.finished:
        allowed = controller.mask(at)
        token = document.candidates.get(offset)
        if token is not None and not _fits(vocab, token, data, offset, allowed):
            token = None
        if token is None and offset < len(data):
            piece = data[offset : offset + LOOKAHEAD_BYTES].decode("utf-8", errors="ignore")
            guess = tokenizer.encode(piece)[:1] if piece else []
            token = guess[0] if guess and _fits(vocab, guess[0], data, offset, allowed) else None
        if token is None and offset >= len(data) and document.ended:
            eos = [t for t in vocab.eos_ids if allowed[t]]
            token = eos[0] if eos else None
        if token is None:
            break
        block = next((b for o, b in block_at if o <= offset), None)
        out.steps.append((len(out.feed) - 1, allowed, token, block))
        move = controller.advance(at, token)
        if not move.feed:
            out.finished = True
            break
        out.feed += move.feed
        offset += len(controller.spell(move.feed))
        at = move.configuration
    return out


def _fits(vocab: Any, token: int, data: bytes, offset: int, allowed: np.ndarray) -> bool:
    """Whether `token` is allowed and spells the document's bytes at `offset`."""
    spelled = vocab.token_bytes[token]
    return bool(allowed[token]) and spelled is not None and data[offset : offset + len(spelled)] == spelled
