"""The mask in torch (D.2, D.6): admissible tokens as a `torch.bool` (B, V) tensor on the logits' device.

Each row carries its own constraint.  DFA rows get their next states from the walk over the
packed vocabulary in torch ops (`path="walk"`: the automata of the batch stacked with global state
ids, one gather per byte position over the still-walking tokens, any torch device) or from rows
on demand on the host (`path="rows"`, uploaded); the budget mask of Theorem 21, the boundary
cover (a host token mask that yields where it would leave nothing) and eos-at-acceptance are
then applied as tensor ops.  Rows the host already decided (a pushdown
controller's mask, or the singleton of a forced token) are uploaded as they are.  Every path
equals the token table and the controller's mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from stdsl.caches import CacheKind
from stdsl.errors import StdslError
from stdsl.kernels.combined import stacked_classes
from stdsl.kernels.rows import RowCache
from stdsl.kernels.token_table import DEAD, class_arrays, scaled_table
from stdsl.kernels.vocabulary import Vocabulary
from stdsl.kernels.walk_layout import walk_layout

PATHS = ("walk", "rows")


class CostTable(Protocol):
    """What the budget mask reads of a budget table (the controller's `BudgetTable`): Theorem 21's cost after a
    token ending in state q', 1 + |φ(q')| + need(end(q')), for any states (clipped where no ending exists)."""

    @property
    def num_states(self) -> int: ...

    def through(self, states: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class WalkRow:
    """One DFA row of a batch: the sampling configuration the controller's mask reads.

    `accepting` is the controller's acceptance (no held-back bytes and an accepting state);
    `cover` the boundary cover's token mask (bool (V,), None: any token) and `cover_eos` whether
    it lets the output end; `remaining` and `budget` the budget mask (None: no budget); `rows` the
    controller's rows on demand for the host path (None: rows walked for this call only).
    """

    automaton: Any
    state: int
    accepting: bool
    cover: np.ndarray | None = None
    cover_eos: bool = True
    remaining: int | None = None
    budget: Any = None
    rows: Any = None


Row = WalkRow | np.ndarray | int
"""A batch row: a `WalkRow`, a host-decided bool (V,) mask, or a single forced token id."""


@dataclass(frozen=True)
class TorchVocabulary:
    """A vocabulary's walk layout on one torch device: tokens by length, bytes position-major, lengths, eos."""

    order: torch.Tensor
    alive: tuple[int, ...]
    position_bytes: tuple[torch.Tensor, ...]
    lengths: torch.Tensor
    eos_ids: torch.Tensor
    size: int

    @staticmethod
    def of(vocab: Vocabulary, device: torch.device) -> TorchVocabulary:
        """The device layout of `vocab`, made once per (vocabulary, device)."""

        def build() -> TorchVocabulary:
            layout = walk_layout(vocab)
            return TorchVocabulary(
                order=torch.as_tensor(layout.order, dtype=torch.long, device=device),
                alive=tuple(int(n) for n in layout.alive.tolist()),
                position_bytes=tuple(torch.as_tensor(p, dtype=torch.long, device=device)
                                     for p in layout.position_bytes),
                lengths=torch.as_tensor(vocab.walk_lengths, dtype=torch.int32, device=device),
                eos_ids=torch.as_tensor(vocab.eos_ids, dtype=torch.long, device=device),
                size=vocab.size,
            )

        return vocab.cached(f"torch_vocabulary:{device}", build)


class TorchTables:
    """The scaled class tables of several automata stacked with global state ids, on one device.

    Block i is automaton i with its states offset by `offsets[i]` (D.2's combined table) over the
    stacked byte classes; a step is `scaled[s + byte_class[b]]` and the shared dead sink is the
    last block of `stride`.  Built per distinct set of automata and kept.
    """

    def __init__(self, automata: Sequence[Any], device: torch.device) -> None:
        parts = [class_arrays(a)[:2] for a in automata]
        sizes = [int(t.shape[0]) for t, _ in parts]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        stacked, byte_class = stacked_classes(parts, self.offsets[:-1].tolist())
        self.num_states = int(self.offsets[-1])
        self.stride = int(stacked.shape[1])
        self.sink = self.num_states * self.stride
        self.scaled = torch.as_tensor(scaled_table(stacked).astype(np.int64), device=device)
        self.byte_class = torch.as_tensor(byte_class.astype(np.int64), device=device)
        self.device = device

    def global_state(self, index: int, state: int) -> int:
        """Global id of automaton `index`'s state `state`."""
        return int(self.offsets[index]) + state

    @property
    def nbytes(self) -> int:
        """Bytes of the tables (on their device) and the offsets."""
        tensors = (self.scaled, self.byte_class)
        return int(self.offsets.nbytes) + sum(int(t.numel() * t.element_size()) for t in tensors)


_TABLES: CacheKind[TorchTables] = CacheKind("torch tables")


def torch_tables(automata: Sequence[Any], device: torch.device) -> TorchTables:
    """The stacked tables of these automata (in this order) on `device` (a `stdsl.caches` entry that goes with the
    automata)."""
    return _TABLES.get(tuple(automata), lambda: TorchTables(automata, device), (str(device),))


def walk_next_states_torch(tables: TorchTables, states: torch.Tensor, vocab: TorchVocabulary) -> torch.Tensor:
    """Next global state of every token from each row's global state: (B, V) int64, -1 dead (specials, eos too).

    At byte position i only the first `alive[i]` tokens of the length-sorted order still walk, so
    a step is one add and one gather over them; tokens whose bytes end at i are set aside.
    """
    if states.numel() and (int(states.min()) < 0 or int(states.max()) >= tables.num_states):
        raise StdslError(f"torch walk: states must lie in [0, {tables.num_states - 1}]")
    rows = states.shape[0]
    out = torch.full((rows, vocab.size), DEAD, dtype=torch.long, device=tables.device)
    if not vocab.alive:
        return out
    current = (states.to(torch.long) * tables.stride)[:, None].expand(rows, vocab.alive[0])
    pieces: list[torch.Tensor] = []
    for i, alive in enumerate(vocab.alive):
        current = tables.scaled[current[:, :alive] + tables.byte_class[vocab.position_bytes[i]][None, :]]
        end = vocab.alive[i + 1] if i + 1 < len(vocab.alive) else 0
        pieces.append(current[:, end:alive])
    walked = torch.cat(pieces[::-1], dim=1)
    out[:, vocab.order] = torch.where(walked == tables.sink, DEAD, walked // tables.stride)
    return out


def _host_next_states(row: WalkRow, vocab: Vocabulary) -> np.ndarray:
    """Row T[state, ·] from rows on demand: the controller's cached rows when the row carries them."""
    rows = row.rows if row.rows is not None else RowCache(row.automaton, vocab)
    return rows.next_states(row.state)


def _walk_rows_mask(rows: Sequence[WalkRow], vocab: Vocabulary, device: torch.device, path: str) -> torch.Tensor:
    """Masks of DFA rows: next states by `path`, then cover, budget and eos as tensor ops ((B, V) bool)."""
    device_vocab = TorchVocabulary.of(vocab, device)
    automata = list({id(r.automaton): r.automaton for r in rows}.values())
    index = {id(a): i for i, a in enumerate(automata)}
    if path == "walk":
        tables = torch_tables(automata, device)
        states = torch.as_tensor([tables.global_state(index[id(r.automaton)], r.state) for r in rows],
                                 dtype=torch.long, device=device)
        next_global = walk_next_states_torch(tables, states, device_vocab)
        offsets = torch.as_tensor(tables.offsets[[index[id(r.automaton)] for r in rows]], device=device)
        next_states = torch.where(next_global >= 0, next_global - offsets[:, None], DEAD)
    else:
        host = np.stack([_host_next_states(r, vocab) for r in rows]).astype(np.int64)
        next_states = torch.as_tensor(host, device=device)
    allowed = next_states >= 0
    budgeted = [b for b, r in enumerate(rows) if r.budget is not None and r.remaining is not None]
    if budgeted:
        allowed[budgeted] &= _budget_mask([rows[b] for b in budgeted], next_states[budgeted], device)
    ending = torch.as_tensor([r.accepting for r in rows], dtype=torch.bool, device=device)
    covered_rows = [b for b, r in enumerate(rows) if r.cover is not None]
    if covered_rows:
        cover = torch.as_tensor(np.stack([rows[b].cover for b in covered_rows]), dtype=torch.bool,  # type: ignore[misc]
                                device=device)
        cover_eos = torch.as_tensor([rows[b].cover_eos for b in covered_rows], dtype=torch.bool, device=device)
        before, ends = allowed[covered_rows], ending[covered_rows]
        covered = before & cover
        binding = covered.any(dim=1) | (ends & cover_eos)
        allowed[covered_rows] = torch.where(binding[:, None], covered, before)
        ending[covered_rows] = torch.where(binding, ends & cover_eos, ends)
    allowed[:, device_vocab.eos_ids] = ending[:, None]
    return allowed


def _budget_mask(rows: Sequence[WalkRow], next_states: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Theorem 21's M_r per row: cost(q, t) = 1 + |φ(q')| + need(end(q')) ≤ tokens left (dead tokens: False)."""
    out = torch.zeros(next_states.shape, dtype=torch.bool, device=device)
    for b, row in enumerate(rows):
        assert row.budget is not None and row.remaining is not None
        through = _through(row.budget, device)
        live = next_states[b] >= 0
        cost = through[torch.where(live, next_states[b], 0)]
        out[b] = live & (cost <= row.remaining)
    return out


def _through(budget: CostTable, device: torch.device) -> torch.Tensor:
    """Per next state q': 1 + |φ(q')| + need(end(q')) (`budget.through` of every state); on `device`, cached on the
    table."""
    cached: dict[str, torch.Tensor] = budget.__dict__.setdefault("_torch_through", {})
    hit = cached.get(str(device))
    if hit is None:
        through = budget.through(np.arange(budget.num_states))
        hit = cached[str(device)] = torch.as_tensor(through, device=device)
    return hit


class _TokenPathCosts:
    """need by breadth-first search over a whole token table (every token one step, no forced chains): the
    self-check's own budget, independent of the controller's."""

    def __init__(self, table: np.ndarray, accepting: np.ndarray) -> None:
        self.num_states = int(table.shape[0])
        self.unreachable = np.iinfo(np.int64).max // 4
        need = np.where(accepting, 0, self.unreachable).astype(np.int64)
        frontier = np.flatnonzero(accepting)
        steps = 0
        while frontier.size:
            steps += 1
            reaches = np.isin(table, frontier).any(axis=1) & (need == self.unreachable)
            need[reaches] = steps
            frontier = np.flatnonzero(reaches)
        self.need = need

    def through(self, states: np.ndarray) -> np.ndarray:
        return np.minimum(1 + self.need[states], self.unreachable)


def batch_mask(rows: Sequence[Row], vocab: Vocabulary, device: torch.device | str, *,
               width: int | None = None, path: str | None = None) -> torch.Tensor:
    """Admissible tokens per row as a (B, width) `torch.bool` tensor on `device` (width defaults to V).

    Columns past the vocabulary (logit padding) are never admissible.  `path`: 'walk' (the torch
    walk) or 'rows' (rows on demand on the host); default 'walk' on an accelerator, 'rows' on the CPU.
    """
    device = torch.device(device)
    path = path or ("rows" if device.type == "cpu" else "walk")
    if path not in PATHS:
        raise StdslError(f"torch mask: unknown path {path!r} ({', '.join(PATHS)})")
    width = vocab.size if width is None else width
    if width < vocab.size:
        raise StdslError(f"torch mask: {width} logits cannot hold the vocabulary's {vocab.size} tokens")
    host = np.zeros((len(rows), width), dtype=bool)
    walk_rows = []
    for b, row in enumerate(rows):
        if isinstance(row, WalkRow):
            walk_rows.append(b)
        elif isinstance(row, np.ndarray):
            if row.shape != (vocab.size,):
                raise StdslError(f"torch mask: a host mask has {row.shape[0]} entries, the vocabulary {vocab.size}")
            host[b, : vocab.size] = row
        else:
            if not 0 <= int(row) < vocab.size:
                raise StdslError(f"torch mask: forced token {int(row)} is outside the vocabulary (size {vocab.size})")
            host[b, int(row)] = True
    out = torch.from_numpy(host).to(device)
    if walk_rows:
        out[walk_rows, : vocab.size] = _walk_rows_mask([rows[b] for b in walk_rows], vocab, device, path)  # type: ignore[misc]
    return out


def apply_mask(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """`logits` with every inadmissible entry set to -inf, in place (returned for chaining)."""
    return logits.masked_fill_(allowed.logical_not(), float("-inf"))


def check_torch_mask(device: torch.device | str = "cpu", seed: int = 0) -> int:
    """Self-check of the torch walk on `device` against the token table; returns the rows checked.

    A random byte vocabulary with multibyte tokens, specials and eos; two random automata (a small
    one and one past int16 ids) stacked in one batch, budget and cover rows included.  Raises
    StdslError on the first mismatch.
    """
    from stdsl.kernels.token_table import token_table_rows

    device = torch.device(device)
    rng = np.random.default_rng(seed)
    alphabet = np.asarray([0x22, 0x61, 0x62, 0x7B, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0x00], dtype=np.uint8)
    tokens: list[bytes | None] = [bytes(rng.choice(alphabet, size=int(rng.integers(1, 9))).tolist())
                                  for _ in range(700)]
    tokens += [None, None, b"\xc3\xa9"]
    vocab = Vocabulary(tokens, eos_ids=[700])
    rows: list[Row] = []
    expected: list[np.ndarray] = []
    for num_states in (37, 33000):
        transitions = np.full((num_states, 256), -1, dtype=np.int32)
        live = rng.random((num_states, alphabet.shape[0])) < 0.8
        transitions[:, alphabet] = np.where(live, rng.integers(0, num_states, size=live.shape), -1)
        automaton = _Automaton(transitions, rng.random(num_states) < 0.4)
        states = rng.integers(0, num_states, size=4).tolist()
        table = token_table_rows(transitions, states, vocab, automaton.accepting).astype(np.int64)
        budget = None
        if num_states == 37:
            full = token_table_rows(transitions, range(num_states), vocab, automaton.accepting)
            budget = _TokenPathCosts(full, automaton.accepting)
        for i, state in enumerate(states):
            cover = rng.random(vocab.size) < 0.5 if i == 1 else None
            remaining = 3 if budget is not None and i == 2 else None
            row = WalkRow(automaton, state, bool(automaton.accepting[state]), cover, True, remaining,
                          budget if remaining is not None else None)
            allowed = table[i] >= 0
            if remaining is not None and budget is not None:
                allowed &= _through(budget, torch.device("cpu")).numpy()[np.where(allowed, table[i], 0)] <= remaining
            if cover is not None and ((allowed & cover).any() or row.accepting):
                allowed = allowed & cover
            allowed[vocab.eos_ids] = row.accepting
            rows.append(row)
            expected.append(allowed)
    got = batch_mask(rows, vocab, device, path="walk").cpu().numpy()
    want = np.stack(expected)
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        raise StdslError(f"torch mask on {device}: row {bad[0]} token {bad[1]} differs from the token table")
    return len(rows)


@dataclass(frozen=True)
class _Automaton:
    """A bare (transitions, accepting) pair with the attributes the tables read."""

    transitions: np.ndarray
    accepting: np.ndarray
