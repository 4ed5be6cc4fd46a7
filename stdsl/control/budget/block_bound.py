"""Forced chains and the chain bound of a reply laid out as a front and cached calls' blocks, composed per block.

`need_graphs.forced_chains` and `chain_bound` walk every state: with one tool of a list changed they would cost all
the tools' states again.  A block (`Automaton.blocks`) is entered only at its head states and left only into its
`back` state, so every path from inside it to acceptance first leaves it there, then goes on from the end of
`back`'s forced chain R: the bound of a block state is its shortest way out of the block (`_BlockNeed.way_out`,
over the block alone, R counted 0) plus R's bound.  Each block's tables are computed once per block, vocabulary
and what its way out reads of the front (the text of `back`'s chain and how its edges into it count), and only
the small front is solved anew, with each edge into a block standing for the block's way out.  The result equals
the whole-table computation exactly (tests/control/budget/test_block_bound.py checks it on random tool lists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stdsl import caches
from stdsl.compiler.automata.automaton import Automaton, BlockSpan
from stdsl.compiler.automata.ops import step_edges
from stdsl.compiler.special_tokens import SPECIAL_MARK
from stdsl.control.budget.automaton_budget import UNREACHABLE, NeedBound, relax
from stdsl.control.budget.need_graphs import single_byte_tokens
from stdsl.kernels.vocabulary import Vocabulary


def class_rows(automaton: Automaton, states: np.ndarray) -> np.ndarray:
    """The (len(states), num_classes) rows of `states` (global targets, -1 dead), read from the stored rows."""
    sole_target = np.asarray(automaton.sole_target, dtype=np.int64)[states]
    sole_class = np.asarray(automaton.sole_class, dtype=np.int64)[states]
    rows = np.full((len(states), automaton.num_classes), -1, dtype=np.int64)
    one = np.flatnonzero(sole_target >= 0)
    rows[one, sole_class[one]] = sole_target[one]
    branching = np.flatnonzero(sole_target < -1)
    rows[branching] = automaton.branch_rows[-2 - sole_target[branching]]
    return rows


def _forced(automaton: Automaton, rows: np.ndarray, accepting: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(forced, byte, step) per row over the automaton's classes, as `need_graphs.forced_steps` defines them (a
    special token's mark never forced), -1 byte and step where not forced."""
    live = rows >= 0
    sole = np.argmax(live, axis=1)
    byte = np.asarray(automaton.class_first_byte)[sole]
    forced = ~accepting & (live @ np.asarray(automaton.class_size) == 1) & (byte != SPECIAL_MARK)
    step = np.where(forced, rows[np.arange(len(rows)), sole], -1)
    return forced, np.where(forced, byte, -1), step


def _token_classes(automaton: Automaton, vocab: Vocabulary) -> np.ndarray:
    """The classes that hold a byte which is a token on its own (`need_graphs.byte_token_steps`' columns)."""
    return np.unique(np.asarray(automaton.byte_class)[single_byte_tokens(vocab)])


def _chains(forced: np.ndarray, step: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Each state's forced chain end and length, one byte per round for all states (`step` may name states past
    the last row: those are never forced); None on a forced cycle."""
    size = len(forced)
    extended = np.append(forced, np.zeros(max(int(step.max(initial=0)) + 1 - size, 0), dtype=bool))
    end = np.arange(size, dtype=np.int64)
    length = np.zeros(size, dtype=np.int64)
    going = forced.copy()
    for _ in range(size + 1):
        moving = np.flatnonzero(going)
        if not len(moving):
            return end, length
        end[moving] = step[end[moving]]
        length[moving] += 1
        going[moving] = extended[end[moving]]
    return None


def _texts(byte: np.ndarray, step: np.ndarray, states: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    """The first `lengths[i]` forced bytes from each of `states` (each within its forced chain)."""
    if not len(states):
        return []
    width = int(lengths.max())
    out = np.zeros((len(states), max(width, 1)), dtype=np.uint8)
    at = states.copy()
    for position in range(width):
        going = lengths > position
        out[going, position] = byte[at[going]]
        at[going] = step[at[going]]
    return [row[:length].tobytes() for row, length in zip(out, lengths.tolist())]


@dataclass(frozen=True)
class _BlockChains:
    """A block's own tables over local states 0..n-1, `n` standing for its `back` state (the way out): forced
    bytes and steps, each state's forced chain inside the block (its end, `n` where it runs out into `back`, and
    its length), the single-byte-token edges (sorted by source), and which targets a deciding state enters by one."""

    byte: np.ndarray
    step: np.ndarray
    chain_end: np.ndarray
    chain_length: np.ndarray
    source: np.ndarray
    after: np.ndarray
    decided: np.ndarray
    """(n + 1,): entered from a deciding state of the block by a single-byte-token edge (`n`: `back`)."""

    @property
    def nbytes(self) -> int:
        return sum(int(array.nbytes) for array in vars(self).values())


def _union(sizes: list[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Blocks side by side: each one's first state, the block of each state, and where the ways out start (block
    j's is `states + j`)."""
    lengths = np.asarray(sizes, dtype=np.int64)
    bases = np.cumsum(lengths) - lengths
    return bases, np.repeat(np.arange(len(sizes)), lengths), int(lengths.sum())


def _chains_of(automaton: Automaton, spans: list[BlockSpan], vocab: Vocabulary) -> list[_BlockChains | None]:
    """`_BlockChains` of several blocks at once, side by side (None for a block whose states move elsewhere than
    inside it and to its back, or accept).  Read from the stored rows: a sole class and target for most states,
    whole rows only where a state branches."""
    bases, owner, states = _union([span.size for span in spans])
    starts = np.array([span.start for span in spans], dtype=np.int64)
    backs = np.array([span.back for span in spans], dtype=np.int64)
    ends = starts + np.array([span.size for span in spans], dtype=np.int64)
    globals_ = np.arange(states) - bases[owner] + starts[owner]

    def local(targets: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Global targets of states of blocks `at` side by side: inside its block, its way out (-1 dead)."""
        low = starts[at]
        shift = bases[at] - low
        if targets.ndim == 2:
            low, shift, at = low[:, None], shift[:, None], at[:, None]
        return np.where(targets >= low, targets + shift, np.where(targets >= 0, states + at, -1))

    def strays(targets: np.ndarray, at: np.ndarray) -> np.ndarray:
        """Which targets of states of blocks `at` are neither inside the block, nor its way out, nor dead."""
        low, high, back = starts[at], ends[at], backs[at]
        if targets.ndim == 2:
            low, high, back = low[:, None], high[:, None], back[:, None]
        return ((targets < low) | (targets >= high)) & (targets != back) & (targets != -1)

    sole_target = np.asarray(automaton.sole_target, dtype=np.int64)[globals_]
    sole_class = np.asarray(automaton.sole_class, dtype=np.int64)[globals_]
    branching = np.flatnonzero(sole_target < -1)
    branch_rows = np.asarray(automaton.branch_rows)[-2 - sole_target[branching]]
    sole_global = np.where(sole_target < -1, -1, sole_target)
    bad = np.zeros(len(spans), dtype=bool)
    bad[owner[strays(sole_global, owner) | np.asarray(automaton.accepting)[globals_]]] = True
    bad[owner[branching[strays(branch_rows, owner[branching]).any(axis=1)]]] = True
    sole = local(sole_global, owner)
    forced_byte = np.asarray(automaton.forced_byte, dtype=np.int64)[globals_]
    forced = (forced_byte >= 0) & (forced_byte != SPECIAL_MARK)
    byte = np.where(forced, forced_byte, -1)
    step = np.where(forced, sole, -1)
    chained = _chains(forced, np.maximum(step, 0))
    if chained is None:
        return [None] * len(spans)
    chain_end, chain_length = chained
    token_classes = np.zeros(automaton.num_classes, dtype=bool)
    token_classes[_token_classes(automaton, vocab)] = True
    one = np.flatnonzero((sole >= 0) & token_classes[sole_class])
    many_source, many_after = step_edges(local(branch_rows[:, token_classes].astype(np.int64), owner[branching]))
    source = np.concatenate([one, branching[many_source]])
    after = np.concatenate([sole[one], many_after])
    order = np.argsort(source, kind="stable")
    source, after = source[order], after[order]
    decided = np.zeros(states + len(spans), dtype=bool)
    decided[after[~forced[source]]] = True
    cuts = np.searchsorted(source, np.append(bases, states))
    out: list[_BlockChains | None] = []
    for block, (base, size) in enumerate(zip(bases.tolist(), (span.size for span in spans))):
        if bad[block]:
            out.append(None)
            continue

        def localized(targets: np.ndarray, base: int = base, size: int = size) -> np.ndarray:
            return np.where(targets >= states, size, np.where(targets >= 0, targets - base, -1))

        edges = slice(cuts[block], cuts[block + 1])
        out.append(_BlockChains(byte[base:base + size], localized(step[base:base + size]),
                                localized(chain_end[base:base + size]), chain_length[base:base + size],
                                source[edges] - base, localized(after[edges]),
                                np.append(decided[base:base + size], decided[states + block])))
    return out


@dataclass(frozen=True)
class _BlockNeed:
    """A block's tables that depend on the front only through its way out: each local state's count (the bytes of
    its forced chain, or its tokens where a deciding state enters it), shortest way out of the block
    (`way_out`, UNREACHABLE where none over single-byte tokens) and `through` less the bound at the way out."""

    counts: np.ndarray
    way_out: np.ndarray
    through: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.counts.nbytes + self.way_out.nbytes + self.through.nbytes)


Context = tuple[bytes, int, tuple[int, ...]]
"""What a block's way out reads of the front: the text of its back's forced chain, the back's count, and the
block's states a deciding front state enters."""


def _needs_of(blocks: list[_BlockChains], contexts: list[Context], planner: Any) -> list[_BlockNeed]:
    """`_BlockNeed` of several blocks at once, side by side (one shortest-path solve over them all)."""
    sizes = [len(block.byte) for block in blocks]
    bases, owner, states = _union(sizes)
    lengths = np.asarray(sizes, dtype=np.int64)

    def joined(targets: list[np.ndarray], offsets: np.ndarray) -> np.ndarray:
        """Local targets to side-by-side ones (a block's `n` to its way out)."""
        out = np.concatenate(targets)
        at = np.repeat(np.arange(len(blocks)), [len(t) for t in targets])
        return np.where(out == lengths[at], states + at, np.where(out >= 0, out + offsets[at], -1))

    byte = np.concatenate([block.byte for block in blocks])
    step = joined([block.step for block in blocks], bases)
    chain_end = np.append(joined([block.chain_end for block in blocks], bases), states + np.arange(len(blocks)))
    chain_length = np.concatenate([block.chain_length for block in blocks])
    runs_out = chain_end[:states] >= states
    back_bytes = np.array([len(text) for text, _, _ in contexts], dtype=np.int64)
    counts = np.concatenate([chain_length + np.where(runs_out, back_bytes[owner], 0),
                             np.array([count for _, count, _ in contexts], dtype=np.int64)])
    decided = np.concatenate([block.decided[:-1] for block in blocks])
    for block, (_, _, entered) in enumerate(contexts):
        decided[bases[block] + np.asarray(entered, dtype=np.int64)] = True
    chosen = np.flatnonzero(decided & (counts[:states] > 0))
    for state, text in zip(chosen.tolist(), _texts(byte, step, chosen, chain_length[chosen])):
        block = int(owner[state])
        counts[state] = planner.text_token_count(text + contexts[block][0] if runs_out[state] else text)
    source = np.concatenate([block.source + base for block, base in zip(blocks, bases.tolist())])
    after = joined([block.after for block in blocks], bases)
    way_out = np.full(states + len(blocks), UNREACHABLE, dtype=np.int64)
    way_out[states:] = 0
    relax(way_out, np.arange(states), source, chain_end[after], 1 + counts[after])
    through = np.minimum(1 + counts[:states] + way_out[chain_end[:states]], UNREACHABLE)
    return [_BlockNeed(np.append(counts[base:base + size], counts[states + block]), way_out[base:base + size],
                       through[base:base + size])
            for block, (base, size) in enumerate(zip(bases.tolist(), sizes))]


_CHAINS = caches.kind("block chain tables")
"""`_BlockChains` per vocabulary and block key (None: the block lacks the shape)."""
_NEEDS = caches.kind("block need tables")
"""`_BlockNeed` per vocabulary, tokenizer, block key and `Context`."""


def _held(kind: caches.CacheKind[Any], owners: tuple[Any, ...], keys: list[tuple[Any, ...]],
          build: Any) -> list[Any]:
    """The values of `keys`, those not held built together by `build(indices)` (each distinct key once) and kept."""
    found: dict[tuple[Any, ...], Any] = {}
    missing: dict[tuple[Any, ...], int] = {}
    for index, key in enumerate(keys):
        if key in found or key in missing:
            continue
        held = kind.find(owners, key)
        if held is None:
            missing[key] = index
        else:
            found[key] = held[0]
    if missing:
        for key, value in zip(missing, build(list(missing.values()))):
            kind.put(owners, value, key)
            found[key] = value
    return [found[key] for key in keys]


def composed_chains_and_bound(automaton: Automaton, vocab: Vocabulary, planner: Any
                              ) -> tuple[np.ndarray, np.ndarray, NeedBound] | None:
    """`(chain_end, chain_bytes, bound)` equal to `forced_chains(automaton, planner.chain)` and `chain_bound(...)`,
    from per-block tables and the front; None where the automaton has no blocks or they lack the shape (the
    caller then walks the whole table)."""
    blocks = list(automaton.blocks)
    if not blocks or blocks[-1].start + blocks[-1].size != automaton.num_states:
        return None
    if any(a.start + a.size != b.start for a, b in zip(blocks, blocks[1:])):
        return None
    front = blocks[0].start
    chains = _held(_CHAINS, (vocab,), [(span.key,) for span in blocks],
                   lambda indices: _chains_of(automaton, [blocks[i] for i in indices], vocab))
    if any(found is None for found in chains):
        return None
    starts = np.array([span.start for span in blocks], dtype=np.int64)
    backs = np.array([span.back for span in blocks], dtype=np.int64)
    lengths = np.array([span.size for span in blocks], dtype=np.int64)
    owner = np.repeat(np.arange(len(blocks)), lengths)
    inner_end = np.concatenate([c.chain_end for c in chains])
    runs_out = inner_end == np.repeat(lengths, lengths)
    inner_end = inner_end + np.repeat(starts, lengths)
    inner_length = np.concatenate([c.chain_length for c in chains])

    accepting = np.asarray(automaton.accepting[:front], dtype=bool)
    rows = class_rows(automaton, np.arange(front))
    forced, byte, step = _forced(automaton, rows, accepting)
    ends = _front_chains(forced, step, front, owner, runs_out, inner_end, inner_length, backs)
    if ends is None:
        return None
    front_end, front_length = ends
    after_back = front_end[backs]
    if bool((after_back >= front).any()):
        return None
    chain_end = np.concatenate([front_end, np.where(runs_out, after_back[owner], inner_end)])
    chain_bytes = np.concatenate([front_length, inner_length + np.where(runs_out, front_length[backs][owner], 0)])

    def front_text(state: int) -> bytes:
        out = bytearray()
        while 0 <= state < front and forced[state]:
            out.append(int(byte[state]))
            state = int(step[state])
            if state >= front:
                block = int(owner[state - front])
                local = state - int(starts[block])
                found = chains[block]
                out += _texts(found.byte, found.step, np.array([local]), found.chain_length[[local]])[0]
                if not runs_out[state - front]:
                    break
                state = int(backs[block])
        return bytes(out)

    source, after = step_edges(rows[:, _token_classes(automaton, vocab)])
    deciding = ~accepting & ~forced
    decided_after = np.unique(after[deciding[source]])
    decided = np.zeros(front, dtype=bool)
    decided[decided_after[decided_after < front]] = True
    for block, found in enumerate(chains):
        decided[backs[block]] |= bool(found.decided[-1])
    counts = front_length.copy()
    for state in np.flatnonzero(decided & (counts > 0)).tolist():
        counts[state] = planner.text_token_count(front_text(state))
    entered: dict[int, list[int]] = {}
    for state in decided_after[decided_after >= front].tolist():
        block = int(owner[state - front])
        entered.setdefault(block, []).append(state - int(starts[block]))
    back_texts = {back: front_text(back) for back in set(backs.tolist())}
    contexts: list[Context] = [(back_texts[span.back], int(counts[span.back]), tuple(entered.get(block, ())))
                               for block, span in enumerate(blocks)]
    needs = _held(_NEEDS, (vocab, planner.tokenizer), [(span.key, *context) for span, context in zip(blocks, contexts)],
                  lambda indices: _needs_of([chains[i] for i in indices], [contexts[i] for i in indices], planner))
    way_out = np.concatenate([n.way_out for n in needs])
    all_counts = np.concatenate([counts, *(n.counts[:-1] for n in needs)])

    keep = ~accepting[source]
    source, after = source[keep], after[keep]
    target = chain_end[after]
    weight = 1 + all_counts[after]
    inside = target >= front
    weight[inside] += way_out[target[inside] - front]
    target[inside] = after_back[owner[target[inside] - front]]
    need = np.where(accepting, 0, UNREACHABLE).astype(np.int64)
    relax(need, np.flatnonzero(~accepting), source, target, np.minimum(weight, UNREACHABLE))
    exit_need = need[after_back][owner]
    block_need = np.minimum(way_out + exit_need, UNREACHABLE)
    whole_need = np.concatenate([need, block_need])
    front_through = np.minimum(1 + counts + whole_need[front_end], UNREACHABLE)
    block_through = np.minimum(np.concatenate([n.through for n in needs]) + exit_need, UNREACHABLE)
    return chain_end, chain_bytes, NeedBound(whole_need, np.concatenate([front_through, block_through]))


def _front_chains(forced: np.ndarray, step: np.ndarray, front: int, owner: np.ndarray, runs_out: np.ndarray,
                  inner_end: np.ndarray, inner_length: np.ndarray, backs: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """Each front state's chain end and length in bytes: a step into a block takes that state's chain inside it,
    then goes on from the block's back where it runs out; None on a forced cycle (an untrimmed automaton)."""
    into = np.maximum(step - front, 0)
    entering = forced & (step >= front)
    leaves = entering & ~runs_out[into]
    next_state = np.where(entering, backs[owner[into]], step)
    added = np.where(entering, 1 + inner_length[into], 1)
    end = np.arange(front, dtype=np.int64)
    length = np.zeros(front, dtype=np.int64)
    at = np.arange(front, dtype=np.int64)
    going = forced.copy()
    for _ in range(front + 1):
        if not going.any():
            return end, length
        moving = np.flatnonzero(going)
        here = at[moving]
        length[moving] += added[here]
        stopped = leaves[here]
        end[moving[stopped]] = inner_end[into[here[stopped]]]
        at[moving] = next_state[here]
        going[moving[stopped]] = False
        still = moving[~stopped]
        end[still] = at[still]
        going[still] = forced[at[still]]
    return None
