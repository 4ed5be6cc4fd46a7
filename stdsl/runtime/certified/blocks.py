"""Independent blocks of an automaton's language, for certified parallel drafts (Lemma 12, D.5).

A cut state that no run visits twice splits every accepted string at one place, so the language
is a product of one piece per pair of consecutive such cuts. Pieces with a single forced path are
literal text (keys, punctuation, template text); maximal runs of the other pieces are blocks
(values, fields). The values of an object whose keys are all required, nested objects included,
and the fields of a template separated by literal text come out as blocks this way; anything
optional or repeated between two literals stays inside one block. A pushdown constraint's blocks
come the same way from its cut configurations (`compiler.pushdown.cut_configurations`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

END = -1


class Language(Protocol):
    """What blocks and drafts read of a constraint: byte steps over its states (a DFA's, or a pushdown's
    configuration ids) from start state 0."""

    @property
    def accepting(self) -> Any: ...

    @property
    def live_count(self) -> Any: ...

    def next_state(self, state: int, byte: int) -> int: ...

    def live_bytes(self, state: int) -> bytes: ...

    def step(self, state: int, data: bytes) -> int: ...

    def forced_chain(self, state: int) -> bytes: ...

    def chain_end(self, state: int) -> int: ...

    def shortest_completion(self, state: int) -> int: ...

    def single_visit_cuts(self) -> list[int]: ...


@dataclass(frozen=True)
class Block:
    """One independent piece: drafted from `entry`, done once a run reaches `exit` (END: the end of the output).

    `literal` is the forced text between the previous block's exit and `entry` (the draft's context).
    """

    entry: int
    exit: int
    literal: bytes


def block_plan(machine: Language) -> list[Block]:
    """The blocks of the machine's language in output order (fewer than two: nothing to draft in parallel)."""
    return blocks_between(machine, machine.single_visit_cuts())


def blocks_between(automaton: Language, cuts: list[int]) -> list[Block]:
    """The blocks between consecutive single-visit `cuts` (in the order every run meets them, from state 0)."""
    accepting = automaton.accepting
    if not cuts or cuts[0] != 0:
        return []
    blocks: list[Block] = []
    literal = pending_literal = b""
    entry: int | None = None
    for here, there in zip(cuts, cuts[1:] + [END]):
        live = automaton.live_bytes(here)
        forced = (there != END and len(live) == 1 and not accepting[here]
                  and automaton.next_state(here, live[0]) == there)
        if forced:
            if entry is not None:
                blocks.append(Block(entry, here, pending_literal))
                entry, literal = None, b""
            literal += live
        elif entry is None:
            entry, pending_literal = here, literal
    if entry is not None and automaton.live_count[entry] > 0:
        blocks.append(Block(entry, END, pending_literal))
    return blocks


class BlockWatch:
    """Follows a draft's decided bytes from its block's entry and says when the block's exit has been reached."""

    def __init__(self, automaton: Language, block: Block, start_offset: int = 0, state: int | None = None) -> None:
        self.automaton = automaton
        self.block = block
        self.state = block.entry if state is None else state
        self.offset = start_offset
        self.exit_offset: int | None = None

    def done(self, decided: bytes) -> bool:
        """Whether `decided` (the row's output bytes from `start_offset` on) has reached the block's exit."""
        if self.exit_offset is not None:
            return True
        while self.offset < len(decided) and self.state >= 0:
            self.state = self.automaton.next_state(self.state, decided[self.offset])
            self.offset += 1
            if self.state >= 0 and self.state == self.block.exit:
                self.exit_offset = self.offset
                return True
        return False
