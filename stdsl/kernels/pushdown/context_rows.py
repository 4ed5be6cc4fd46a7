"""Pushdown rows from symbolic stacks (Theorem 22, Appendix D.4): one walk of the trie per context, for every stack.

A token's run depends on the stack only through the symbols it pops.  The level pass runs from a
symbolic configuration: first with the stack unknown (the *free* row of a state q, one per q),
which settles every token that pops no symbol it did not push itself; the tokens that do are
walked again from (q, top two return states, whether the stack ends below them) (a *context*
row, over a trie of just those tokens, or the whole trie when they are many); the rare ones that
pop deeper still are stepped concretely.  A row entry is a small code into the row's list of
outcomes (symbols popped, return states pushed, final state, peak height); composing an outcome
with a concrete stack (pop, push, eager returns, the cap checked as peak <= room) gives exactly
what `pushdown_row` computes by walking the trie from the concrete configuration.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stdsl.compiler.pushdown.machine import DEAD, PushdownMachine
from stdsl.errors import StdslError
from stdsl.kernels.pushdown.symbolic_walk import Outcome, SymbolicStepper, symbolic_walk
from stdsl.kernels.vocabulary import Vocabulary

DEAD_CODE, NEEDS_CODE = 0, 1
CONTEXT_SYMBOLS = 2
SUBSET_TRIE_SHARE = 8
DEFAULT_MAX_BYTES = 64 << 20
MAX_COMPOSED_TABLES = 16
OUTCOME_NBYTES = 96


@dataclass(frozen=True)
class SubsetLevel:
    """One depth of a trie over a subset of the vocabulary (the fields the level pass reads, as in `TrieLevel`):
    nodes ordered by parent, the tokens ending here ordered by node."""

    parent: np.ndarray
    byte: np.ndarray
    end_tokens: np.ndarray
    end_nodes: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held by this level's arrays."""
        return int(self.parent.nbytes + self.byte.nbytes + self.end_tokens.nbytes + self.end_nodes.nbytes)

    @property
    def size(self) -> int:
        """Number of trie nodes at this depth."""
        return int(self.parent.shape[0])

    def parents_of(self, above: np.ndarray) -> np.ndarray:
        """`above[parent]`: a value per node of this level from its parent's value in the level above."""
        return above[self.parent]

    def ends_of(self, here: np.ndarray) -> np.ndarray:
        """`here[end_nodes]`: a value per token ending at this depth from its node's value here."""
        return here[self.end_nodes]

    def children(self, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first index here, count) of the children of the given nodes of the level above (sorted ids)."""
        left = np.searchsorted(self.parent, parents, side="left")
        return left, np.searchsorted(self.parent, parents, side="right") - left

    def tokens_at(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first index into `end_tokens`, count) of the tokens ending at the given nodes (sorted ids)."""
        left = np.searchsorted(self.end_nodes, nodes, side="left")
        return left, np.searchsorted(self.end_nodes, nodes, side="right") - left


def subset_levels(vocab: Vocabulary, tokens: np.ndarray) -> list[SubsetLevel]:
    """The trie of the given tokens (ids kept), level by level: at depth d a node is a unique (parent, byte) pair."""
    tokens = np.asarray(tokens, dtype=np.int64)
    lengths = vocab.walk_lengths[tokens].astype(np.int64)
    starts = vocab.offsets[tokens].astype(np.int64)
    node = np.zeros(tokens.shape[0], dtype=np.int64)
    levels: list[SubsetLevel] = []
    depth = 0
    while tokens.shape[0]:
        keys = node * 256 + vocab.data[starts + depth].astype(np.int64)
        unique, inverse = np.unique(keys, return_inverse=True)
        node = inverse.reshape(-1).astype(np.int64)
        depth += 1
        ending = lengths == depth
        order = np.argsort(node[ending], kind="stable")
        levels.append(SubsetLevel((unique >> 8).astype(np.int32), (unique & 255).astype(np.uint8),
                                  tokens[ending][order].astype(np.int32), node[ending][order].astype(np.int32)))
        keep = ~ending
        tokens, node, starts, lengths = tokens[keep], node[keep], starts[keep], lengths[keep]
    return levels


@dataclass
class SymbolicRow:
    """A row over the vocabulary in codes: 0 dead, 1 needs a deeper stack, 2 + i the outcome `outcomes[i]`.

    Dense (`tokens` None: `codes[t]` per token id) or sparse (`codes[i]` for token `tokens[i]`, others
    dead), whichever is smaller; `needs` lists the code-1 tokens and `needs_levels` their trie (free
    rows only; None where they are over 1/SUBSET_TRIE_SHARE of the vocabulary: the whole trie is
    walked then).  `tables` memoizes, per concrete stack id, the configuration each code composes to.
    """

    codes: np.ndarray
    tokens: np.ndarray | None
    outcomes: list[Outcome]
    needs: np.ndarray
    needs_levels: list[SubsetLevel] | None = None
    tables: OrderedDict[int, np.ndarray] = field(default_factory=OrderedDict)

    @property
    def nbytes(self) -> int:
        """Bytes of the codes, token ids, outcomes and needs trie, plus room for the most composed tables kept."""
        arrays = [self.codes, self.needs] + ([] if self.tokens is None else [self.tokens])
        tables = MAX_COMPOSED_TABLES * (4 * (2 + len(self.outcomes)) + OUTCOME_NBYTES)
        return (sum(int(a.nbytes) for a in arrays) + OUTCOME_NBYTES * len(self.outcomes)
                + sum(level.nbytes for level in self.needs_levels or ()) + tables)

    def table(self, machine: PushdownMachine, config: int) -> np.ndarray:
        """Concrete configuration per code at `config`'s stack (DEAD for codes 0 and 1 and for runs past the cap)."""
        stack = machine.stack_id(config)
        found = self.tables.get(stack)
        if found is not None:
            self.tables.move_to_end(stack)
            return found
        room = machine.room(config)
        values = [DEAD, DEAD] + [machine.resume(config, pops, pushed, state) if peak <= room else DEAD
                                 for pops, pushed, state, peak in self.outcomes]
        found = np.array(values, dtype=np.int32)
        self.tables[stack] = found
        if len(self.tables) > MAX_COMPOSED_TABLES:
            self.tables.popitem(last=False)
        return found

    def expand(self, table: np.ndarray, vocab_size: int) -> np.ndarray:
        """The concrete row (int32 (V,)) for a table of configurations per code (DEAD off a sparse row's tokens)."""
        if self.tokens is None:
            return table[self.codes]
        out = np.full(vocab_size, DEAD, dtype=np.int32)
        out[self.tokens] = table[self.codes]
        return out


def encode_row(stepper: SymbolicStepper, walked: tuple[np.ndarray, np.ndarray, np.ndarray], vocab_size: int,
               allow_dense: bool = True) -> SymbolicRow:
    """Codes for a walk's result: equal outcomes share a code; dense or sparse, whichever is smaller."""
    tokens, index, nodes = walked
    live = index != 0
    tokens, index = tokens[live], index[live]
    outcomes: list[Outcome] = []
    code_of: dict[Outcome, int] = {}
    node_codes = [DEAD_CODE, NEEDS_CODE]
    for node in nodes[2:].tolist():
        outcome = stepper.outcome(node)
        code = code_of.get(outcome)
        if code is None:
            code = code_of[outcome] = 2 + len(outcomes)
            outcomes.append(outcome)
        node_codes.append(code)
    count = 2 + len(outcomes)
    dtype = np.uint8 if count <= 1 << 8 else np.uint16 if count <= 1 << 16 else np.int32
    codes = np.array(node_codes, dtype=dtype)[index]
    needs = np.sort(tokens[codes == NEEDS_CODE]).astype(np.int32)
    itemsize = np.dtype(dtype).itemsize
    if not allow_dense or tokens.size * (4 + itemsize) < vocab_size * itemsize:
        return SymbolicRow(codes, tokens.astype(np.int32), outcomes, needs)
    dense = np.zeros(vocab_size, dtype=dtype)
    dense[tokens] = codes
    return SymbolicRow(dense, None, outcomes, needs)


@dataclass
class ContextRowStats:
    """Lookups of symbolic rows: free rows (per state) and context rows (per state and top two symbols)."""

    free_hits: int = 0
    free_misses: int = 0
    context_hits: int = 0
    context_misses: int = 0
    concrete_steps: int = 0
    evictions: int = 0

    @property
    def hit_rate(self) -> float:
        """Share of row lookups served without a walk of the trie."""
        hits = self.free_hits + self.context_hits
        total = hits + self.free_misses + self.context_misses
        return hits / total if total else 0.0


class ContextRows:
    """Next configurations per token from symbolic rows kept in an LRU bounded in bytes (`max_bytes`).

    `next_states(config)` equals `pushdown_row(machine, config, vocab)`: the free row of config's
    state composed with its stack, context-row entries over it for the tokens that pop what they
    did not push, and concrete steps for those that pop below the top two symbols.
    """

    def __init__(self, machine: PushdownMachine, vocab: Vocabulary, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 1:
            raise StdslError(f"ContextRows: max_bytes must be positive, got {max_bytes}")
        self.machine = machine
        self.vocab = vocab
        self.max_bytes = max_bytes
        self.stepper = SymbolicStepper(machine)
        self.stats = ContextRowStats()
        self._rows: OrderedDict[tuple[Any, ...], SymbolicRow] = OrderedDict()
        self._sizes: dict[tuple[Any, ...], int] = {}
        self._bytes = 0

    def free_row(self, state: int) -> SymbolicRow:
        """The row of `state` on an unknown stack (code 1: the token pops a symbol it did not push)."""
        return self._row(("free", state), lambda: self._build_free(state))

    def context_row(self, free: SymbolicRow, state: int, known: tuple[int, ...], below_empty: bool) -> SymbolicRow:
        """The sparse row over the free row's code-1 tokens with the top symbols `known` (bottom first) on the stack."""
        return self._row(("context", state, known, below_empty),
                         lambda: self._build_context(free, state, known, below_empty))

    def next_states(self, config: int) -> np.ndarray:
        """Next configuration per token from `config` (int32 (V,), DEAD where refused, for specials and eos)."""
        machine = self.machine
        state = machine.state_of(config)
        free = self.free_row(state)
        out = free.expand(free.table(machine, config), self.vocab.size)
        if free.needs.size:
            known, below_empty = machine.stack_top(config, CONTEXT_SYMBOLS)
            context = self.context_row(free, state, known, below_empty)
            out[context.tokens] = context.table(machine, config)[context.codes]
            token_bytes = self.vocab.token_bytes
            for token in context.needs.tolist():
                out[token] = machine.step(config, token_bytes[token])
            self.stats.concrete_steps += int(context.needs.size)
        return out

    def _row(self, key: tuple[Any, ...], build: Callable[[], SymbolicRow]) -> SymbolicRow:
        free = key[0] == "free"
        row = self._rows.get(key)
        if row is not None:
            self._rows.move_to_end(key)
            if free:
                self.stats.free_hits += 1
            else:
                self.stats.context_hits += 1
            return row
        if free:
            self.stats.free_misses += 1
        else:
            self.stats.context_misses += 1
        row = build()
        self._rows[key] = row
        self._sizes[key] = row.nbytes
        self._bytes += self._sizes[key]
        while self._bytes > self.max_bytes and len(self._rows) > 1:
            old, _ = self._rows.popitem(last=False)
            self._bytes -= self._sizes.pop(old)
            self.stats.evictions += 1
        return row

    def _build_free(self, state: int) -> SymbolicRow:
        start = self.stepper.start(state, (), False)
        row = encode_row(self.stepper, symbolic_walk(self.stepper, self.vocab.levels, start), self.vocab.size)
        if 0 < row.needs.size * SUBSET_TRIE_SHARE <= self.vocab.size:
            row.needs_levels = subset_levels(self.vocab, row.needs)
        return row

    def _build_context(self, free: SymbolicRow, state: int, known: tuple[int, ...], below_empty: bool) -> SymbolicRow:
        start = self.stepper.start(state, known, below_empty)
        if free.needs_levels is not None:
            walked = symbolic_walk(self.stepper, free.needs_levels, start)
        else:
            tokens, index, nodes = symbolic_walk(self.stepper, self.vocab.levels, start)
            wanted = np.zeros(self.vocab.size, dtype=bool)
            wanted[free.needs] = True
            keep = wanted[tokens]
            walked = tokens[keep], index[keep], nodes
        return encode_row(self.stepper, walked, self.vocab.size, allow_dense=False)

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached symbolic rows (their composed tables counted at their most)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._rows)
