"""Where decoded tokens part from the tokenizer's own split, and whether the forced-span planner is to blame.

The oracle is `encode_ordinary(text)`: the tokenizer's split of the output with special-token
text spelled as ordinary text (a model never writes a special token as text). The emitted tokens
and the oracle are cut at their common token boundaries; each stretch where they differ is
classed by the bytes the constraint forced (the automaton had one live byte and could not stop):

- "sampled": the model chose every byte of it, or it starts with a sampled token that a later
  sampled token followed before the forced text (the model's own segmentation, which healing,
  re-splitting only the latest sample, cannot undo);
- "spanned": D.3's cover, a held-back forced block that is one token was spanned by one token
  (ending with the forced bytes) where the tokenizer starts it shorter because of the sampled
  character after it;
- "boundary": forced text split unlike the tokenizer where it meets sampled text, a planner bug.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal

Kind = Literal["sampled", "spanned", "boundary"]


@dataclass(frozen=True)
class Difference:
    """One stretch [start, end) of the output bytes where the emitted tokens differ from the oracle's."""

    start: int
    end: int
    token_index: int
    emitted: tuple[bytes, ...]
    canonical: tuple[bytes, ...]
    kind: Kind

    def describe(self) -> str:
        """One line: where, which tokens on each side, and the kind."""
        return (f"{self.kind} at byte {self.start} (token {self.token_index}): emitted {list(self.emitted)} "
                f"vs encode {list(self.canonical)}")


def forced_bytes(automaton: Any, data: bytes) -> list[bool]:
    """Per byte of `data`: whether the automaton forced it (one live byte, not accepting, before it).

    Bytes after the automaton stops accepting `data` count as not forced.
    """
    state = int(automaton.start)
    out: list[bool] = []
    for byte in data:
        if state < 0:
            out.append(False)
            continue
        out.append(int(automaton.live_count[state]) == 1 and not bool(automaton.accepting[state]))
        state = automaton.step(state, bytes([byte]))
    return out


def differences(tokenizer: Any, tokens: Sequence[int], forced: Sequence[bool]) -> list[Difference]:
    """The stretches where `tokens` differ from `tokenizer.encode_ordinary` of the text they spell.

    `forced[i]` says whether output byte i was forced (see `forced_bytes`).
    """
    token_bytes = tokenizer.token_bytes
    emitted = [bytes(token_bytes[t]) for t in tokens]
    data = b"".join(emitted)
    canonical = [bytes(token_bytes[t]) for t in tokenizer.encode_ordinary(data.decode("utf-8", errors="replace"))]
    if b"".join(canonical) != data:
        return [Difference(0, len(data), 0, tuple(emitted), tuple(canonical), "boundary")]
    emitted_ends = list(accumulate(len(b) for b in emitted))
    canonical_ends = list(accumulate(len(b) for b in canonical))
    cuts = sorted(set(emitted_ends) & set(canonical_ends))
    found: list[Difference] = []
    e = c = 0
    start = 0
    for cut in cuts:
        e_stop = emitted_ends.index(cut, e) + 1
        c_stop = canonical_ends.index(cut, c) + 1
        if emitted[e:e_stop] != canonical[c:c_stop]:
            kind = _kind(emitted[e:e_stop], canonical[c], start, forced)
            found.append(Difference(start, cut, e, tuple(emitted[e:e_stop]), tuple(canonical[c:c_stop]), kind))
        e, c, start = e_stop, c_stop, cut
    return found


def _kind(emitted: Sequence[bytes], first_canonical: bytes, start: int, forced: Sequence[bool]) -> Kind:
    """Class one differing stretch (its emitted tokens from byte `start`) by the forced bytes in it."""
    end = start + sum(len(b) for b in emitted)
    if not any(forced[start:end]):
        return "sampled"
    first_end = start + len(emitted[0])
    if forced[first_end - 1] and first_end < len(forced) and not forced[first_end]:
        return "spanned" if len(first_canonical) < len(emitted[0]) else "boundary"
    if not any(forced[start:first_end]):
        first_forced = forced.index(True, first_end, end)
        later_starts = list(accumulate((len(b) for b in emitted[1:-1]), initial=first_end))
        if any(position < first_forced for position in later_starts):
            return "sampled"
    return "boundary"


def boundary_differences(tokenizer: Any, automaton: Any, tokens: Sequence[int]) -> list[Difference]:
    """The differences a forced-span planner is to blame for (kind "boundary") in one output."""
    data = b"".join(bytes(tokenizer.token_bytes[t]) for t in tokens)
    return [d for d in differences(tokenizer, tokens, forced_bytes(automaton, data)) if d.kind == "boundary"]
